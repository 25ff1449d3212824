"""What the real vLLM-Omni server does with transfer jobs, measured on the session's server (`vllm serve <tiny>`):
the facts docs/transfer.md and the transfer notebook build on. A change in vLLM-Omni that alters one of them fails
here first."""

from __future__ import annotations

import json
import time

import cv2
import httpx
import numpy as np
import pytest
from PIL import Image

from cosmos3_transfer import transfer_settings
from helpers import assets, media

# Every test here talks to the session's real vLLM-Omni server.
pytestmark = pytest.mark.slow

FRAMES = 5
CANVAS = (320, 192)


def _send(http: httpx.Client, files: dict, control_type: str | None = "edge", **extra: object) -> httpx.Response:
    form = {"model": "tiny", "prompt": "A street.", "num_frames": FRAMES, "fps": 30, "num_inference_steps": 1}
    # One chunk of FRAMES, as the notebook's `transfer` sends its settings' chunk: left out, the server denoises a
    # chunk of its default length and a 5-frame job takes 14 s instead of 1 on two cores.
    chunked = {"resolution": "256", "num_video_frames_per_chunk": FRAMES, **extra}
    form |= {"seed": 0, "extra_params": json.dumps(chunked)}
    if control_type:
        form["control_type"] = control_type
    return http.post("/v1/videos", data=form, files=files)


def _finish(http: httpx.Client, response: httpx.Response) -> dict:
    job = response.json()
    while job.get("status") in ("queued", "in_progress"):
        time.sleep(0.2)
        job = http.get(f"/v1/videos/{job['id']}").json()
    return job


@pytest.fixture(scope="module")
def clip() -> list:
    source = media.load_video(assets.asset_path("videos/street.mp4", family="transfer"), max_frames=FRAMES)
    return [media.fit_frame(f, *CANVAS) for f in source]


def _upload(frames: list, name: str = "control.mp4") -> tuple:
    return (name, media.lossless_clip(frames, 30), "video/mp4")


def _content(http: httpx.Client, job: dict, tmp_path, name: str) -> np.ndarray:
    assert job["status"] == "completed", job
    path = tmp_path / f"{name}.mp4"
    path.write_bytes(http.get(f"/v1/videos/{job['id']}/content").content)
    return media.read_frames(path)


@pytest.mark.parametrize(
    ("files", "control_type", "message"),
    [
        ({"control_reference": ("notes.txt", b"text", "text/plain")}, "edge", "must be an image or video file"),
        ({"control_reference": ("c.mp4", b"", "video/mp4")}, "edge", "control_reference must not be empty"),
        ({}, "edge", "control_type requires a control_reference upload"),
        ({"control_reference": ("c.mp4", b"\0" * 64, "video/mp4")}, None, "control_reference requires control_type"),
        ({"control_reference": ("c.mp4", b"\0" * 64, "video/mp4")}, "normal", "Control upload type 'normal'"),
    ],
)
def test_the_server_refuses_a_bad_upload_before_the_job(
    http: httpx.Client, files: dict, control_type: str | None, message: str
) -> None:
    response = _send(http, files, control_type)
    assert response.status_code == 400 and message in response.json()["error"]["message"], response.text


def test_transfer_with_sound_is_refused_by_the_room_and_by_the_cookbook(http: httpx.Client, clip: list) -> None:
    # vLLM-Omni alone accepts the job and the pipeline fails it ("Cosmos3 transfer inference cannot be combined with
    # sound generation."); the room limits refuse it at once.
    response = _send(http, {"control_reference": _upload(clip)}, generate_sound=True)
    assert response.status_code == 400 and "comes with a transfer job" in response.json()["error"]["message"]
    with pytest.raises(ValueError, match="generate_sound cannot be combined with control videos"):
        transfer_settings.settings_for("edge", "smoke", generate_sound=True)


def test_the_server_resizes_a_control_of_another_shape_and_cuts_the_clip_to_a_short_one(
    http: httpx.Client, clip: list, tmp_path
) -> None:
    # Why the cookbook checks size and length itself: the server takes both without a word. A 4:3 control turns the
    # 16:9 canvas into the tier's 4:3 one, and a 2-frame control gives a 2-frame video where FRAMES were asked for.
    square = [f.resize((400, 300)) for f in clip]
    video = _content(http, _finish(http, _send(http, {"control_reference": _upload(square)})), tmp_path, "square")
    assert video.shape[1:3] == (256, 320)
    video = _content(http, _finish(http, _send(http, {"control_reference": _upload(clip[:2])})), tmp_path, "short")
    assert video.shape[:3] == (2, *CANVAS[::-1])


@pytest.mark.parametrize(
    ("hint", "derive"),
    [
        ("edge", lambda frames: [Image.fromarray(cv2.Canny(np.asarray(f), 100, 200)).convert("RGB") for f in frames]),
        ("blur", transfer_settings.blur_map),
    ],
)
def test_the_servers_own_edge_and_blur_are_the_notebooks(http: httpx.Client, clip: list, hint, derive, tmp_path):
    # The same job twice: the control derived on the server from the source clip (`{hint: {}}` with the clip as
    # input_reference), and derived here and uploaded. Equal controls give the same video to the last bit.
    on_server = _send(http, {"input_reference": _upload(clip, "source.mp4")}, None, **{hint: {}})
    uploaded = _send(http, {"control_reference": _upload(derive(clip))}, hint)
    a, b = (_content(http, _finish(http, r), tmp_path, f"{hint}{i}") for i, r in enumerate((on_server, uploaded)))
    np.testing.assert_array_equal(a, b)


def test_the_server_weighs_several_controls(http: httpx.Client, clip: list, tmp_path) -> None:
    # vLLM-Omni's `control_weight` (per hint, normalised over the hints) weighs each control's attention pass.
    # Diffusers has no such field: one reason two controls give different videos on the two backends.
    depth = transfer_settings.load_control(
        assets.asset_path("controls/street_depth.mp4", family="transfer"), "depth", FRAMES
    )
    files = {"input_reference": _upload(clip, "source.mp4")}
    files["control_reference"] = _upload([f.resize(CANVAS) for f in depth])
    equal, weighted = (
        _content(http, _finish(http, _send(http, files, "depth", edge=edge)), tmp_path, f"w{i}")
        for i, edge in enumerate(({}, {"control_weight": 3.0}))
    )
    assert np.abs(equal.astype(np.int16) - weighted).mean() > 1
