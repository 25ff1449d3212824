"""Notebook display helpers render real media: a PNG waveform, an embedded H.264 player, an escaped table."""

import numpy as np

from helpers import display, media


def test_waveform_is_a_png_of_the_audio_track(tmp_path):
    t = np.arange(24000) / 48000
    tone = np.stack([np.sin(2 * np.pi * 220 * t), np.sin(2 * np.pi * 330 * t)]).astype(np.float32)
    frames = np.random.default_rng(0).random((13, 64, 96, 3), dtype=np.float32)
    path = media.write_video(tmp_path / "s.mp4", frames, fps=24, audio=tone, sample_rate=48000)
    image = display.waveform(path)
    assert image.data[:8] == b"\x89PNG\r\n\x1a\n"
    player = display.video(path)._repr_html_()
    assert "<video" in player and "data:video/mp4;base64," in player


def test_table_escapes_values():
    html = display.table([{"mode": "<t2v>", "seconds": 1.5}]).data
    assert "&lt;t2v&gt;" in html and "<th>seconds</th>" in html


def test_side_by_side_embeds_each_video_under_its_caption(tmp_path):
    frames = np.zeros((5, 64, 64, 3), dtype=np.uint8)
    paths = {name: media.write_video(tmp_path / f"{name}.mp4", frames, 10) for name in ("edge <control>", "generated")}
    html = display.side_by_side(paths).data
    assert html.count("data:video/mp4;base64,") == 2 and "edge &lt;control&gt;" in html and html.count("<td") == 2
