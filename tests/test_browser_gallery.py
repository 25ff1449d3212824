"""The demo's gallery page in a real browser: `python -m cookbook_tools.demo` runs both notebooks on the tiny
checkpoint, and headless Chromium opening its gallery.html from disk shows one card per non-audio output, every H.264
video decodes (a finite non-zero duration, then a picture from its middle), every sound track and picture loads.
A screenshot is kept as an artifact."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cookbook_tools import notebooks

from tests.browser import (
    REPO,
    assert_frames_decode,
    assert_playable,
    chromium,
    media_state,
    page,
    require_chromium,
    screenshot,
)

__all__ = ["chromium", "page"]  # fixtures used by name below

pytestmark = [pytest.mark.browser, pytest.mark.timeout(420)]

# One still, one silent video, one video with sound: every kind of card, at a fraction of the six modes' time.
MODES = "t2i,t2v,t2v_sound"


def test_gallery_page_plays_every_output_of_the_demo(tmp_path: Path, page: Any) -> None:
    require_chromium()
    demo = subprocess.run(
        [
            sys.executable,
            "-m",
            "cookbook_tools.demo",
            "--output-dir",
            str(tmp_path),
            "--modes",
            MODES,
            "--notebooks",
            ",".join(notebooks.PAIR),  # the action pair's cards are the same kinds: videos and plots
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=360,
    )
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    gallery = tmp_path / "gallery.html"
    assert f"Gallery of every output: {gallery}" in demo.stdout

    manifests = [json.loads(p.read_text()) for p in sorted((tmp_path / "media").glob("*/manifest.json"))]
    assert {m["backend"] for m in manifests} == {"diffusers", "vllm_omni"}, "both notebooks ran"
    outputs = [o for m in manifests for o in m["outputs"]]
    kinds = [o["kind"] for o in outputs]

    page.goto(gallery.as_uri())
    cards = page.locator(".card")
    assert cards.count() == len([k for k in kinds if k in ("image", "video")])
    state = media_state(page)
    assert len(state["videos"]) == kinds.count("video")
    assert len(state["audios"]) == kinds.count("audio")
    assert len(state["images"]) == kinds.count("image")
    assert_playable(state["videos"])
    assert_playable(state["audios"])
    assert all(i["naturalWidth"] > 0 for i in state["images"]), state["images"]
    # The decoded length is what the manifest says was written (17 frames at 24 fps, give or take a frame).
    expected = sorted(o["num_frames"] / o["fps"] for o in outputs if o["kind"] == "video")
    decoded = sorted(v["duration"] for v in state["videos"])
    assert all(abs(d - e) < 0.1 for d, e in zip(decoded, expected, strict=True)), (decoded, expected)
    assert_frames_decode(page)
    assert page.errors == []
    screenshot(page, "gallery")
