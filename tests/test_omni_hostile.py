"""The stand-in server against hostile and careless clients, over real HTTP (docs/vllm-omni-contract.md §9).

Each test sends what a careless or hostile client sends to a shared `python -m omni_standin` and checks that the
request is answered with a reason, at once, and that the server and everyone else's requests survive it: limits
before any work, reference URLs fetched off the event loop within a deadline and a size cap and never from private
addresses, cancellation at every stage, storage that cleans itself, authentication, and no 500 without a reason.
Three servers: `server` with the default flags, `configured` with an API key, a media allowlist, small limits and a
storage TTL, and a short-lived one that is sent SIGTERM.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import struct
import tempfile
import threading
import time
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from omni_standin.launcher import LocalServer
from tests.test_omni_contract import SMALL, assert_envelope, wait_done

KEY = "hostile-test-key"
# Many seconds of work for the tiny checkpoint even on a fast machine (its UniPC scheduler fails from about 150
# steps); the tests that send it stop it long before it ends.
SLOW = {**SMALL, "size": "256x256", "num_frames": "17", "num_inference_steps": "140", "guidance_scale": "7.0"}
# Where a job can be when it is deleted before its decoding starts (the VAE encodes text-to-video's blank video first).
BEFORE_DECODING = ("before it started", "while encoding its conditioning", "while denoising")
REQUEST_LIMIT = 2 * 1024 * 1024  # the configured server's --max-request-size
FETCH_TIMEOUT_S = 2


def rss_mb(pid: int) -> float:
    """Resident memory of a process, from the kernel's own accounting."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def png(width: int, height: int) -> bytes:
    """A valid all-black 1-bit PNG: a few kilobytes that decode to width x height pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    row = b"\0" * (1 + (width + 7) // 8)
    packer = zlib.compressobj(9)
    pixels = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def black_video(path: Path, width: int, height: int, frames: int) -> bytes:
    """An H.264 MP4 of black frames, encoded one frame at a time, so no clip is ever whole in memory."""
    import av
    import numpy as np

    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=24, options={"preset": "ultrafast"})
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        frame = av.VideoFrame.from_ndarray(np.zeros((height, width, 3), np.uint8), format="rgb24")
        for index in range(frames):
            frame.pts = index
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    return path.read_bytes()


def upload(data: bytes) -> dict[str, tuple[str, bytes, str]]:
    return {"input_reference": ("reference.png", data, "image/png")}


def reference(url: str) -> dict[str, str]:
    return {"image_reference": json.dumps({"image_url": url})}


def log_lines_after(server: LocalServer, mark: int, text: str, timeout_s: float = 30) -> str:
    """The server log from character `mark` on, once it contains `text`."""
    deadline = time.monotonic() + timeout_s
    while text not in (tail := server.log_text()[mark:]):
        assert time.monotonic() < deadline, f"{text!r} never appeared in the log:\n{tail[-2000:]}"
        time.sleep(0.05)
    return tail


def wait_status(http: httpx.Client, job_id: str, status: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while http.get(f"/v1/videos/{job_id}").json()["status"] != status:
        assert time.monotonic() < deadline, f"job {job_id} never became {status}"
        time.sleep(0.05)


def storage_files(storage: Path) -> list[str]:
    """Every file under the storage folder, partial folders included."""
    return sorted(str(p.relative_to(storage)) for p in storage.rglob("*") if p.is_file())


class MediaHost(BaseHTTPRequestHandler):
    """A web server as a reference URL may point at: one that answers, stalls, trickles or sends too much."""

    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        if self.path == "/stall":
            time.sleep(30)
            return
        body = {"/ok.png": png(32, 32), "/big.png": b"\0" * (REQUEST_LIMIT + 1)}.get(self.path)
        self.send_response(200 if body is not None or self.path == "/trickle" else 404)
        if self.path == "/trickle":
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            with contextlib.suppress(OSError):  # the server hangs up at its deadline
                for _ in range(300):  # a byte every 0.1 s: each read is quick, the whole would take a day
                    self.wfile.write(b"\0")
                    self.wfile.flush()
                    time.sleep(0.1)
            return
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def media_host() -> Iterator[str]:
    host = ThreadingHTTPServer(("127.0.0.1", 0), MediaHost)
    host.daemon_threads = True
    threading.Thread(target=host.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{host.server_address[1]}"
    host.shutdown()


@pytest.fixture(scope="module")
def configured_storage(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("storage")


@pytest.fixture(scope="module")
def configured(_isolated_cache: Path, configured_storage: Path) -> Iterator[LocalServer]:
    """A key, 127.0.0.1 allowed for references, small limits, and a 2 s storage TTL over a folder a crash left."""
    storage = configured_storage
    crashed = storage / ".partial-999999999"  # a process id that cannot exist: that server is gone
    crashed.mkdir()
    (crashed / "video_gen_half.mp4").write_bytes(b"half a video")
    old = storage / "video_gen_old.mp4"
    old.write_bytes(b"an old video")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    extra = ["--allowed-media-domains", "127.0.0.1", "--media-fetch-timeout", str(FETCH_TIMEOUT_S)]
    extra += ["--max-request-size", str(REQUEST_LIMIT)]
    with pytest.MonkeyPatch.context() as env:
        env.setenv("VLLM_OMNI_SERVER_STORAGE__PATH", str(storage))
        env.setenv("VLLM_OMNI_SERVER_STORAGE__FILE_TTL", "2")
        env.setenv("VLLM_OMNI_SERVER_STORAGE__TTL_SWEEP_INTERVAL", "1")
        running = LocalServer.start("tiny", device="cpu", api_key=KEY, extra_args=extra)
    with running:
        yield running


@pytest.fixture(scope="module")
def keyed(configured: LocalServer) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=configured.base_url, headers=headers, timeout=60) as client:
        yield client


# --- 1. limits, checked before any work ---------------------------------------------------------------------------


LIMIT_CASES = [
    ("/v1/videos/sync", {**SMALL, "size": "8192x8192"}, None, "--max-generated-image-size"),
    ("/v1/videos/sync", {**SMALL, "size": "4096x4096", "num_frames": "97"}, None, "--max-generated-video-size"),
    (
        "/v1/videos",
        {**SMALL, "size": "", "width": "4096", "height": "4096", "num_frames": "97"},
        None,
        "--max-generated-video-size",
    ),
    ("/v1/videos/sync", {**SMALL, "num_frames": "10001"}, None, "--max-num-frames"),
    ("/v1/videos", {**SMALL, "num_frames": "", "seconds": "9" * 500}, None, "--max-num-frames"),
    ("/v1/videos/sync", {**SMALL, "generate_sound": "true", "sound_duration": "1e9"}, None, "--max-sound-duration"),
    (
        "/v1/videos",
        {**SMALL, "extra_params": json.dumps({"sound_gen": True, "audio_duration": 1e9})},
        None,
        "--max-sound-duration",
    ),
    ("/v1/videos/sync", SMALL, (30000, 30000), "--max-reference-image-size"),  # PIL itself calls this a bomb
    ("/v1/videos/sync", SMALL, (12000, 12000), "--max-reference-image-size"),
    ("/v1/videos/sync", {**SMALL, "num_inference_steps": "201"}, None, "num_inference_steps"),
    ("/v1/videos/sync", {**SMALL, "guidance_scale": "21"}, None, "guidance_scale"),
]


def test_requests_over_a_limit_get_a_400_naming_the_flag_at_once_while_others_run(http: httpx.Client) -> None:
    busy = http.post("/v1/videos", data={"prompt": "a busy generator", **SLOW}).json()
    wait_status(http, busy["id"], "in_progress")
    for route, fields, image_size, flag in LIMIT_CASES:
        files = upload(png(*image_size)) if image_size else None
        start = time.monotonic()
        response = http.post(route, data={"prompt": "too much", **fields}, files=files)
        elapsed = time.monotonic() - start
        assert response.status_code == 400 and flag in response.json()["error"]["message"], (fields, response.text)
        assert elapsed < 1.0, (fields, elapsed)
    images = http.post("/v1/images/generations", json={"prompt": "x", "size": "8192x8192"})
    assert_envelope(images, 400, "Bad Request", None, "--max-generated-image-size")
    assert http.get(f"/v1/videos/{busy['id']}").json()["status"] == "in_progress"  # none of them waited for it
    assert http.delete(f"/v1/videos/{busy['id']}").json()["deleted"] is True
    assert http.post("/v1/videos/sync", data={"prompt": "still serving", **SMALL}).status_code == 200


def test_a_full_queue_is_a_429_naming_the_flag_on_every_generating_route_until_work_ends() -> None:
    with (
        LocalServer.start("tiny", device="cpu", extra_args=["--max-queued-requests", "2"]) as small_queue,
        httpx.Client(base_url=small_queue.base_url, timeout=60) as http,
    ):
        running = http.post("/v1/videos", data={"prompt": "running", **SLOW}).json()
        waiting = http.post("/v1/videos", data={"prompt": "waiting", **SLOW}).json()
        wait_status(http, running["id"], "in_progress")
        refused = [
            http.post("/v1/videos", data={"prompt": "one more", **SMALL}),
            http.post("/v1/videos/sync", data={"prompt": "one more", **SMALL}),
            http.post("/v1/images/generations", json={"prompt": "one more", "size": "64x64"}),
        ]
        for response in refused:
            assert_envelope(response, 429, "Too Many Requests", None, "--max-queued-requests")
        assert http.get("/health").status_code == 200
        for job in (running, waiting):
            assert http.delete(f"/v1/videos/{job['id']}").json()["deleted"] is True
        assert http.post("/v1/videos/sync", data={"prompt": "room again", **SMALL}).status_code == 200


def test_a_reference_video_is_decoded_only_as_far_as_cosmos_reads_it_and_never_oversized(
    server: LocalServer, http: httpx.Client, tmp_path: Path
) -> None:
    long = black_video(tmp_path / "long.mp4", 512, 512, 400)  # 300 MB of pixels, were every frame decoded
    before = rss_mb(server.process.pid)
    response = http.post("/v1/videos/sync", data={"prompt": "go on", **SMALL}, files=upload(long))
    assert response.status_code == 200, response.text
    assert rss_mb(server.process.pid) - before < 150
    huge = black_video(tmp_path / "huge.mp4", 7690, 4330, 1)  # one frame over the default 7680x4320 pixels
    start = time.monotonic()
    response = http.post("/v1/videos/sync", data={"prompt": "go on", **SMALL}, files=upload(huge))
    assert_envelope(response, 400, "Bad Request", None, "--max-reference-image-size")
    assert time.monotonic() - start < 1.0


def test_a_megabyte_prompt_is_cut_to_4096_tokens_not_refused_or_run_whole(
    server: LocalServer, http: httpx.Client
) -> None:
    prompt = "a red ball rolls across the floor " * 29_000  # 1 MB (under Starlette's 1 MiB per field): 250,000 tokens
    mark = len(server.log_text())
    before = rss_mb(server.process.pid)
    start = time.monotonic()
    video = http.post("/v1/videos/sync", data={"prompt": prompt, **SMALL}, timeout=60)
    image = http.post("/v1/images/generations", json={"prompt": prompt, "size": "64x64", "num_inference_steps": 1})
    assert video.status_code == 200 and image.status_code == 200, (video.text[:300], image.text[:300])
    assert time.monotonic() - start < 30
    assert log_lines_after(server, mark, "prompt shortened to max_sequence_length: 4096 tokens")
    assert rss_mb(server.process.pid) - before < 300


def test_a_body_over_the_request_size_is_refused_whether_announced_or_streamed(keyed: httpx.Client) -> None:
    big = b"\0" * (REQUEST_LIMIT + 1)
    announced = keyed.post("/v1/videos/sync", data={"prompt": "x", **SMALL}, files=upload(big))
    assert_envelope(announced, 400, "Bad Request", None, "--max-request-size")
    streamed = keyed.post(
        "/v1/images/generations",
        content=iter([b'{"prompt": "', b"x" * REQUEST_LIMIT, b'"}']),  # no Content-Length: sent chunked
        headers={"Content-Type": "application/json"},
    )
    assert_envelope(streamed, 400, "Bad Request", None, "--max-request-size")
    assert keyed.get("/v1/models").status_code == 200


# --- 2. reference URLs ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/x.png",
        "http://localhost/x.png",
        "http://[::1]/x.png",
        "http://10.0.0.1/x.png",
        "http://192.168.1.1/x.png",
        "http://169.254.169.254/latest/meta-data/",
        "http://0.0.0.0/x.png",
        "http://2130706433/x.png",  # 127.0.0.1 written as one number
    ],
)
def test_reference_urls_to_loopback_private_or_link_local_addresses_are_refused(http: httpx.Client, url: str) -> None:
    start = time.monotonic()
    response = http.post("/v1/videos/sync", data={"prompt": "x", **SMALL, **reference(url)})
    assert_envelope(response, 400, "Bad Request", None, "--allowed-media-domains")
    assert time.monotonic() - start < 1.0


def test_a_reference_from_an_allowed_host_is_fetched(keyed: httpx.Client, media_host: str) -> None:
    response = keyed.post("/v1/videos/sync", data={"prompt": "x", **SMALL, **reference(f"{media_host}/ok.png")})
    assert response.status_code == 200 and response.headers["content-type"] == "video/mp4", response.text
    other = keyed.post("/v1/videos/sync", data={"prompt": "x", **SMALL, **reference("http://example.com/x.png")})
    assert_envelope(other, 400, "Bad Request", None, "is not one of the hosts this server fetches from")


@pytest.mark.parametrize("path", ["/stall", "/trickle"])
def test_a_stalling_or_trickling_host_fails_at_the_deadline_and_health_answers_meanwhile(
    configured: LocalServer, keyed: httpx.Client, media_host: str, path: str
) -> None:
    result: list[httpx.Response] = []
    form = {"prompt": "x", **SMALL, **reference(f"{media_host}{path}")}
    fetch = threading.Thread(target=lambda: result.append(keyed.post("/v1/videos/sync", data=form)))
    start = time.monotonic()
    fetch.start()
    time.sleep(0.5)
    health_start = time.monotonic()
    assert httpx.get(f"{configured.base_url}/health", timeout=5).status_code == 200
    assert time.monotonic() - health_start < 0.5
    fetch.join(30)
    assert_envelope(result[0], 400, "Bad Request", None, f"did not finish within {FETCH_TIMEOUT_S} s")
    assert time.monotonic() - start < FETCH_TIMEOUT_S + 2


def test_a_reference_download_over_the_size_cap_is_refused(keyed: httpx.Client, media_host: str) -> None:
    response = keyed.post("/v1/videos/sync", data={"prompt": "x", **SMALL, **reference(f"{media_host}/big.png")})
    assert_envelope(response, 400, "Bad Request", None, "--max-request-size")


# --- 3. cancellation --------------------------------------------------------------------------------------------


def test_delete_of_a_running_job_stops_it_at_once_and_frees_the_generator(
    server: LocalServer, http: httpx.Client
) -> None:
    job = http.post("/v1/videos", data={"prompt": "deleted while denoising", **SLOW}).json()
    wait_status(http, job["id"], "in_progress")
    mark = len(server.log_text())
    assert http.delete(f"/v1/videos/{job['id']}").json()["deleted"] is True
    stopped = log_lines_after(server, mark, f"Job {job['id']} stopped")
    assert any(f"Job {job['id']} stopped {stage}." in stopped for stage in BEFORE_DECODING), stopped
    start = time.monotonic()
    assert http.post("/v1/videos/sync", data={"prompt": "next", **SMALL}).status_code == 200
    assert time.monotonic() - start < 20
    assert not [f for f in storage_files(server.scratch / "storage") if job["id"] in f]


def test_delete_after_the_last_denoising_step_leaves_no_file(server: LocalServer, http: httpx.Client) -> None:
    """The old failure: the record was gone, then the worker finished decoding and wrote an orphan MP4. Now it stops
    within the decoder, or before the encoder, or its encoded file is dropped."""
    storage = server.scratch / "storage"
    mark = len(server.log_text())
    # 33 frames: nine latent frames, so the decoder runs long enough to be caught in.
    job = http.post("/v1/videos", data={"prompt": "deleted while decoding", **SMALL, "num_frames": "33"}).json()
    log_lines_after(server, mark, "Denoising finished at step 1; decoding.")
    assert http.delete(f"/v1/videos/{job['id']}").json()["deleted"] is True
    stopped = log_lines_after(server, mark, f"Job {job['id']} stopped")
    assert not any(stage in stopped for stage in BEFORE_DECODING), stopped
    assert http.get(f"/v1/videos/{job['id']}").status_code == 404
    assert http.post("/v1/videos/sync", data={"prompt": "after", **SMALL}).status_code == 200
    assert not [f for f in storage_files(storage) if job["id"] in f], storage_files(storage)


def test_a_sync_client_that_hangs_up_cancels_its_generation(server: LocalServer) -> None:
    mark = len(server.log_text())
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{server.base_url}/v1/videos/sync", data={"prompt": "abandoned", **SLOW}, timeout=1.5)
    log_lines_after(server, mark, "Video generation cancelled: the client disconnected.", timeout_s=15)
    assert httpx.post(f"{server.base_url}/v1/videos/sync", data={"prompt": "x", **SMALL}, timeout=30).status_code == 200


def test_sigterm_stops_the_server_within_10_s_failing_the_jobs_in_flight(
    _isolated_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also: a warning names --api-key on a public address, and both temporary folders are removed."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the launcher's folder
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the server's own storage folder
    monkeypatch.setenv("VLLM_OMNI_SERVER_STORAGE__PATH", "")  # empty: the server makes a temporary one
    crashed = tmp_path / "omni-videos-999999999-abcd"  # the storage folder of a stand-in that crashed
    crashed.mkdir()
    doomed = LocalServer.start("tiny", device="cpu", extra_args=["--host", "0.0.0.0"])
    try:
        assert "without --api-key" in doomed.log_text() and "Start the server with --api-key" in doomed.log_text()
        assert not crashed.exists()
        own = [p for p in tmp_path.glob("omni-videos-*")]
        assert len(own) == 1
        client = httpx.Client(base_url=doomed.base_url, timeout=30)
        running = client.post("/v1/videos", data={"prompt": "running", **SLOW}).json()
        queued = client.post("/v1/videos", data={"prompt": "queued", **SLOW}).json()
        wait_status(client, running["id"], "in_progress")
        answers: list[object] = []

        def sync_request() -> None:
            try:
                answers.append(client.post("/v1/videos/sync", data={"prompt": "in flight", **SLOW}).status_code)
            except httpx.TransportError as exc:
                answers.append(exc)

        in_flight = threading.Thread(target=sync_request)
        in_flight.start()
        time.sleep(0.5)
        start = time.monotonic()
        doomed.process.send_signal(signal.SIGTERM)
        assert doomed.process.wait(10) == 0
        assert time.monotonic() - start < 10
        in_flight.join(10)
        assert answers and answers[0] != 200, answers
        log = doomed.log_text()
        for job in (running, queued):
            assert f"Job {job['id']} failed: The server shut down before this job finished." in log
        assert not own[0].exists()
    finally:
        doomed.stop()
    assert not list(tmp_path.glob("omni-server-*"))  # the launcher's folder


# --- 4. storage ---------------------------------------------------------------------------------------------------


def test_storage_left_by_a_crash_is_cleaned_and_files_expire_after_the_ttl(
    configured_storage: Path, keyed: httpx.Client
) -> None:
    storage = configured_storage
    assert not (storage / ".partial-999999999").exists()
    job = keyed.post("/v1/videos", data={"prompt": "kept two seconds", **SMALL}).json()
    assert job["expires_at"] == job["created_at"] + 2
    assert wait_done(keyed, job["id"]).json()["status"] == "completed"
    assert keyed.get(f"/v1/videos/{job['id']}/content").status_code == 200
    deadline = time.monotonic() + 10
    while (storage / f"{job['id']}.mp4").exists():
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert not (storage / "video_gen_old.mp4").exists()
    gone = keyed.get(f"/v1/videos/{job['id']}/content")
    assert_envelope(gone, 404, "Not Found", None, "Generated video file not found on disk")
    assert keyed.get(f"/v1/videos/{job['id']}").json()["status"] == "completed"  # the record stays, as on vLLM-Omni
    assert not [f for f in storage_files(storage) if f.startswith(".partial")]


# --- 5. authentication --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("header", [f"Bearer {KEY}", f"bearer {KEY}", f"BEARER {KEY}", f"Bearer  {KEY}"])
def test_the_bearer_scheme_is_case_insensitive(configured: LocalServer, header: str) -> None:
    assert httpx.get(f"{configured.base_url}/v1/models", headers={"Authorization": header}).status_code == 200


@pytest.mark.parametrize("header", ["", "Bearer", "Bearer wrong-key", f"Basic {KEY}", KEY, f"Bearer {KEY}x"])
def test_anything_but_the_key_is_401(configured: LocalServer, header: str) -> None:
    response = httpx.get(f"{configured.base_url}/v1/models", headers={"Authorization": header} if header else {})
    assert (response.status_code, response.json()) == (401, {"error": "Unauthorized"})


def test_the_launcher_hands_the_key_over_in_the_environment_not_the_command_line(configured: LocalServer) -> None:
    proc = Path(f"/proc/{configured.process.pid}")
    assert KEY.encode() not in (proc / "cmdline").read_bytes()
    assert f"VLLM_API_KEY={KEY}".encode() in (proc / "environ").read_bytes().split(b"\0")


# --- 6. no 500 without a reason -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"extra_params": "[" * 100_000 + "]" * 100_000}, "extra_params: nested more than 64 levels deep"),
        ({"extra_params": json.dumps({"a": 1}).replace("1", "1" * 5000)}, "extra_params: Exceeds the limit"),
        ({"prompt": '{"n": ' + "1" * 5000 + "}"}, "Invalid JSON in prompt: Exceeds the limit"),
        ({"extra_params": '{"a": 1} and more'}, "Invalid JSON in form field. extra_params: Extra data"),
        ({"extra_params": '{"a": ' * 100 + "1" + "}" * 100}, "extra_params: nested more than 64 levels deep"),
        ({"lora": '{"a": ' * 5000 + "1" + "}" * 5000}, "lora: nested more than 64 levels deep"),
        ({"prompt": '{"scene": ' * 5000 + '"x"' + "}" * 5000}, "Invalid JSON in prompt"),
        ({"prompt": '{"scene": ' * 100 + '"x"' + "}" * 100}, "Invalid JSON in prompt"),
        ({"flow_shift": "nan"}, "flow_shift"),
        ({"guidance_scale": "inf"}, "guidance_scale"),
        ({"fps": "1e300"}, "fps"),
        ({"extra_params": json.dumps({"flow_shift": "high"})}, "Invalid extra_params.flow_shift"),
        ({"extra_params": json.dumps({"guardrails": "no"})}, "Invalid extra_params.guardrails"),
        ({"extra_params": json.dumps({"sound_duration": -1})}, "Invalid extra_params.sound_duration"),
        ({"image_reference": json.dumps({"image_url": "data:image/png;base64,%%%"})}, "malformed data URL"),
        ({"lora": "[1]"}, "lora must be a JSON object"),
        ({"lora": "{}"}, "Invalid lora object: both name and path are required."),
        ({"lora": json.dumps({"name": "a", "path": "/b", "scale": "x"})}, "Invalid lora object: scale"),
    ],
)
def test_malformed_values_are_a_400_that_names_the_field(http: httpx.Client, fields: dict, message: str) -> None:
    response = http.post("/v1/videos/sync", data={"prompt": "x", **SMALL, **fields})
    assert response.status_code == 400 and message in response.json()["error"]["message"], response.text[:500]


def test_an_invalid_lora_fails_the_job_with_400_on_the_async_route(http: httpx.Client) -> None:
    created = http.post("/v1/videos", data={"prompt": "x", **SMALL, "lora": json.dumps({"name": "only-a-name"})})
    assert created.status_code == 200 and created.json()["status"] == "queued"
    failed = wait_done(http, created.json()["id"])
    assert failed.status_code == 400
    assert failed.json()["error"] == {"code": 400, "message": "Invalid lora object: both name and path are required."}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('{"prompt": ' + "[" * 100_000 + "]" * 100_000 + "}", "Invalid JSON in request body: it is nested too deeply"),
        ('{"prompt": "x", "seed": ' + "1" * 5000 + "}", "Invalid JSON in request body: Exceeds the limit"),
        ('{"prompt": "x", "flow_shift": NaN}', "finite number"),
        ('{"prompt": "x", "extra_params": {"flow_shift": [1]}}', "Invalid extra_params.flow_shift"),
        ('{"prompt": "' + '{\\"a\\": ' * 200 + "1" + "}" * 200 + '"}', "Invalid JSON in prompt"),
        ('{"prompt": "x", "size": "64x64", "lora": {"path": "/x"}}', "Invalid lora object"),
    ],
)
def test_the_images_route_says_what_was_wrong_too(http: httpx.Client, body: str, message: str) -> None:
    response = http.post("/v1/images/generations", content=body, headers={"Content-Type": "application/json"})
    data = response.json()
    # A body FastAPI cannot parse keeps its unwrapped {"detail": ...} shape, as on vLLM (contract §1.2).
    assert response.status_code == 400 and message in data.get("error", {}).get("message", data.get("detail")), data
