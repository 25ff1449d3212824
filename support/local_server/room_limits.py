"""Room limits for a vLLM-Omni server that many people share: a vLLM middleware (`vllm serve --middleware`).

One generation runs at a time, so one participant's typo (`size=100000x96`) or a 720p video on a CPU server stalls
everyone, and a large enough one ends the server. This middleware reads each generation request before vLLM-Omni
does (`POST /v1/videos`, `/v1/videos/sync`, `/v1/images/generations`) and answers 400, naming the field, the limit
and the value, when the request is over the room's limits (`Limits`) or its size is `WxH` but not positive (which
vLLM-Omni's synchronous route fails as its own error, a 500); what vLLM-Omni refuses itself with a 400 (a size that
is not `WxH`, a field out of its range) is left to it. A request within the limits reaches vLLM-Omni as it came,
byte for byte and as it streams in: nothing is buffered or rewritten. It also keeps the queue fair: each participant
(an API key from one address) may have `max_queued` generations waiting or running, and a job's
`GET /v1/videos/{id}` answer carries its place in the queue (`X-Queue-Position`).

    PYTHONPATH=support vllm serve MODEL --omni --middleware local_server.room_limits.RoomLimits

`bash scripts/serve_vllm_omni.sh` adds it to every server it starts, with the limits for its machine in
`$COSMOS3_ROOM_LIMITS` (JSON, or `off`); without that variable the GPU limits apply. It imports only the standard
library, so it runs in any vLLM environment, NVIDIA's container included (mount `support/` and set PYTHONPATH).
The API keys are read as vLLM reads them (`$VLLM_API_KEY`, or `$COSMOS3_ROOM_API_KEYS` as a JSON list, which the
launcher sets from `--api-key`): a request without a valid key is left to vLLM, which answers 401.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

ENV = "COSMOS3_ROOM_LIMITS"
KEYS_ENV = "COSMOS3_ROOM_API_KEYS"
VIDEO_ROUTES = ("/v1/videos", "/v1/videos/sync")
IMAGE_ROUTE = "/v1/images/generations"
JOB = re.compile(r"^/v1/videos/([^/]+)$")
SIZE = re.compile(r"^(\d+)x(\d+)$")
# What vLLM-Omni 0.30.0 makes when a field is left out: 1280x720 videos (images 1024x1024), 35 steps a video and
# 50 an image, and one frame when neither num_frames nor seconds is sent.
DEFAULT_VIDEO_SIZE, DEFAULT_IMAGE_SIZE = (1280, 720), (1024, 1024)
DEFAULT_VIDEO_STEPS, DEFAULT_IMAGE_STEPS = 35, 50
# The largest picture of each resolution tier an action or transfer job names instead of a size
# (`helpers.canvases.CANVASES`; tests/test_room_limits.py keeps the two the same).
TIER_CANVASES = {256: (320, 256), 480: (640, 640), 704: (960, 960), 720: (960, 960)}
MIB = 1024 * 1024
FIELD_BYTES = MIB  # a form field or JSON body beyond this is no request a notebook sends (Starlette's own part limit)
POLL_FRESH_S = 1.0  # how old the server's job list may be when a job's place in the queue is told
WAITING = ("queued", "in_progress")  # a job's states before it ends


@dataclass(frozen=True)
class Limits:
    """What one request may ask for. `max_pixel_frames` bounds the work of one call (pixels a frame times frames)."""

    max_pixels: int
    max_frames: int
    max_pixel_frames: int
    max_steps: int
    max_upload_mib: int
    max_queued: int

    def to_env(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_env(cls, text: str | None) -> Limits | None:
        """`$COSMOS3_ROOM_LIMITS`: None when it is `off`, the GPU defaults when it is unset."""
        if text is None or not text.strip():
            return DEFAULTS["gpu"]
        if text.strip() == "off":
            return None
        try:
            values = json.loads(text)
            return cls(**{f.name: int(values[f.name]) for f in dataclasses.fields(cls)})
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f"${ENV}={text!r} is not `off` or a JSON object of {[f.name for f in dataclasses.fields(cls)]} "
                f"({exc}): `bash scripts/serve_vllm_omni.sh --help` shows how to set them."
            ) from exc

    def with_overrides(self, text: str) -> Limits:
        """`max_frames=121,max_steps=20`: these limits with some changed (`serve_vllm_omni.sh --room-limits`)."""
        names = [f.name for f in dataclasses.fields(self)]
        changes: dict[str, int] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            name, _, value = item.partition("=")
            if name not in names or not value.isdigit() or int(value) < 1:
                raise ValueError(
                    f"--room-limits {text!r}: {item!r} is not NAME=N with N a whole number, 1 or more, and NAME one of "
                    f"{', '.join(names)} (or pass `--room-limits off`)."
                )
            changes[name] = int(value)
        return dataclasses.replace(self, **changes)

    def describe(self) -> str:
        return (
            f"{self.max_pixels:,} pixels a frame, {self.max_frames} frames, {self.max_pixel_frames / 1e6:.1f} million "
            f"pixel-frames a call, {self.max_steps} steps, {self.max_upload_mib} MiB a file, {self.max_queued} "
            "generations waiting or running per participant"
        )


# The defaults admit every preset and tier the notebooks offer on the machine, and nothing far beyond
# (tests/test_room_limits.py derives them from the presets). On a GPU, NVIDIA's published sizes: pictures up to
# 720p (and the images route's own default, 1024x1024), NVIDIA's frame caps (397 at 256p; 720p at 197 frames is the
# most work a call), 50 steps (images and transfer). On a CPU, what the notebooks run there at `tiny`: up to 100
# frames (a transfer `draft`), 720p times 9 frames of work a call (`helpers.settings.CPU_PIXEL_FRAMES`). Files up to
# 100 MiB. Four generations per participant: the audiovisual notebook's "Several clients at once" sends four.
DEFAULTS: dict[str, Limits] = {
    "gpu": Limits(1024 * 1024, 397, 1280 * 720 * 197, 50, 100, 4),
    "cpu": Limits(1024 * 1024, 100, 1280 * 720 * 9, 50, 100, 4),
}

# What a participant changes in the cookbook's notebooks to come within each limit.
NOTEBOOK_HINT = {
    "size": "a smaller TIER (or the preset's own, TIER=0)",
    "num_frames": "a smaller PRESET (smoke or draft) or TIER",
    "num_inference_steps": "a smaller PRESET (smoke or draft)",
    "upload": "a smaller IMAGE or VIDEO file",
}


class Refusal(Exception):
    """A request over a limit: the status, and the body: vLLM's error envelope (`error`: message, type, param, code)
    and beside it `room_limit`, the limit's name and number and the value asked for, for a program to read."""

    def __init__(self, status: int, param: str, message: str, limit: tuple[str, int] | None = None, value: Any = None):
        super().__init__(message)
        self.status, self.param = status, param
        reason = {400: "Bad Request", 429: "Too Many Requests"}[status]
        self.body: dict[str, Any] = {"error": {"message": message, "type": reason, "param": param, "code": status}}
        if limit is not None:
            self.body["room_limit"] = {"name": limit[0], "limit": limit[1], "value": value}


