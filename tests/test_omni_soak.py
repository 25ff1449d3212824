"""A soak of the stand-in server: a few hundred mixed good and bad requests from four concurrent clients.

It proves what a room sharing one server needs after an hour of careless use: every good job can still be
retrieved, the storage folder holds exactly the videos of the jobs that were kept (no orphan or partial file), and
the server's resident memory stays bounded. Selected alone with `-m soak`; it also runs in the default suite.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from omni_standin.launcher import LocalServer
from tests.test_omni_contract import SMALL, wait_done
from tests.test_omni_hostile import rss_mb

pytestmark = pytest.mark.soak

CLIENTS = 4
REQUESTS_PER_CLIENT = 50
# One client's requests, in turn: a fifth of them generate something (kept, or deleted at once), the rest are
# refused or abandoned, so the soak stays quick on a CPU while every kind is sent many times.
PATTERN = ["sync", "bad", "bad", "job", "bad", "bad", "image", "bad", "bad", "deleted job"]
PATTERN += ["bad", "bad", "abandoned", "bad", "bad", "bad", "bad", "bad", "bad", "bad"]
# Resident memory may grow this much over the warmed-up server while it runs, and stay within it afterwards.
RSS_GROWTH_MB = 400


def good_sync_video(http: httpx.Client, tag: str) -> None:
    response = http.post("/v1/videos/sync", data={"prompt": f"sync {tag}", **SMALL})
    assert response.status_code == 200 and response.content[4:8] == b"ftyp", response.text[:300]


def good_image(http: httpx.Client, tag: str) -> None:
    body = {"prompt": f"image {tag}", "size": "64x64", "num_inference_steps": 1, "guidance_scale": 1.0}
    response = http.post("/v1/images/generations", json=body)
    assert response.status_code == 200 and response.json()["data"][0]["b64_json"], response.text[:300]


def abandoned_sync_video(http: httpx.Client, tag: str) -> None:
    slow = {**SMALL, "num_inference_steps": "100", "guidance_scale": "7.0"}
    with pytest.raises(httpx.TimeoutException):
        http.post("/v1/videos/sync", data={"prompt": f"abandoned {tag}", **slow}, timeout=0.3)


def refused(route: str, fields: dict[str, str], expected: str) -> Callable[[httpx.Client, str], None]:
    def send(http: httpx.Client, tag: str) -> None:
        response = http.post(route, data={"prompt": f"bad {tag}", **SMALL, **fields})
        assert response.status_code == 400 and expected in response.text, response.text[:300]

    return send


def bad_image_body(http: httpx.Client, tag: str) -> None:
    body = b'{"prompt": "' + tag.encode() + b'", "extra_params": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    response = http.post("/v1/images/generations", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and "Invalid JSON" in response.text, response.text[:300]


def unknown_job(http: httpx.Client, tag: str) -> None:
    assert http.get(f"/v1/videos/video_gen_{tag}").status_code == 404
    assert http.delete(f"/v1/videos/video_gen_{tag}").status_code == 404


BAD: list[Callable[[httpx.Client, str], None]] = [
    refused("/v1/videos/sync", {"size": "8192x8192"}, "--max-generated-image-size"),
    refused("/v1/videos", {"num_frames": "10001"}, "--max-num-frames"),
    refused("/v1/videos/sync", {"extra_params": "[" * 5000 + "]" * 5000}, "Invalid JSON in form field"),
    refused("/v1/videos", {"image_reference": json.dumps({"image_url": "http://10.1.2.3/a.png"})}, "allowed-media"),
    refused("/v1/videos/sync", {"flow_shift": "nan"}, "flow_shift"),
    refused("/v1/videos/sync", {"lora": "{}"}, "Invalid lora object"),
    refused("/v1/videos", {"model": "another-model"}, "Model mismatch"),
    refused("/v1/videos/sync", {"generate_sound": "true", "sound_duration": "1e12"}, "--max-sound-duration"),
    bad_image_body,
    unknown_job,
]


class MemoryWatch:
    """Samples a process's resident memory in the background; `peak` is the largest sample."""

    def __init__(self, pid: int, every_s: float = 0.1):
        self.pid, self.every_s, self.peak = pid, every_s, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.peak = max(self.peak, rss_mb(self.pid))

    def __enter__(self) -> MemoryWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def test_mixed_good_and_bad_requests_from_four_clients(server: LocalServer) -> None:
    storage = server.scratch / "storage"
    with httpx.Client(base_url=server.base_url, timeout=300) as http:
        good_sync_video(http, "warm-up")  # the first generation allocates the pipeline's working memory
        good_image(http, "warm-up")
        baseline = rss_mb(server.process.pid)

        kept: list[str] = []
        deleted: list[str] = []
        counts: dict[str, int] = {}
        lock = threading.Lock()

        def client(number: int) -> None:
            for i in range(REQUESTS_PER_CLIENT):
                tag, kind = f"{number}-{i}", PATTERN[i % len(PATTERN)]
                if kind == "sync":
                    good_sync_video(http, tag)
                elif kind == "image":
                    good_image(http, tag)
                elif kind in ("job", "deleted job"):
                    job = http.post("/v1/videos", data={"prompt": f"job {tag}", **SMALL}).json()
                    assert job["status"] == "queued", job
                    if kind == "deleted job":  # queued, running or done, it must leave nothing behind
                        assert http.delete(f"/v1/videos/{job['id']}").status_code == 200
                    with lock:
                        (deleted if kind == "deleted job" else kept).append(job["id"])
                elif kind == "abandoned":
                    abandoned_sync_video(http, tag)
                else:
                    BAD[(number + i) % len(BAD)](http, tag)
                with lock:
                    counts[kind] = counts.get(kind, 0) + 1

        with MemoryWatch(server.process.pid) as memory, ThreadPoolExecutor(CLIENTS) as pool:
            for future in [pool.submit(client, n) for n in range(CLIENTS)]:
                future.result()
            for job_id in kept:
                assert wait_done(http, job_id, timeout_s=300).json()["status"] == "completed", job_id
        for job_id in kept:
            content = http.get(f"/v1/videos/{job_id}/content")
            assert content.status_code == 200 and content.content[4:8] == b"ftyp", job_id
        for job_id in deleted:
            assert http.get(f"/v1/videos/{job_id}").status_code == 404
        final = rss_mb(server.process.pid)

    assert sum(counts.values()) == CLIENTS * REQUESTS_PER_CLIENT
    files = sorted(p.name for p in storage.rglob("*") if p.is_file())
    assert files == sorted(f"{job_id}.mp4" for job_id in kept)  # no orphan of a deleted job, no partial file
    report = f"baseline {baseline:.0f} MB, peak {memory.peak:.0f} MB, final {final:.0f} MB, {counts}"
    print(f"soak: {CLIENTS * REQUESTS_PER_CLIENT} requests; {report}")
    assert memory.peak - baseline < RSS_GROWTH_MB, report
    assert final - baseline < RSS_GROWTH_MB, report
