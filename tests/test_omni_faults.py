"""The real vLLM-Omni server as the notebook starts and uses it: authentication, concurrency, and every way it can
fail to start or die, each reported with the exit status, the end of its log, the command and the fix."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import threading
import time
import urllib.parse
from pathlib import Path

import httpx
import pytest

from helpers import audiovisual_settings, media, runs
from helpers.errors import CookbookError
from local_server import launcher, omni_http
from local_server.omni_http import OmniAPIError, ServerUnavailableError
from local_server.server import (
    Endpoint,
    LocalServer,
    ServerExitedError,
    ServerFailedError,
    ServerStartError,
    free_port,
    server_flags,
)
from tests.conftest import SERVER_KEY
from tuning.notebook_calls import omni_fields

SMALL = audiovisual_settings.settings_for(
    "t2v", "smoke", width=64, height=64, num_frames=5, num_inference_steps=1, guidance_scale=1.0
)


def sync_video(http: httpx.Client, prompt: str, settings: audiovisual_settings.AudiovisualSettings) -> httpx.Response:
    return http.post("/v1/videos/sync", data={"model": "tiny", "prompt": prompt, **omni_fields()(settings)})


@pytest.mark.slow
def test_api_key_guards_v1_but_not_health(omni_server: LocalServer) -> None:
    assert httpx.get(f"{omni_server.base_url}/health").status_code == 200
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        response = httpx.get(f"{omni_server.base_url}/v1/models", headers=headers)
        assert response.status_code == 401, response.text
    with pytest.raises(OmniAPIError, match="requires an API key"):
        omni_http.wait_for_server(omni_server.base_url, deadline_s=5)
    assert omni_http.wait_for_server(omni_server.base_url, deadline_s=5, api_key=SERVER_KEY) == ["tiny"]


@pytest.mark.slow
def test_same_seed_gives_the_same_video_twice(omni_server: LocalServer) -> None:
    with omni_http.http_client(omni_server.base_url, api_key=SERVER_KEY) as http:
        first, second = (sync_video(http, "same", SMALL).content for _ in range(2))
    assert first == second


def test_waiting_for_a_server_that_is_not_there_says_how_to_start_one() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ServerUnavailableError) as err:
        omni_http.wait_for_server(url, deadline_s=0.5, poll_s=0.1)
    assert "bash scripts/serve_vllm_omni.sh MODEL --port 8000" in str(err.value) and "BASE_URL='auto'" in str(err.value)


@pytest.mark.slow
def test_an_error_answer_raises_with_the_servers_message_and_parameter(omni_server: LocalServer) -> None:
    with omni_http.http_client(omni_server.base_url, api_key=SERVER_KEY) as http, pytest.raises(OmniAPIError) as err:
        http.post("/v1/videos/sync", data={"model": "tiny", "prompt": "x", "size": "big"})
    assert err.value.status == 400 and err.value.param == "body.size" and "validation error" in err.value.message


# A request the tiny checkpoint denoises for about 15 s on two idle cores, one step every quarter second: long enough
# that a test acting when the first step is logged acts mid-generation. (vLLM-Omni 0.30.0's UniPC scheduler fails
# on 134 steps or more at the smoke size with `assert self.this_order > 0`, and the room limits stop at 50 steps, so
# more frames slow it.)
SLOW = audiovisual_settings.settings_for("t2v", "smoke", width=320, height=192, num_frames=41, num_inference_steps=50)
STEP_LOGGED = re.compile(rf"\b([1-9]\d*)/{SLOW.num_inference_steps} \[")
PIPELINE_ERROR = {"extra_params": json.dumps({"negative_metadata_mode": "sideways"})}  # refused inside the pipeline


def wait_until_denoising(server: LocalServer, log_from: int, timeout_s: float = 300) -> None:
    """Until the server's progress bar shows a step of `SLOW` done after `log_from`: the request was accepted and is
    in the denoising loop. A condition, not a sleep: it holds however busy the machine is."""
    deadline = time.monotonic() + timeout_s
    while not STEP_LOGGED.search(server.log_text()[log_from:]):
        assert server.process.poll() is None, server.log_tail()
        assert time.monotonic() < deadline, f"no denoising step logged within {timeout_s} s:\n{server.log_tail()}"
        time.sleep(0.05)


def send_in_background(call) -> tuple[threading.Thread, list[BaseException]]:
    failure: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            failure.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    return worker, failure


@pytest.mark.slow
def test_a_client_that_hangs_up_mid_generation_leaves_the_server_serving(
    omni_server: LocalServer, tmp_path: Path
) -> None:
    body = urllib.parse.urlencode({"model": "tiny", "prompt": "abandoned", **omni_fields()(SLOW)}).encode()
    head = (
        f"POST /v1/videos/sync HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {SERVER_KEY}\r\n"
        f"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    log_from = len(omni_server.log_text())
    port = int(omni_server.base_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port)) as client:
        client.sendall(head + body)
        wait_until_denoising(omni_server, log_from)
    # Hung up mid-generation; the next request is served once the server is free again.
    with omni_http.http_client(omni_server.base_url, api_key=SERVER_KEY, timeout_s=300) as http:
        (tmp_path / "after.mp4").write_bytes(sync_video(http, "after", SMALL).content)
    assert media.probe(tmp_path / "after.mp4").num_frames == 5


# A plain httpx request of a lesson cell's own, in IPython, after the server died.
PLAIN_REQUEST = """
import httpx
httpx.post("{url}/v1/videos/sync", data={{"model": "tiny", "prompt": "plain"}}, timeout=60)
"""


@pytest.mark.slow
def test_a_server_that_fails_a_request_then_dies_mid_request_says_so_each_time(
    omni_server: LocalServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a notebook meets from a local server that goes wrong, on one server: an error answer of its own (its
    message and the end of its log); then the machine losing it (its whole process group killed) while a request is
    in the denoising loop: the waiting call, a later call and a lesson cell's plain httpx request in IPython each
    name the exit status and the log, not a bare "connection error"; the run's earlier files are untouched.

    This server runs without the room limits (`--room-limits off`): its video before the fault is the session
    server's for the same request, byte for byte, so the limits pass an accepted request on unchanged."""
    from IPython.core.interactiveshell import InteractiveShell

    run = runs.Run.create(tmp_path, backend="vllm_omni", model="tiny")
    with LocalServer.start("tiny", flags=["--no-guardrails", "--room-limits", "off"], progress=False) as doomed:
        endpoint = Endpoint(doomed.base_url, None, doomed)
        with omni_http.http_client(doomed.base_url, transport=endpoint.transport()) as http:
            with pytest.raises(ServerFailedError) as answered:
                http.post(
                    "/v1/videos/sync",
                    data={"model": "tiny", "prompt": "x", **omni_fields()(SMALL), **PIPELINE_ERROR},
                )
            with pytest.raises(OmniAPIError) as refused:  # a bad request is the request's fault: no log to read
                http.post("/v1/videos/sync", data={"model": "tiny", "prompt": "x", "size": "big"})
            with run.generation(SMALL) as gen:
                gen.save_bytes(sync_video(http, "before", SMALL).content, ".mp4")
            saved = (run.path / "t2v.mp4").read_bytes()
            with omni_http.http_client(omni_server.base_url, api_key=SERVER_KEY) as limited:
                assert sync_video(limited, "before", SMALL).content == saved
            assert "room limits: off" in doomed.log_text()
            log_from = len(doomed.log_text())
            worker, failure = send_in_background(lambda: sync_video(http, "during", SLOW))
            wait_until_denoising(doomed, log_from)
            os.killpg(doomed.process.pid, signal.SIGKILL)
            worker.join(60)
            with pytest.raises(ServerExitedError) as gone:
                sync_video(http, "after", SMALL)
        shell = InteractiveShell.instance()
        endpoint.explain_lost_connections_in(shell)
        capsys.readouterr()
        shell.run_cell(PLAIN_REQUEST.format(url=doomed.base_url))
        in_ipython = capsys.readouterr()
        log = str(doomed.log_path)
    message = str(answered.value)
    assert answered.value.status == 500 and "negative_metadata_mode must be" in message
    assert f"Last lines of its log ({log})" in message and "negative_metadata_mode" in message.split(log, 1)[1]
    assert type(refused.value) is OmniAPIError and "Last lines" not in str(refused.value)
    assert len(failure) == 1 and isinstance(failure[0], ServerExitedError), failure
    for exited in (str(failure[0]), str(gone.value), in_ipython.err):
        assert f"exited with status {-signal.SIGKILL}" in exited and f"Last lines of its log ({log})" in exited
    assert "while this request waited" in str(failure[0]) and "Command:" in str(failure[0])
    assert "ConnectError" in in_ipython.out + in_ipython.err  # the reader's own traceback is still shown
    assert (run.path / "t2v.mp4").read_bytes() == saved
    manifest = json.loads((run.path / runs.MANIFEST_NAME).read_text())
    assert [o["path"] for o in manifest["outputs"]] == ["t2v.mp4"] and media.probe(run.path / "t2v.mp4").num_frames == 5