def _over(param: str, value: Any, limit_name: str, limit: int, what: str, hint: str) -> Refusal:
    return Refusal(
        400,
        param,
        f"{param}={value} asks for {what}, over this server's room limit of {limit:,} ({limit_name}). In the "
        f"cookbook's notebooks: {NOTEBOOK_HINT[hint]}; in a request of your own: less. The person running the "
        "server sets the limits (`serve_vllm_omni.sh --room-limits`).",
        limit=(limit_name, limit),
        value=value,
    )


def parse_size(param: str, text: str) -> tuple[int, int] | None:
    """WIDTHxHEIGHT as numbers; None for text that is not WIDTHxHEIGHT, which vLLM-Omni answers with a 400 itself.
    A size of the right form that is not positive is refused here: vLLM-Omni's synchronous route fails it as its own
    error (500, "Video generation failed")."""
    found = SIZE.match(text.strip())
    if not found:
        return None
    if int(found[1]) < 1 or int(found[2]) < 1:
        raise Refusal(
            400,
            param,
            f"{param}={text!r} is not a size: give WIDTHxHEIGHT with two positive whole numbers, e.g. 832x480 "
            "(in the cookbook's notebooks, TIER and ASPECT_RATIO set it).",
        )
    return int(found[1]), int(found[2])


