"""The demo's gallery page in a real browser. The page is written by `cookbook_tools.gallery.write_gallery`, as
`python -m cookbook_tools.demo` writes it, over the session's runs of both audiovisual notebooks (every mode, at smoke
size on the tiny checkpoint) rather than running them again. Headless Chromium opening gallery.html from disk shows one
card per non-audio output, every H.264 video decodes (a finite non-zero duration, then a picture from its middle),
every sound track and picture loads. A screenshot is kept as an artifact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cookbook_tools import gallery as gallery_page
from cookbook_tools import notebooks
from tests.browser import (
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


def test_gallery_page_plays_every_output_of_both_notebooks(
    tmp_path: Path, page: Any, audiovisual_diffusers_run: Path, audiovisual_vllm_run: Path
) -> None:
    require_chromium()
    runs = [notebooks.run_folder_from(executed) for executed in (audiovisual_diffusers_run, audiovisual_vllm_run)]
    gallery = gallery_page.write_gallery(runs, tmp_path / "gallery.html")

    manifests = [json.loads((run / "manifest.json").read_text()) for run in runs]
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