def test_a_port_in_use_fails_at_once_naming_the_port_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fresh cache and environment folder of its own, so what the failed start left behind can be seen.
    monkeypatch.setenv("COSMOS3_COOKBOOK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(launcher.ENV_VAR, str(tmp_path / "env"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ServerStartError) as err:
            LocalServer.start(
                "tiny", port=port, flags=["--no-guardrails"], progress=False, log_path=tmp_path / "server.log"
            )
    # At once: before the tiny checkpoint is built, the server environment is checked (or its lock taken) and the
    # server's command is run; only the log exists.
    assert [p.name for p in tmp_path.iterdir()] == ["server.log"]
    assert f"{launcher.PREFIX} $ " not in (tmp_path / "server.log").read_text()
    message = str(err.value)
    assert "exited with status 2" in message and f"Port {port} on 127.0.0.1 is in use" in message
    assert f"--port {port + 1}" in message and "Command:" in message and "Fix:" in message


def test_a_model_that_is_not_there_fails_before_the_server_starts(tmp_path: Path) -> None:
    with pytest.raises(CookbookError) as err:
        LocalServer.start(str(tmp_path / "no-such-checkpoint"), progress=False, log_path=tmp_path / "server.log")
    assert "is written as a path, and there is no folder at" in str(err.value) and "MODEL='tiny'" in str(err.value)
    assert not (tmp_path / "server.log").exists()  # refused before a server process started


@pytest.mark.slow
def test_a_flag_vllm_rejects_ends_the_start_with_the_servers_own_words(
    omni_server: LocalServer, tmp_path: Path
) -> None:
    with pytest.raises(ServerStartError) as err:
        LocalServer.start(
            "tiny", flags=["--no-such-flag", "--no-guardrails"], progress=False, log_path=tmp_path / "server.log"
        )
    message = str(err.value)
    assert "exited with status" in message and "--no-such-flag" in message and "Last lines of its log" in message
    log = message.split("Last lines of its log (", 1)[1].split(")", 1)[0]
    assert "--no-such-flag" in Path(log).read_text()  # kept for the reader


def test_a_server_reachable_from_other_machines_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    with pytest.raises(launcher.ServeError, match="--api-key"):
        launcher.check_exposure("0.0.0.0", ["--port", "8000"])
    launcher.check_exposure("0.0.0.0", ["--api-key", "secret"])
    launcher.check_exposure("127.0.0.1", [])


def test_the_cookbooks_defaults_fill_only_what_the_flags_leave_out(_isolated_cache: Path) -> None:
    args = launcher.command("tiny", ["--port", "9000"], gpu=False)
    assert args[:2] == ["vllm", "serve"] and args[3] == "--omni" and Path(args[2], "model_index.json").is_file()
    assert args[4:] == ["--port", "9000", "--host", "127.0.0.1", "--served-model-name", "tiny", "--dtype", "float32"]
    mine = ["--host", "::1", "--served-model-name", "mine", "--dtype=bfloat16"]
    assert launcher.command("tiny", mine, gpu=False)[4:] == mine
    assert launcher.command("tiny", [], gpu=True)[-2:] == ["--served-model-name", "tiny"]  # a GPU keeps bf16


def test_a_hub_id_without_a_gpu_is_refused_before_any_download_unless_the_cpu_is_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(launcher.DEVICE_ENV, raising=False)
    with pytest.raises(CookbookError, match='set MODEL = "tiny"') as err:
        launcher.command("nvidia/Cosmos3-Nano", [], gpu=False)
    assert "Nothing was downloaded" in str(err.value)
    # Asked for on purpose, it goes on to the download (here offline, with nothing cached: the download's advice).
    monkeypatch.setenv(launcher.DEVICE_ENV, "cpu")
    with pytest.raises(CookbookError, match="(?s)Could not load MODEL='nvidia/Cosmos3-Nano'.*hf auth login"):
        launcher.command("nvidia/Cosmos3-Nano", [], gpu=False)


def test_the_notebooks_flags_for_a_server_it_starts() -> None:
    assert server_flags("tiny", "auto", "none") == ["--enforce-eager", "--no-guardrails"]
    assert server_flags("nvidia/Cosmos3-Nano", "auto", "fast") == []  # real weights keep their guardrails
    assert server_flags("nvidia/Cosmos3-Nano", "off", "turbo") == ["--cache-backend", "sea_cache", "--no-guardrails"]
    with pytest.raises(CookbookError, match="SPEED='warp'"):
        server_flags("tiny", "auto", "warp")
