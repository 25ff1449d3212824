"""What the real vLLM-Omni server does with action jobs, measured on the session's server (`vllm serve <tiny>`):
the facts docs/action.md and the action notebook build on. A change in vLLM-Omni that alters one of them fails
here first."""

from __future__ import annotations

import json
import time

import httpx
import numpy as np
import pytest

from cosmos3_action import action_settings, actions
from helpers import assets, media

# Every test here talks to the session's real vLLM-Omni server.
pytestmark = pytest.mark.slow

CHUNK = 8


def _send(http: httpx.Client, s: action_settings.ActionSettings, upload: tuple, **fields: object) -> httpx.Response:
    extra = {"action_mode": s.task, "domain_name": s.domain_name, "action_chunk_size": s.chunk_size}
    extra |= {"resolution": str(s.resolution_tier), "use_system_prompt": False, **fields}
    form = {"model": "tiny", "prompt": action_settings.caption(s, 320, 192), "num_frames": s.num_frames, "fps": s.fps}
    form |= {"num_inference_steps": 1, "seed": 0, "extra_params": json.dumps(extra)}
    return http.post("/v1/videos", data=form, files={"input_reference": upload})


def _job(http: httpx.Client, s: action_settings.ActionSettings, upload: tuple, **fields: object) -> dict:
    job = _send(http, s, upload, **fields).json()
    while job["status"] in ("queued", "in_progress"):
        time.sleep(0.2)
        job = http.get(f"/v1/videos/{job['id']}").json()
    return job


@pytest.fixture(scope="module")
def start() -> tuple:
    image = media.load_image(assets.asset_path("images/av_drive_start.png", family="action")).resize((320, 192))
    return ("start.png", media.png_bytes(image), "image/png")


@pytest.fixture(scope="module")
def car() -> np.ndarray:
    return actions.read(assets.asset_path("trajectories/av_drive.npy", family="action"))[0][:CHUNK]


def _settings(task: str) -> action_settings.ActionSettings:
    return action_settings.settings_for(f"{action_settings.TASKS[task]}_av", "smoke", chunk_size=CHUNK)


def test_inverse_dynamics_answers_with_the_actions_and_a_video(http: httpx.Client) -> None:
    frames = media.load_video(assets.asset_path("videos/av_drive.mp4", family="action"), max_frames=CHUNK + 1)
    clip = ("clip.mp4", media.lossless_clip([f.resize((320, 192)) for f in frames], 10), "video/mp4")
    job = _job(http, _settings("inverse_dynamics"), clip, raw_action_dim=9)
    assert job["status"] == "completed", job
    assert job["action"]["shape"] == [CHUNK, 9] and job["action"]["action_mode"] == "inverse_dynamics"
    assert job["action"]["domain_id"] == 1 and np.isfinite(job["action"]["data"]).all()
    content = http.get(f"/v1/videos/{job['id']}/content")
    assert content.status_code == 200 and content.content[4:8] == b"ftyp"  # an MP4, not an empty body


def test_the_server_does_not_check_the_action_width_so_the_cookbook_does(
    http: httpx.Client, start: tuple, car: np.ndarray
) -> None:
    # A car's actions are 9 wide; 7 are taken and run. diffusers refuses them, and so do the cookbook's checks.
    job = _job(http, _settings("forward_dynamics"), start, action=car[:, :7].tolist())
    assert job["status"] == "completed" and job["action"]["shape"] == [CHUNK, 7]
    with pytest.raises(ValueError, match="actions have 7 columns"):
        action_settings.check_actions(car[:, :7], _settings("forward_dynamics"))


@pytest.mark.parametrize(
    ("fields", "param", "message"),
    [
        ({"domain_name": "tank"}, "extra_params.domain_name", "'tank' is not an embodiment vLLM-Omni 0.30.0 knows"),
        ({"action_chunk_size": 4}, "num_frames", "does not fit action_chunk_size=4"),
    ],
)
def test_what_the_pipeline_would_fail_the_room_limits_refuse_at_once(
    http: httpx.Client, start: tuple, car: np.ndarray, fields: dict, param: str, message: str
) -> None:
    """vLLM-Omni alone accepts these jobs and Cosmos 3's pipeline fails them (code 500, `Unknown Cosmos3 action
    domain_name='tank'`, `... require num_frames to equal action_chunk_size or action_chunk_size + 1`); the session's
    server, behind the room limits, refuses them with a 400 naming the field before the job exists."""
    response = _send(http, _settings("forward_dynamics"), start, action=car.tolist(), **fields)
    error = response.json()["error"]
    assert response.status_code == 400 and error["param"] == param and message in error["message"], response.text


def test_a_form_field_is_limited_to_one_mebibyte(http: httpx.Client, start: tuple) -> None:
    """Starlette's limit on a non-file part of a multipart form: 1,048,576 bytes. Under it the job is accepted;
    over it the request is refused before any work."""
    small = {"model": "tiny", "size": "64x64", "num_frames": 5, "num_inference_steps": 1}

    def send(size: int) -> httpx.Response:
        return http.post("/v1/videos", data={**small, "prompt": "x" * size}, files={"input_reference": start})

    accepted = send(1024 * 1024)
    assert accepted.status_code == 200, accepted.text
    job = accepted.json()
    while job["status"] in ("queued", "in_progress"):
        time.sleep(0.2)
        job = http.get(f"/v1/videos/{job['id']}").json()
    http.delete(f"/v1/videos/{job['id']}")
    refused = send(1024 * 1024 + 1)
    assert refused.status_code == 400 and refused.json() == {"detail": "Part exceeded maximum size of 1024KB."}