def _resolution(fields: dict[str, str]) -> int | None:
    """The resolution tier an action or transfer job names in `extra_params` (`"resolution": "480"`), or None."""
    try:
        extra = json.loads(fields.get("extra_params") or "{}")
        return int(extra["resolution"]) if isinstance(extra, dict) and "resolution" in extra else None
    except (ValueError, TypeError):
        return None


def _whole(fields: dict[str, str], name: str) -> int | None:
    """A whole-number field, or None where it is absent or not a number (vLLM-Omni answers those itself)."""
    try:
        return int(fields[name])
    except (KeyError, ValueError):
        return None


def check_request(limits: Limits, route: str, fields: dict[str, Any]) -> None:
    """Refuse (`Refusal`) a generation request whose fields, with vLLM-Omni's defaults for what is left out, are over
    `limits`. Fields it cannot read are left to vLLM-Omni's own validation."""
    image = route == IMAGE_ROUTE
    fields = {k: str(v) for k, v in fields.items() if v is not None and not isinstance(v, dict | list)}
    size: tuple[int, int] | None
    if "size" in fields:
        size, size_text = parse_size("size", fields["size"]), fields["size"]
    elif not image and ("width" in fields or "height" in fields):
        size = (_whole(fields, "width") or 0, _whole(fields, "height") or 0)
        size = size if min(size) >= 1 else None  # vLLM-Omni answers a missing or non-positive side itself
        size_text = f"width={fields.get('width')}, height={fields.get('height')}"
    elif not image and (tier := _resolution(fields)) is not None:
        size = TIER_CANVASES.get(tier)  # an action or transfer job's tier; one vLLM-Omni does not know is its to refuse
        size_text = f"resolution={tier} (its largest picture)"
    else:
        size = DEFAULT_IMAGE_SIZE if image else DEFAULT_VIDEO_SIZE
        size_text = f"{size[0]}x{size[1]} (the server's default)"
    if size is None:
        return  # a size vLLM-Omni refuses itself
    pixels = size[0] * size[1]
    if pixels > limits.max_pixels:
        raise _over("size", size_text, "max_pixels", limits.max_pixels, f"{pixels:,} pixels a frame", "size")
    if image:
        frames, frames_param = _whole(fields, "n") or 1, "n"
        if not 1 <= frames <= 10:
            return  # vLLM-Omni's own 400
    elif "num_frames" in fields:
        frames, frames_param = _whole(fields, "num_frames") or 1, "num_frames"
    elif "seconds" in fields:
        try:
            frames = int(int(fields["seconds"]) * float(fields.get("fps", 24)))
        except ValueError:
            frames = 1
        frames_param = "seconds"
    else:
        frames, frames_param = 1, "num_frames"
    if frames > limits.max_frames:
        raise _over(
            frames_param, fields.get(frames_param), "max_frames", limits.max_frames, f"{frames} frames", "num_frames"
        )
    if pixels * frames > limits.max_pixel_frames:
        raise _over(
            frames_param,
            fields.get(frames_param, frames),
            "max_pixel_frames",
            limits.max_pixel_frames,
            f"{frames} frames of {size_text}, {pixels * frames / 1e6:.1f} million pixel-frames",
            "num_frames",
        )
    steps = _whole(fields, "num_inference_steps") or (DEFAULT_IMAGE_STEPS if image else DEFAULT_VIDEO_STEPS)
    if steps > limits.max_steps:
        raise _over(
            "num_inference_steps", steps, "max_steps", limits.max_steps, f"{steps} steps", "num_inference_steps"
        )


def check_field(limits: Limits, name: str, value: str) -> None:
    """Refuse a form field over a limit on its own, as soon as it has streamed in (before any file after it)."""
    if name == "size" and (size := parse_size("size", value)) is not None and size[0] * size[1] > limits.max_pixels:
        raise _over("size", value, "max_pixels", limits.max_pixels, f"{size[0] * size[1]:,} pixels a frame", "size")
    elif name == "num_frames" and (_whole({name: value}, name) or 0) > limits.max_frames:
        raise _over(name, value, "max_frames", limits.max_frames, f"{value} frames", "num_frames")
    elif name == "num_inference_steps" and (_whole({name: value}, name) or 0) > limits.max_steps:
        raise _over(name, value, "max_steps", limits.max_steps, f"{value} steps", "num_inference_steps")


