"""Concurrency, authentication and failure behaviour of the stand-in server and the client side, over real HTTP."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from helpers import media, presets, runs
from helpers.with_vllm_omni import api
from helpers.with_vllm_omni.api import OmniAPIError, ServerUnavailableError
from omni_standin.launcher import LocalServer, free_port

KEY = "test-key"
SMALL = presets.settings_for(
    "t2v", "smoke", width=64, height=64, num_frames=5, num_inference_steps=1, guidance_scale=1.0
)


def sync_video(http: httpx.Client, prompt: str, settings: presets.GenerationSettings) -> httpx.Response:
    return http.post("/v1/videos/sync", data={"model": "tiny", "prompt": prompt, **api.video_fields(settings)})


@pytest.fixture(scope="module")
def server(_isolated_cache: Path) -> Iterator[LocalServer]:
    with LocalServer.start("tiny", device="cpu", api_key=KEY) as running:
        yield running


def test_api_key_guards_v1_but_not_health(server: LocalServer) -> None:
    assert httpx.get(f"{server.base_url}/health").status_code == 200
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        response = httpx.get(f"{server.base_url}/v1/models", headers=headers)
        assert (response.status_code, response.json()) == (401, {"error": "Unauthorized"})
    with pytest.raises(OmniAPIError, match="requires an API key") as err:
        api.wait_for_server(server.base_url, deadline_s=5)
    assert err.value.status == 401
    assert api.wait_for_server(server.base_url, deadline_s=5, api_key=KEY) == ["tiny"]


def test_eight_concurrent_requests_all_complete_with_valid_media(server: LocalServer, tmp_path: Path) -> None:
    with api.http_client(server.base_url, api_key=KEY) as http, ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: sync_video(http, f"clip {i}", SMALL), range(8)))
    assert len({r.headers["X-Request-Id"] for r in results}) == 8
    for i, result in enumerate(results):
        path = tmp_path / f"{i}.mp4"
        path.write_bytes(result.content)
        info = media.probe(path)
        assert (info.codec, info.width, info.height, info.num_frames) == ("h264", 64, 64, 5)


def test_same_seed_gives_the_same_video_twice(server: LocalServer) -> None:
    with api.http_client(server.base_url, api_key=KEY) as http:
        first, second = (sync_video(http, "same", SMALL).content for _ in range(2))
    assert first == second


def test_waiting_for_a_server_that_is_not_there_says_how_to_start_one() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ServerUnavailableError) as err:
        api.wait_for_server(url, deadline_s=0.5, poll_s=0.1)
    assert "python -m omni_standin tiny" in str(err.value) and "vllm serve nvidia/Cosmos3-Nano --omni" in str(err.value)


def test_an_error_answer_raises_with_the_servers_message_and_parameter(server: LocalServer) -> None:
    with api.http_client(server.base_url, api_key=KEY) as http, pytest.raises(OmniAPIError) as err:
        http.post("/v1/videos/sync", data={"model": "tiny", "prompt": "x", "size": "big"})
    assert err.value.status == 400 and err.value.param == "body.size" and "validation error" in err.value.message


def test_a_server_killed_mid_request_leaves_earlier_outputs_intact(_isolated_cache: Path, tmp_path: Path) -> None:
    run = runs.Run.create(tmp_path, backend="vllm_omni", model="tiny")
    slow = presets.settings_for("t2v", "smoke", num_inference_steps=60)
    with LocalServer.start("tiny", device="cpu") as doomed, api.http_client(doomed.base_url) as http:
        with run.generation(SMALL) as gen:
            gen.save_bytes(sync_video(http, "before", SMALL).content, ".mp4")
        saved = (run.path / "t2v.mp4").read_bytes()
        failure: list[BaseException] = []

        def request() -> None:
            try:
                sync_video(http, "during", slow)
            except BaseException as exc:  # noqa: BLE001 - the assertion below inspects it
                failure.append(exc)

        worker = threading.Thread(target=request)
        worker.start()
        deadline = 30.0
        while "POST /v1/videos/sync" not in doomed.log_text().split("before")[-1] and deadline > 0:
            worker.join(0.2)
            deadline -= 0.2
        doomed.process.send_signal(signal.SIGKILL)
        worker.join(30)
    assert len(failure) == 1 and isinstance(failure[0], httpx.TransportError), failure
    assert (run.path / "t2v.mp4").read_bytes() == saved
    manifest = json.loads((run.path / runs.MANIFEST_NAME).read_text())
    assert [o["path"] for o in manifest["outputs"]] == ["t2v.mp4"] and media.probe(run.path / "t2v.mp4").num_frames == 5


def test_a_client_that_hangs_up_cancels_its_image_generation(server: LocalServer) -> None:
    """As vLLM-Omni's images route: the abandoned generation stops at its next step instead of finishing."""
    slow = {"prompt": "slow", "size": "512x512", "num_inference_steps": 200, "guidance_scale": 7.0, "seed": 1}
    headers = {"Authorization": f"Bearer {KEY}"}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{server.base_url}/v1/images/generations", json=slow, headers=headers, timeout=1.0)
    deadline = time.monotonic() + 60
    while "Image generation cancelled: the client disconnected." not in server.log_text():
        assert time.monotonic() < deadline, server.log_text()[-2000:]
        time.sleep(0.2)
    quick = {**slow, "num_inference_steps": 1}
    response = httpx.post(f"{server.base_url}/v1/images/generations", json=quick, headers=headers, timeout=60)
    assert response.status_code == 200 and response.json()["data"][0]["b64_json"]
