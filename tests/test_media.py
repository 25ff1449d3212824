"""Media writers, read back by decoding: frame count, size, fps, an AAC stream of the right length."""

import numpy as np
import pytest

from helpers import media
from helpers.errors import MediaError
from tests import calls


def _frames(n=9, h=96, w=160):
    rng = np.random.default_rng(0)
    return rng.random((n, h, w, 3), dtype=np.float32)


def _tone(seconds, rate=48000):
    t = np.arange(int(seconds * rate)) / rate
    return np.stack([np.sin(2 * np.pi * 440 * t), np.sin(2 * np.pi * 660 * t)]).astype(np.float32) * 0.5


def test_video_without_sound_is_h264_yuv420p_with_exact_frames_size_and_fps(tmp_path):
    path = media.write_video(tmp_path / "v.mp4", _frames(17), fps=16)
    info = media.probe(path)
    assert (info.kind, info.codec, info.pix_fmt) == ("video", "h264", "yuv420p")
    assert (info.num_frames, info.width, info.height, info.fps) == (17, 160, 96, 16.0)
    assert info.audio is None


@pytest.mark.parametrize("audio_seconds", [0.2, 9 / 24, 2.0])
def test_video_with_sound_has_a_stereo_aac_track_as_long_as_the_video(tmp_path, audio_seconds):
    # The pipeline's sound can be a little longer or shorter than the picture: it is fitted to frames / fps.
    path = media.write_video(tmp_path / "s.mp4", _frames(9), fps=24, audio=_tone(audio_seconds), sample_rate=48000)
    info = media.probe(path)
    assert info.num_frames == 9
    assert info.audio is not None
    assert (info.audio.codec, info.audio.channels, info.audio.sample_rate) == ("aac", 2, 48000)
    assert info.audio.duration_s == pytest.approx(9 / 24, abs=0.03)
    samples, rate = media.read_audio(path)
    assert rate == 48000 and samples.shape[0] == 2 and np.abs(samples).max() > 0.1


def test_png_and_wav_round_trip(tmp_path):
    frame = _frames(1, 64, 128)
    png = media.write_image(tmp_path / "i.png", frame)
    info = media.probe(png)
    assert (info.kind, info.width, info.height) == ("image", 128, 64)
    assert np.array_equal(media.read_frames(png)[0], media.to_uint8_frames(frame)[0])
    wav = media.write_wav(tmp_path / "a.wav", _tone(0.5), 48000)
    winfo = media.probe(wav)
    assert winfo.audio.channels == 2 and winfo.audio.sample_rate == 48000
    assert winfo.audio.duration_s == pytest.approx(0.5)


def test_a_failed_write_leaves_no_file_behind(tmp_path):
    with pytest.raises(MediaError):
        media.write_video(tmp_path / "bad.mp4", np.zeros((2, 8, 8)), fps=24)
    with pytest.raises(MediaError, match="sample_rate"):
        media.write_video(tmp_path / "bad.mp4", _frames(5), fps=24, audio=_tone(0.2))
    assert list(tmp_path.iterdir()) == []


def test_an_existing_file_is_replaced_only_by_a_complete_one(tmp_path):
    target = tmp_path / "v.mp4"
    media.write_video(target, _frames(5), fps=24)
    before = target.read_bytes()
    with pytest.raises(MediaError):
        media.write_video(target, np.zeros((2, 8, 8)), fps=24)
    assert target.read_bytes() == before


def test_missing_or_unreadable_conditioning_media_give_clear_errors(tmp_path):
    with pytest.raises(MediaError, match="Conditioning image not found"):
        media.load_image(tmp_path / "nope.png")
    junk = tmp_path / "junk.png"
    junk.write_bytes(b"not an image at all")
    with pytest.raises(MediaError, match="not a readable image"):
        media.load_image(junk)
    with pytest.raises(MediaError, match="Conditioning video not found"):
        media.load_video(tmp_path / "nope.mp4")
    bad_video = tmp_path / "junk.mp4"
    bad_video.write_bytes(b"\x00" * 100)
    with pytest.raises(MediaError):
        media.load_video(bad_video)


def test_load_video_returns_rgb_frames(tmp_path):
    path = media.write_video(tmp_path / "v.mp4", _frames(9), fps=24)
    frames = media.load_video(path)
    assert len(frames) == 9 and frames[0].size == (160, 96) and frames[0].mode == "RGB"


@pytest.mark.slow
def test_encoding_is_byte_for_byte_reproducible_after_pipeline_work(tiny_pipe, tmp_path):
    """Same frames, same file: the two notebooks and the server must agree exactly for the same seed.

    libx264's default preset broke this (decoded frames up to 60 levels apart), most often for pipeline output
    encoded right after other media work; so: several sizes, interleaved with decoding and generation.
    """
    from helpers import audiovisual_settings

    pipe, _ = tiny_pipe
    for width, height in [(160, 96), (192, 96), (64, 64)]:
        s = audiovisual_settings.settings_for("t2v", "smoke", num_frames=9, width=width, height=height)
        digests, decoded = set(), []
        for i in range(6):
            frames = calls.generate(pipe, s, "a harbor").video
            path = media.write_video(tmp_path / f"{width}-{i}.mp4", frames, fps=24)
            digests.add(path.read_bytes())
            decoded.append(media.read_frames(path))
        assert len(digests) == 1, f"{width}x{height}: {len(digests)} different files from the same frames"
    # Lossy (and noise is the worst case for 4:2:0 chroma), but the same picture on average.
    error = np.abs(decoded[0].astype(int) - media.to_uint8_frames(frames).astype(int)).mean()
    assert error < 40  # two unrelated noise frames differ by about 85


def test_hstack_joins_clips_frame_by_frame_as_long_as_the_shortest():
    from PIL import Image

    left = [Image.new("RGB", (32, 16), (255, 0, 0))] * 3
    right = [Image.new("L", (8, 16), 255)] * 2
    joined = media.hstack([left, right])
    assert len(joined) == 2 and joined[0].size == (40, 16)
    assert joined[0].getpixel((0, 0)) == (255, 0, 0) and joined[1].getpixel((39, 15)) == (255, 255, 255)