class FormScanner:
    """Reads a form body as it streams past, keeping only its small fields: multipart (`boundary`) or urlencoded
    (`boundary` None). A file part is counted, not kept, and refused as soon as it passes `max_bytes`."""

    def __init__(self, boundary: bytes | None, max_bytes: int, on_field: Callable[[str, str], None]) -> None:
        self.fields: dict[str, str] = {}
        self.max_bytes = max_bytes
        self.on_field = on_field
        self._urlencoded = bytearray() if boundary is None else None
        self._delimiter = b"\r\n--" + (boundary or b"")
        self._pending = b"\r\n"  # the body starts with "--boundary", the delimiter without its line break
        self._state = "preamble"
        self._name: str | None = None
        self._file = False
        self._value = bytearray()
        self._size = 0

    def feed(self, chunk: bytes) -> None:
        if self._urlencoded is not None:
            self._urlencoded += chunk
            if len(self._urlencoded) > FIELD_BYTES:
                raise Refusal(400, "body", f"A form of over {FIELD_BYTES // MIB} MiB is no generation request.")
            return
        data = self._pending + chunk
        self._pending = b""
        while data:
            if self._state in ("preamble", "data"):
                at = data.find(self._delimiter)
                if at < 0:  # keep what could be the start of a delimiter for the next chunk
                    keep = len(self._delimiter) - 1
                    self._take(data[: max(0, len(data) - keep)])
                    self._pending = data[max(0, len(data) - keep) :]
                    return
                self._take(data[:at])
                if self._state == "data":
                    self._end_part()
                data, self._state = data[at + len(self._delimiter) :], "headers"
            else:  # headers: up to the blank line
                at = data.find(b"\r\n\r\n")
                if at < 0:
                    if len(data) > FIELD_BYTES:
                        raise Refusal(400, "body", "A form part's headers run over 1 MiB.")
                    self._pending = data
                    return
                self._start_part(data[:at].decode("latin-1"))
                data, self._state = data[at + 4 :], "data"

    def finish(self) -> None:
        if self._urlencoded is not None:
            self.fields.update(parse_qsl(self._urlencoded.decode("latin-1"), keep_blank_values=True))

    def _start_part(self, headers: str) -> None:
        disposition = next((h for h in headers.split("\r\n") if h.lower().startswith("content-disposition")), "")
        name = re.search(r'\bname="([^"]*)"', disposition)
        self._name = name[1] if name else None
        self._file = "filename=" in disposition
        self._value, self._size = bytearray(), 0

    def _take(self, data: bytes) -> None:
        if self._state != "data" or not data:
            return
        self._size += len(data)
        if self._file:
            if self._size > self.max_bytes:
                limit = self.max_bytes // MIB
                raise _over(
                    self._name or "file",
                    f"<a file of over {limit} MiB>",
                    "max_upload_mib",
                    limit,
                    f"a file of over {limit} MiB",
                    "upload",
                )
        elif self._size <= FIELD_BYTES:  # a longer field is no setting; Starlette refuses it itself (400)
            self._value += data

    def _end_part(self) -> None:
        if self._name is not None and not self._file and self._size <= FIELD_BYTES:
            self.fields[self._name] = self._value.decode("utf-8", "replace")
            self.on_field(self._name, self.fields[self._name])


@dataclass
class Entry:
    """A generation the server accepted and has not finished: who sent it, when, and its job id (async)."""

    participant: str
    arrived: float
    job: str | None = None


