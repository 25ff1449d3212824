"""The room limits (`local_server.room_limits`): the middleware that keeps one participant of a shared vLLM-Omni
server from stalling or ending it.

The first half drives the middleware in this process, in front of a stand-in for vLLM-Omni's app that records what
reached it, so that "nothing is buffered or altered" can be checked chunk by chunk. The second half drives the
session's real server, which the launcher starts with the limits on, over real HTTP.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import papermill
import pytest

from cookbook_tools import notebooks
from cosmos3_action import action_settings
from cosmos3_transfer import transfer_settings
from helpers import audiovisual_settings, media
from helpers.audiovisual_settings import TIER_MAX_FRAMES
from helpers.canvases import CANVASES
from helpers.settings import CPU_PIXEL_FRAMES, TIERS, largest_canvas
from local_server import launcher, omni_http
from local_server.room_limits import (
    DEFAULTS,
    ENV,
    IMAGE_ROUTE,
    TIER_CANVASES,
    Limits,
    Refusal,
    RoomLimits,
    check_request,
)
from local_server.server import LocalServer
from tests.conftest import SERVER_KEY

CPU, GPU = DEFAULTS["cpu"], DEFAULTS["gpu"]
KEY = "room-key"


def offered_settings() -> list[Any]:
    """Every preset, tier, aspect ratio and mode of the audiovisual family, and every preset of the action (every
    embodiment) and transfer (every control) families: what the notebooks can send."""
    found = []
    for mode, preset, tier, ratio in itertools.product(
        audiovisual_settings.MODES,
        ("smoke", "draft", "published"),
        (None, *TIERS),
        (None, "16:9", "4:3", "1:1", "3:4", "9:16"),
    ):
        found.append(audiovisual_settings.settings_for(mode, preset, tier=tier, aspect_ratio=ratio))
    domains = [d["domain_name"] for d in action_settings.describe()]
    for task, preset, domain in itertools.product(action_settings.TASKS, ("smoke", "draft", "published"), domains):
        try:
            found.append(action_settings.settings_for(f"{action_settings.TASKS[task]}_{domain}", preset))
        except Exception:  # noqa: BLE001 - a task an embodiment has no checkpoint for is not offered
            continue
    for hint, preset in itertools.product(("edge", "blur", "depth", "seg", "wsm"), ("smoke", "draft", "published")):
        found.append(transfer_settings.settings_for(hint, preset))
    return found


def as_request(s: Any) -> dict[str, str]:
    """The fields a notebook sends for `s`: its picture (the largest canvas of its tier where it has no size), frames
    and steps."""
    width, height = (s.width, s.height) if hasattr(s, "width") else largest_canvas(s.resolution_tier)
    return {
        "size": f"{width}x{height}",
        "num_frames": str(s.num_frames),
        "num_inference_steps": str(s.num_inference_steps),
    }


def test_the_defaults_admit_every_offered_preset_and_tier_and_little_beyond() -> None:
    """On a GPU every preset, tier and mode the notebooks offer, and NVIDIA's frame caps at every tier; on a CPU all
    of them that a CPU runs (`CPU_PIXEL_FRAMES`). Each limit is reached by something offered, or by what the server
    makes when the field is left out (a 1024x1024 image), so nothing far beyond passes."""
    offered = offered_settings()
    on_a_cpu = [s for s in offered if s.pixel_frames <= CPU_PIXEL_FRAMES]
    for limits, settings in ((GPU, offered), (CPU, on_a_cpu)):
        for s in settings:
            check_request(limits, "/v1/videos", as_request(s))
    check_request(CPU, IMAGE_ROUTE, {"prompt": "x"})  # 1024x1024, 50 steps
    capped = [(largest_canvas(t), TIER_MAX_FRAMES[t]) for t in TIERS]
    for (width, height), frames in capped:
        check_request(GPU, "/v1/videos", {"size": f"{width}x{height}", "num_frames": str(frames)})
    assert GPU.max_frames == max(TIER_MAX_FRAMES.values())
    assert GPU.max_pixel_frames == max(w * h * f for (w, h), f in capped)
    assert CPU.max_frames == max(s.num_frames for s in on_a_cpu)
    assert CPU.max_pixel_frames == CPU_PIXEL_FRAMES == max(s.pixel_frames for s in on_a_cpu)
    largest_picture = max(s.pixel_frames // s.num_frames for s in offered)
    for limits in (CPU, GPU):
        assert limits.max_steps == max(s.num_inference_steps for s in offered)
        assert limits.max_pixels == 1024 * 1024 >= largest_picture


@pytest.mark.parametrize(
    ("route", "fields", "param", "words"),
    [
        (
            "/v1/videos/sync",
            {"size": "100000x96", "num_frames": "9"},
            "size",
            "size=100000x96 asks for 9,600,000 pixels a frame, over this server's room limit of 1,048,576 (max_pixels)",
        ),
        (
            "/v1/videos",
            {"size": "320x192", "num_frames": "189"},
            "num_frames",
            "189 frames, over this server's room limit of 100 (max_frames)",
        ),
        ("/v1/videos", {"size": "1280x720", "num_frames": "17"}, "num_frames", "(max_pixel_frames)"),
        ("/v1/videos", {"seconds": "8"}, "seconds", "seconds=8 asks for 192 frames"),  # 24 fps, at the default size
        (
            "/v1/videos",
            {"size": "320x192", "num_frames": "9", "num_inference_steps": "100"},
            "num_inference_steps",
            "100 steps, over this server's room limit of 50 (max_steps)",
        ),
        (IMAGE_ROUTE, {"size": "2048x2048"}, "size", "(max_pixels)"),
        (IMAGE_ROUTE, {"size": "1024x1024", "n": 10}, "n", "(max_pixel_frames)"),
        ("/v1/videos/sync", {"size": "0x96"}, "size", "size='0x96' is not a size"),
    ],
)
def test_each_limit_is_refused_naming_the_field_the_limit_and_the_value(route, fields, param, words) -> None:
    with pytest.raises(Refusal) as refused:
        check_request(CPU, route, fields)
    assert refused.value.status == 400 and refused.value.param == param
    assert words in str(refused.value), str(refused.value)
    if "room limit" in str(refused.value):  # and the notebook parameter that brings a request within it
        assert "TIER" in str(refused.value) or "PRESET" in str(refused.value)
        assert refused.value.body["room_limit"]["name"] in str(refused.value)


@pytest.mark.parametrize(
    ("route", "fields"),
    [
        ("/v1/videos", {"size": "big", "num_frames": "9"}),
        ("/v1/videos", {"width": "0", "height": "96", "num_frames": "9"}),
        ("/v1/videos", {"num_frames": "many"}),
        (IMAGE_ROUTE, {"size": "1x2x3"}),
        (IMAGE_ROUTE, {"size": "64x64", "n": 11}),
    ],
)
def test_what_vllm_omni_refuses_with_its_own_400_is_left_to_it(route, fields) -> None:
    check_request(CPU, route, fields)  # no Refusal: vLLM-Omni's validation names the field in its words


def test_an_action_or_transfer_job_is_measured_at_its_resolution_tier() -> None:
    assert {tier: largest_canvas(tier) for tier in CANVASES} == TIER_CANVASES
    extra = json.dumps({"action_mode": "forward_dynamics", "resolution": "256"})
    check_request(CPU, "/v1/videos", {"num_frames": "61", "extra_params": extra})  # 320x256 x 61 frames fits a CPU
    with pytest.raises(Refusal, match=r"resolution=720 \(its largest picture\)"):
        check_request(CPU, "/v1/videos", {"num_frames": "61", "extra_params": extra.replace("256", "720")})


def test_limits_are_one_setting_that_a_flag_changes_or_turns_off() -> None:
    assert Limits.from_env(None) == GPU and Limits.from_env("off") is None
    assert Limits.from_env(CPU.to_env()) == CPU
    changed = CPU.with_overrides("max_frames=121, max_steps=20")
    assert (changed.max_frames, changed.max_steps, changed.max_pixels) == (121, 20, CPU.max_pixels)
    for wrong in ("max_frame=121", "max_frames=0", "max_frames=lots"):
        with pytest.raises(ValueError, match="is not NAME=N .*max_pixels, max_frames"):
            CPU.with_overrides(wrong)
    with pytest.raises(ValueError, match=f"\\${ENV}="):
        Limits.from_env('{"max_frames": 3}')


def test_the_launcher_adds_the_middleware_with_the_machines_limits_and_says_them(monkeypatch) -> None:
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    flags, env, line = launcher.with_room_limits(["--api-key", "a", "b", "--port", "8000"], gpu=False)
    assert flags == ["--api-key", "a", "b", "--port", "8000", "--middleware", "local_server.room_limits.RoomLimits"]
    assert Limits.from_env(env[ENV]) == CPU and json.loads(env["COSMOS3_ROOM_API_KEYS"]) == ["a", "b"]
    assert line.startswith("room limits for a CPU server: 1,048,576 pixels a frame, 100 frames")
    flags, env, line = launcher.with_room_limits(["--room-limits=max_frames=5"], gpu=True)
    assert Limits.from_env(env[ENV]) == GPU.with_overrides("max_frames=5") and "--room-limits" not in flags
    flags, env, line = launcher.with_room_limits(["--room-limits", "off", "--port", "1"], gpu=True)
    assert (flags, env[ENV], line) == (["--port", "1"], "off", "room limits: off (--room-limits off)")
    with pytest.raises(launcher.ServeError, match="max_frame=5"):
        launcher.with_room_limits(["--room-limits", "max_frame=5"], gpu=True)


# The middleware in this process, in front of a stand-in for vLLM-Omni: it records the body it reads, chunk by
# chunk, and answers a job (POST /v1/videos), a job's status, a deletion and the job list as vLLM-Omni does.
class StandIn:
    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.headers: list[tuple[bytes, bytes]] = []
        self.jobs: dict[str, str] = {}

    async def __call__(self, scope, receive, send) -> None:
        self.headers = list(scope["headers"])
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ConnectionResetError("the client went away")  # as Starlette's form parser raises
            self.chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        path, method = scope["path"], scope["method"]
        if method == "POST" and path == "/v1/videos":
            job = f"video_{len(self.jobs)}"
            self.jobs[job] = "queued"
            answer: Any = {"id": job, "status": "queued"}
        elif method == "GET" and path == "/v1/videos":
            answer = {"data": [{"id": j, "status": s} for j, s in self.jobs.items()]}
        elif path.startswith("/v1/videos/video_"):
            job = path.rsplit("/", 1)[1]
            answer = {"id": job, "status": self.jobs[job]} if method == "GET" else {"id": job, "deleted": True}
            if method == "DELETE":
                del self.jobs[job]
        else:
            answer = {"made": True}
        body = json.dumps(answer).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})


def call(app, method: str, path: str, chunks: list[bytes] = (b"",), headers=(), client: str = "10.0.0.1"):
    """One request through `app` whose body arrives in `chunks`: (status, headers, body, chunks read)."""
    sent: list[dict] = []
    pending = list(chunks)
    read = []

    async def receive():
        chunk = pending.pop(0)
        read.append(chunk)
        return {"type": "http.request", "body": chunk, "more_body": bool(pending)}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "root_path": "",
        "query_string": b"",
        "headers": [(b"authorization", f"Bearer {KEY}".encode()), *headers],
        "client": (client, 5000),
    }
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], dict(start["headers"]), body, read


def multipart(fields: dict[str, str], file: bytes | None = None) -> tuple[bytes, tuple[bytes, bytes]]:
    request = httpx.Request(
        "POST",
        "http://room/v1/videos",
        data=fields,
        files={"input_reference": ("clip.mp4", file, "video/mp4")} if file is not None else None,
    )
    return request.read(), (b"content-type", request.headers["content-type"].encode())


FIELDS = {"model": "tiny", "prompt": "A red ball rolls.", "size": "320x192", "num_frames": "9"}


def test_a_request_within_the_limits_reaches_the_server_as_it_came_chunk_by_chunk() -> None:
    small = multipart(FIELDS, file=bytes(range(256)))
    large = multipart(FIELDS, file=bytes(range(256)) * 4096)  # a 1 MiB upload
    for (body, content_type), size in ((small, 1), (small, 7), (small, 64), (large, 65536)):  # every split
        chunks = [body[i : i + size] for i in range(0, len(body), size)]
        inner = StandIn()
        status, _, answer, _ = call(RoomLimits(inner, CPU, [KEY]), "POST", "/v1/videos/sync", chunks, [content_type])
        assert (status, json.loads(answer)) == (200, {"made": True})
        assert inner.chunks == chunks and (b"content-type", content_type[1]) in inner.headers
    urlencoded = httpx.Request("POST", "http://room/", data=FIELDS)
    inner = StandIn()
    form = (b"content-type", b"application/x-www-form-urlencoded")
    assert call(RoomLimits(inner, CPU, [KEY]), "POST", "/v1/videos/sync", [urlencoded.read()], [form])[0] == 200
    assert inner.chunks == [urlencoded.read()]


def test_an_oversized_request_never_reaches_the_server_and_a_large_file_is_refused_before_it_is_read() -> None:
    body, content_type = multipart({**FIELDS, "size": "100000x96"}, file=bytes(range(256)))
    for size in (1, 7, len(body)):  # the field is found however the body is split
        inner = StandIn()
        chunks = [body[i : i + size] for i in range(0, len(body), size)]
        status, _, answer, _ = call(RoomLimits(inner, CPU, [KEY]), "POST", "/v1/videos", chunks, [content_type])
        assert status == 400 and json.loads(answer)["error"]["param"] == "size"
        assert len(b"".join(inner.chunks)) < body.index(b"input_reference")  # cut off before the file's part
    body, content_type = multipart(FIELDS, file=b"\0" * (3 * 1024 * 1024))
    chunks = [body[i : i + 65536] for i in range(0, len(body), 65536)]
    inner = StandIn()
    small = CPU.with_overrides("max_upload_mib=1")
    status, _, answer, read = call(RoomLimits(inner, small, [KEY]), "POST", "/v1/videos", chunks, [content_type])
    refusal = json.loads(answer)
    assert status == 400 and (refusal["room_limit"]["name"], refusal["room_limit"]["limit"]) == ("max_upload_mib", 1)
    assert refusal["error"]["param"] == "input_reference" and "IMAGE or VIDEO" in refusal["error"]["message"]
    assert len(read) <= 1024 * 1024 // 65536 + 2 < len(chunks)  # stopped reading a little past 1 MiB of 3


def test_an_unkeyed_request_is_left_to_vllms_authentication() -> None:
    body, content_type = multipart({**FIELDS, "size": "100000x96"})
    inner = StandIn()
    unkeyed = RoomLimits(inner, CPU, ["another-key"])
    assert call(unkeyed, "POST", "/v1/videos", [body], [content_type])[0] == 200  # the stand-in has no auth
    assert inner.chunks == [body]


def test_a_participant_may_have_max_queued_jobs_and_sees_each_ones_place_in_the_queue() -> None:
    inner = StandIn()
    room = RoomLimits(inner, CPU.with_overrides("max_queued=2"), [KEY])
    body, content_type = multipart(FIELDS)
    jobs = [json.loads(call(room, "POST", "/v1/videos", [body], [content_type])[2])["id"] for _ in range(2)]
    status, headers, answer, _ = call(room, "POST", "/v1/videos", [body], [content_type])
    assert (
        status == 429 and headers[b"retry-after"] == b"5" and "max_queued=2" in json.loads(answer)["error"]["message"]
    )
    other = call(room, "POST", "/v1/videos", [body], [content_type], client="10.0.0.2")  # another participant
    assert other[0] == 200
    positions = [call(room, "GET", f"/v1/videos/{job}")[1][b"x-queue-position"] for job in jobs]
    assert positions == [b"0", b"1"]
    assert call(room, "DELETE", f"/v1/videos/{jobs[1]}")[0] == 200  # cancelled: a place is free again
    assert call(room, "POST", "/v1/videos", [body], [content_type])[0] == 200
    inner.jobs[jobs[0]] = "completed"  # ended on the server, never polled: the job list frees its place
    time.sleep(1.1)
    assert call(room, "POST", "/v1/videos", [body], [content_type])[0] == 200


# The session's real server, started by the launcher with the CPU limits on.
SMOKE = {"model": "tiny", "size": "320x192", "num_frames": "9", "num_inference_steps": "2", "fps": "24"}


@pytest.mark.slow
def test_the_real_server_refuses_each_limit_before_the_model_sees_it_and_does_not_grow(
    omni_server: LocalServer,
) -> None:
    """Each limit's 400 comes from the room limits (their `room_limit` beside vLLM's envelope), so the request never
    reached the model, and the server's memory stays where it was: the 11 GB an unguarded server grew to never
    comes. How long a refusal takes is measured by support/benchmarks/room_limits.py."""
    assert "room limits for a CPU server: 1,048,576 pixels a frame" in omni_server.log_text()  # the launcher says them
    headers = {"Authorization": f"Bearer {SERVER_KEY}"}
    before = omni_server.memory_mib()
    for fields, param, limit in (
        ({"size": "100000x96", "num_frames": "9", "num_inference_steps": "1"}, "size", "max_pixels"),
        ({"num_frames": "397", "size": "320x192"}, "num_frames", "max_frames"),
        ({"num_frames": "97", "size": "1280x720"}, "num_frames", "max_pixel_frames"),
        ({"num_inference_steps": "200", "size": "320x192", "num_frames": "9"}, "num_inference_steps", "max_steps"),
        ({"size": "0x96", "num_frames": "9"}, "size", None),
    ):
        answer = httpx.post(
            f"{omni_server.base_url}/v1/videos/sync",
            headers=headers,
            timeout=30,
            data={"model": "tiny", "prompt": "typo", **fields},
        )
        assert answer.status_code == 400 and answer.json()["error"]["param"] == param, answer.text
        assert answer.json().get("room_limit", {}).get("name") == limit or "is not a size" in answer.text
    assert omni_server.memory_mib() - before < 100
    for fields in ({**SMOKE, "size": "100000x96"}, SMOKE):
        unkeyed = httpx.post(f"{omni_server.base_url}/v1/videos/sync", data={"prompt": "x", **fields}, timeout=30)
        assert unkeyed.status_code == 401


@pytest.mark.slow
def test_a_room_of_sixteen_is_served_while_one_participant_asks_for_too_much(
    omni_server: LocalServer, tmp_path: Path
) -> None:
    """Sixteen participants, each from an address of their own, send a smoke video at once; a seventeenth sends a
    typo. Every video comes back whole, and the typo's 400 comes back while the room's videos are still being made:
    it does not wait its turn in the queue."""
    answered: list[tuple[float, int]] = []  # when each answer came, in order

    def participant(index: int) -> tuple[int, bytes]:
        transport = httpx.HTTPTransport(local_address=f"127.0.0.{10 + index}")
        fields = {**SMOKE, "prompt": f"ball {index}", "seed": str(index)}
        if index == 16:
            fields["size"] = "100000x96"
        with httpx.Client(transport=transport, timeout=600) as client:
            answer = client.post(
                f"{omni_server.base_url}/v1/videos/sync", data=fields, headers={"Authorization": f"Bearer {SERVER_KEY}"}
            )
        answered.append((time.monotonic(), index))
        return answer.status_code, answer.content

    with ThreadPoolExecutor(17) as pool:
        answers = list(pool.map(participant, range(17)))
    for index, (status, content) in enumerate(answers[:16]):
        assert status == 200, content[:300]
        (tmp_path / f"{index}.mp4").write_bytes(content)
        info = media.probe(tmp_path / f"{index}.mp4")
        assert (info.width, info.height, info.num_frames, info.codec) == (320, 192, 9, "h264")
    status, content = answers[16]
    assert status == 400 and b"max_pixels" in content
    order = [index for _, index in sorted(answered)]
    assert order.index(16) < 8, order  # ahead of most of the queue: answered at once, not in its turn


@pytest.mark.slow
def test_queued_jobs_show_their_place_and_a_cancelled_one_frees_it_on_the_real_server(
    omni_server: LocalServer,
) -> None:
    with omni_http.http_client(omni_server.base_url, api_key=SERVER_KEY) as http:
        slow = {**SMOKE, "prompt": "queued", "num_frames": "33", "num_inference_steps": "40"}
        jobs = [http.post("/v1/videos", data=slow).json()["id"] for _ in range(4)]
        with pytest.raises(omni_http.OmniAPIError) as refused:
            http.post("/v1/videos", data=slow)
        places = [http.get(f"/v1/videos/{job}").headers.get("x-queue-position") for job in jobs]
        deleted = http.delete(f"/v1/videos/{jobs[-1]}").json()
        again = http.post("/v1/videos", data=slow).json()["id"]
        for job in [*jobs[:-1], again]:
            while http.get(f"/v1/videos/{job}").json()["status"] in ("queued", "in_progress"):
                time.sleep(0.5)
    assert refused.value.status == 429 and "max_queued=4" in refused.value.message
    assert places == ["0", "1", "2", "3"]  # the first runs, the others wait behind it in order
    assert deleted == {"id": jobs[-1], "deleted": True, "object": "video.deleted"}


@pytest.mark.slow
@pytest.mark.notebook
def test_a_participant_over_the_room_limits_is_told_which_parameter_to_change(
    omni_server: LocalServer, tmp_path: Path
) -> None:
    """A participant who asks the room's CPU server for NVIDIA's published video (189 frames): the notebook stops at
    that request with the room's 400, which names PRESET, not with a server failure and its log."""
    parameters = {
        "MODEL": "tiny",
        "PRESET": "published",
        "MODES": "t2v",
        "LONG_CHUNKS": 0,
        "BASE_URL": omni_server.base_url,
        "API_KEY": SERVER_KEY,
        "PROGRESS": False,
        "OUTPUT_DIR": str(tmp_path / "media"),
    }
    with pytest.raises(papermill.PapermillExecutionError) as err:
        notebooks.execute(notebooks.PAIR[1], tmp_path / "out.ipynb", parameters)
    message = str(err.value)
    assert "HTTP 400" in message and "num_frames=189" in message and "(max_frames)" in message, message[-3000:]
    assert "a smaller PRESET (smoke or draft)" in message and "Last lines of its log" not in message
