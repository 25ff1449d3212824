"""Checks of a transfer notebook's run, shared by the CPU tests and the GPU runner: every video the manifest lists is
decoded again and must be what its controls dictate, and every control preview must hold the controls that were
sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from cookbook_tools import notebooks
from cosmos3_transfer import transfer_settings
from helpers import assets, media

TRANSFER_DIFFUSERS, TRANSFER_VLLM = notebooks.TRANSFER_PAIR
# The videos of a run (name -> hints); each but the quickstart has a `<name>_control.mp4` preview beside it.
VIDEOS = {
    "edge": ("edge",),
    "blur": ("blur",),
    "depth": ("depth",),
    "seg": ("seg",),
    "edge_depth": ("edge", "depth"),
    "edge_chunked": ("edge",),
}


def _fitted_source(size: tuple[int, int], frames: int) -> list[Any]:
    source = media.load_video(assets.assets_dir("transfer") / "videos" / "street.mp4", max_frames=frames)
    return [media.fit_frame(f, *size) for f in source]


def _level_difference(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())


def check_transfer_run(run_dir: Path, preset: str, seed: int, quickstart: tuple[int, int, int]) -> dict[str, Any]:
    """Every video has the frames, frame rate and canvas its controls dictate (the quickstart's literal size and
    length: `quickstart` = (width, height, frames)); every preview holds the controls side by side at that canvas,
    and they are the ones the notebook says: the source's Canny edges, the bundled depth and segmentation."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    outputs = {o["path"]: o for o in manifest["outputs"]}
    expected = {"quickstart"} | set(VIDEOS) | {f"{name}_control" for name in VIDEOS}
    listed = {o["mode"] for o in manifest["outputs"] if o["kind"] == "video"}
    assert listed == expected, sorted(listed ^ expected)
    info = media.probe(run_dir / "quickstart.mp4")
    assert (info.width, info.height, info.num_frames, round(info.fps)) == (*quickstart, 30), info
    for name, hints in VIDEOS.items():
        s = transfer_settings.settings_for(list(hints), preset)
        width, height = s.canvas(832, 480)
        video, preview = (media.probe(run_dir / f"{stem}.mp4") for stem in (name, f"{name}_control"))
        assert (video.codec, video.width, video.height, video.num_frames, round(video.fps), video.has_audio) == (
            "h264",
            width,
            height,
            s.num_frames,
            s.fps,
            False,
        ), (name, video)
        assert (preview.width, preview.height, preview.num_frames) == (width * len(hints), height, s.num_frames), (
            name,
            preview,
        )
        settings = outputs[f"{name}.mp4"]["settings"]
        assert settings["hints"] == "+".join(hints) and outputs[f"{name}.mp4"]["seed"] == seed
        assert settings["control_guidance"] == s.control_guidance and outputs[f"{name}.mp4"]["seconds"] > 0
        assert settings["num_chunks"] == (2 if name == "edge_chunked" else 1), settings
    s = transfer_settings.settings_for("edge", preset)
    size = s.canvas(832, 480)
    canny = np.stack([cv2.Canny(np.asarray(f), 100, 200) for f in _fitted_source(size, s.num_frames)])
    # Each preview is the exact pictures through H.264, so it differs from them by the encoder's error alone: measured
    # 0.55 levels for the edges, 0.75 for the depth and 2.5 for the segmentation (PyAV 18.1.0's libx264, OpenCV
    # 5.1.0's Canny, both pinned in support/locks/). The bounds leave room for another build of the encoder; a preview
    # 20 levels brighter or turned upside down is far outside them.
    edge = media.read_frames(run_dir / "edge_control.mp4")
    assert _level_difference(edge[..., 0], canny) < 3, "the edge preview is not the source's Canny edges"
    folder = assets.assets_dir("transfer") / "controls"
    for hint, offset in (("depth", size[0]), ("seg", 0)):
        bundled = media.to_uint8_frames(
            [media.fit_frame(f, *size) for f in media.load_video(folder / f"street_{hint}.mp4", s.num_frames)]
        )
        shown = media.read_frames(run_dir / ("edge_depth_control.mp4" if hint == "depth" else "seg_control.mp4"))
        assert _level_difference(shown[:, :, offset : offset + size[0]], bundled) < 6, f"the {hint} preview differs"
    return manifest