class RoomLimits:
    """The ASGI middleware (`--middleware local_server.room_limits.RoomLimits`)."""

    def __init__(self, app: App, limits: Limits | None = None, keys: list[str] | None = None) -> None:
        self.app = app
        self.limits = limits if limits is not None else Limits.from_env(os.environ.get(ENV))
        if keys is None:
            listed = os.environ.get(KEYS_ENV)
            keys = json.loads(listed) if listed else [k for k in [os.environ.get("VLLM_API_KEY")] if k]
        self._keys = {hashlib.sha256(k.encode()).digest() for k in keys}
        self._queue: dict[int, Entry] = {}  # in arrival order
        self._tickets = 0
        self._listed_at = 0.0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.limits is None or scope["type"] != "http" or not self._keyed(scope):
            return await self.app(scope, receive, send)  # vLLM's own authentication answers an unkeyed request
        method, path = scope["method"], scope["path"].removeprefix(scope.get("root_path", ""))
        if method == "POST" and path in (*VIDEO_ROUTES, IMAGE_ROUTE):
            return await self._generation(scope, receive, send, path)
        job = JOB.match(path)
        if job and method in ("GET", "DELETE"):
            return await self._job(scope, receive, send, job[1])
        return await self.app(scope, receive, send)

    def _keyed(self, scope: Scope) -> bool:
        if not self._keys:
            return True
        scheme, _, token = _header(scope, b"authorization").partition(" ")
        return scheme.lower() == "bearer" and hashlib.sha256(token.encode()).digest() in self._keys

    @staticmethod
    def participant(scope: Scope) -> str:
        """One participant: an API key from one address (a room gives each person a key, or each sits at a machine)."""
        client = (scope.get("client") or ("?", 0))[0]
        key = hashlib.sha256(_header(scope, b"authorization").encode()).hexdigest()[:12]
        return f"{client}/{key}"

    async def _generation(self, scope: Scope, receive: Receive, send: Send, route: str) -> None:
        assert self.limits is not None
        who = self.participant(scope)
        mine = [e for e in self._queue.values() if e.participant == who]
        if len(mine) >= self.limits.max_queued and any(e.job for e in mine):
            await self._refresh(scope)  # finished jobs that nobody polled still count until the server says so
            mine = [e for e in self._queue.values() if e.participant == who]
        if len(mine) >= self.limits.max_queued:
            refusal = Refusal(
                429,
                "queue",
                f"You have {len(mine)} generations waiting or running on this server, the room's limit per "
                f"participant (max_queued={self.limits.max_queued}). Wait for one to finish, or cancel a job you no "
                "longer need with DELETE /v1/videos/{id}, then send this again.",
                limit=("max_queued", self.limits.max_queued),
                value=len(mine),
            )
            return await _answer(send, refusal)
        content_type = _header(scope, b"content-type")
        if route == IMAGE_ROUTE or "json" in content_type:
            scanner: FormScanner | _JSONScanner = _JSONScanner()
        else:
            boundary = re.search(r'boundary="?([^";]+)"?', content_type)
            limits = self.limits
            scanner = FormScanner(
                boundary[1].encode("latin-1") if boundary else None,
                limits.max_upload_mib * MIB,
                lambda name, value: check_field(limits, name, value),
            )
        self._tickets += 1
        ticket = self._tickets
        self._queue[ticket] = Entry(who, time.monotonic())
        refused: list[Refusal] = []  # what was over a limit; `ours`: where the answer was this middleware's
        ours: list[Refusal] = []
        status: list[int] = []
        body = bytearray()

        async def inspected() -> Message:
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                try:
                    scanner.feed(message.get("body", b""))
                    if not message.get("more_body", False):
                        scanner.finish()
                        check_request(self.limits, route, scanner.fields)
                except Refusal as refusal:
                    refused.append(refusal)
                    self._queue.pop(ticket, None)
                    if not status:  # vLLM-Omni has not answered already (it reads the whole body first)
                        await _answer(send, refusal)
                        ours.append(refusal)
                    return {"type": "http.disconnect"}  # vLLM-Omni never sees the rest
            return message

        async def watched(message: Message) -> None:
            if ours:
                return  # the answer was ours; vLLM-Omni's to a request cut short goes nowhere
            if message["type"] == "http.response.start":
                status.append(message["status"])
            elif message["type"] == "http.response.body" and route == "/v1/videos" and len(body) < FIELD_BYTES:
                body.extend(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, inspected, watched)
        except Exception:
            if not refused:
                raise
        finally:
            entry = self._queue.get(ticket)
            job = _field(body, "id") if route == "/v1/videos" and status[:1] == [200] else None
            if entry is not None and job:
                entry.job = job  # an accepted job waits or runs after its answer: counted until it ends
            else:
                self._queue.pop(ticket, None)

    async def _job(self, scope: Scope, receive: Receive, send: Send, job: str) -> None:
        """A job's status (`GET`) gets its place in the queue while it waits or runs; a job the server reports ended,
        or one cancelled (`DELETE`), leaves the queue. The answer (a small JSON) is held until whole to read it."""
        if scope["method"] == "GET":
            await self._refresh(scope)
        start: dict[str, Any] = {}
        chunks: list[bytes] = []

        async def placed(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body, headers = b"".join(chunks), list(start.get("headers", []))
            if start["status"] == 200 and scope["method"] == "GET" and _field(body, "status") in WAITING:
                ticket = next((t for t, e in self._queue.items() if e.job == job), None)
                if ticket is not None:
                    headers += [
                        (b"x-queue-position", str(list(self._queue).index(ticket)).encode()),
                        (b"x-queue-length", str(len(self._queue)).encode()),
                    ]
            elif scope["method"] == "GET" or start["status"] in (200, 404):
                self._forget(job)  # ended, failed, cancelled or gone
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, placed)

    async def _refresh(self, scope: Scope) -> None:
        """Drop the jobs that the server no longer lists as queued or in progress (`GET /v1/videos`, as the caller)."""
        if not any(e.job for e in self._queue.values()) or time.monotonic() - self._listed_at < POLL_FRESH_S:
            return
        alive, after = set(), None
        while True:
            query = f"limit=100&order=asc{f'&after={after}' if after else ''}".encode()
            status, body = await _call(self.app, scope, "GET", "/v1/videos", query)
            if status != 200:
                return  # keep what is known; the caller's own request will show what is wrong
            page = json.loads(body).get("data", [])
            alive |= {j["id"] for j in page if j.get("status") in WAITING}
            if len(page) < 100:
                break
            after = page[-1]["id"]
        self._listed_at = time.monotonic()
        for job in [e.job for e in self._queue.values() if e.job and e.job not in alive]:
            self._forget(job)

    def _forget(self, job: str) -> None:
        for ticket in [t for t, e in self._queue.items() if e.job == job]:
            del self._queue[ticket]


class _JSONScanner:
    """A JSON body (the images route), kept whole up to 1 MiB to read its fields at the end."""

    def __init__(self) -> None:
        self.body = bytearray()
        self.fields: dict[str, Any] = {}

    def feed(self, chunk: bytes) -> None:
        self.body += chunk
        if len(self.body) > FIELD_BYTES:
            raise Refusal(400, "body", f"A JSON body of over {FIELD_BYTES // MIB} MiB is no generation request.")

    def finish(self) -> None:
        try:
            parsed = json.loads(self.body or b"{}")
        except ValueError:
            return  # vLLM-Omni answers malformed JSON itself
        self.fields = parsed if isinstance(parsed, dict) else {}


def _header(scope: Scope, name: bytes) -> str:
    return next((v.decode("latin-1") for k, v in scope.get("headers", []) if k.lower() == name), "")


def _field(body: bytes, name: str) -> Any:
    """A field of a JSON object answer, or None."""
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    return answer.get(name) if isinstance(answer, dict) else None


async def _answer(send: Send, refusal: Refusal) -> None:
    body = json.dumps(refusal.body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if refusal.status == 429:
        headers.append((b"retry-after", b"5"))
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _call(app: App, scope: Scope, method: str, path: str, query: bytes) -> tuple[int, bytes]:
    """A request of the middleware's own to the server behind it, with the caller's headers (its key)."""
    inner = {**scope, "method": method, "path": path, "raw_path": path.encode(), "query_string": query}
    answer: dict[str, Any] = {"status": 500, "body": bytearray()}

    async def nothing() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def keep(message: Message) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
        elif message["type"] == "http.response.body":
            answer["body"] += message.get("body", b"")

    await app(inner, nothing, keep)
    return answer["status"], bytes(answer["body"])
