"""Room limits for a vLLM-Omni server that many people share: a vLLM middleware (`vllm serve --middleware`).

One generation runs at a time, so one participant's typo (`size=100000x96`), a 720p video on a CPU server, an hour
of sound or a non-finite flow shift stalls everyone, and a large enough one ends the server. This middleware reads
each generation request before vLLM-Omni does (`POST /v1/videos`, `/v1/videos/sync`, `/v1/images/generations`) and
answers 400, naming the field, the value and the limit or range, when any field would scale the work past the
room's limits (`Limits`), is not a plain finite number in its range, names a key Cosmos 3 does not take from a
participant, or is framed so that vLLM-Omni could read it otherwise than the room does (a field sent twice, a
multipart header of an unusual form, JSON nested deeper than 32 levels). What vLLM-Omni refuses itself with a 400
that names the field (a number that is not a number at all, a value under its minimum, an unknown model) is left to
it, in its words. A request within the limits reaches vLLM-Omni as it came, byte for byte and as it streams in:
nothing is buffered or rewritten.

It also keeps the queue fair, and time bounded: each participant (an API key from one address) may have
`max_queued` generations waiting or running; a job's `GET /v1/videos/{id}` answer carries its place in the queue
(`X-Queue-Position`); and a generation that has run `max_run_s` seconds is answered with a 504 that names the
limit (a synchronous request at once, a job when it is next polled). vLLM-Omni 0.30.0 cannot stop a Cosmos 3
generation once its engine has started it (the pipeline does not opt in to cooperative cancellation, and `DELETE`
only forgets a job), so the generation keeps its place in the queue until the engine is done with it (a job is then
deleted), and the limits on the fields are what keep every admitted generation within that time; the 504 is the
participant's answer if one still runs long.

    PYTHONPATH=support vllm serve MODEL --omni --middleware local_server.room_limits.RoomLimits

`bash scripts/serve_vllm_omni.sh` adds it to every server it starts, with the limits for its machine in
`$COSMOS3_ROOM_LIMITS` (JSON, or `off`); without that variable the GPU limits apply. It imports only the standard
library, so it runs in any vLLM environment, NVIDIA's container included (mount `support/` and set PYTHONPATH).
The API keys are read as vLLM reads them (`$VLLM_API_KEY`, or `$COSMOS3_ROOM_API_KEYS` as a JSON list, which the
launcher sets from `--api-key`): a request without a valid key is left to vLLM, which answers 401.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import glob
import hashlib
import json
import math
import os
import re
import struct
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_plus

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

ENV = "COSMOS3_ROOM_LIMITS"
KEYS_ENV = "COSMOS3_ROOM_API_KEYS"
ADAPTERS_ENV = "COSMOS3_ROOM_ADAPTERS"  # a folder of LoRA adapters a participant may name (issue #63 adds the flag)
VIDEO_ROUTES = ("/v1/videos", "/v1/videos/sync")
IMAGE_ROUTE = "/v1/images/generations"
JOB = re.compile(r"^/v1/videos/([^/]+)$")
SIZE = re.compile(r"^(\d+)x(\d+)$")
# What vLLM-Omni 0.30.0 makes when a field is left out: 1280x720 videos (images 1024x1024), 35 steps a video and
# 50 an image, 24 fps, and one frame when neither num_frames nor seconds is sent.
DEFAULT_VIDEO_SIZE, DEFAULT_IMAGE_SIZE = (1280, 720), (1024, 1024)
DEFAULT_VIDEO_STEPS, DEFAULT_IMAGE_STEPS = 35, 50
DEFAULT_FPS = 24.0
# The largest picture of each resolution tier an action or transfer job names instead of a size
# (`helpers.canvases.CANVASES`; tests/test_room_limits.py keeps the two the same). Transfer ignores `size` and uses
# the tier (720 when none is named); action uses the size when one is sent, else the tier (480 when none is named).
TIER_CANVASES = {256: (320, 256), 480: (640, 640), 704: (960, 960), 720: (960, 960)}
TRANSFER_TIER, ACTION_TIER = 720, 480
MIB = 1024 * 1024
FIELD_BYTES = MIB  # a form field or JSON body beyond this is no request a notebook sends (Starlette's own part limit)
FORM_BYTES = 2 * MIB  # all of a form's fields together (Starlette allows 1000 fields of 1 MiB each)
MAX_PARTS, MAX_FILES = 64, 2  # the notebooks send about 15 fields and at most two files (a control and its source)
HEADER_BYTES = 16 * 1024  # a form part's headers
MAX_JSON_DEPTH = 32  # vLLM-Omni's own JSON bound for masks is 64; 490 levels end its engine (a deep copy)
MIN_SIDE = 16  # a picture's side: under it the latent grid (16 pixels a cell) is empty and generation fails (a 500)
MAX_REFERENCE_PIXELS = 8192 * 8192  # an uploaded picture, or a video's frame: a 50 MP photo passes, a PNG bomb not
REFERENCE_DECODE = 8  # an uploaded video's decoded pixel-frames, at most this many times `max_pixel_frames`
MOOV_BYTES = 16 * MIB  # an MP4's index, read to count a control video's frames
POLL_FRESH_S = 1.0  # how old the server's job list may be when a job's place in the queue is told
WATCH_S = 1.0  # how often a running synchronous generation's time is looked at
WAITING = ("queued", "in_progress")  # a job's states before it ends

# Ranges of the numbers a participant sends, machine-independent: the cookbook's own (helpers.settings,
# helpers.*_settings) where it has one, vLLM-Omni's form constraints where it has them, and, where neither bounds a
# number that reaches the pipeline, a range that admits every value NVIDIA or the notebooks use with room to spare.
FPS = (1.0, 60.0)  # helpers: 1 to 60 (NVIDIA uses 10, 15, 20, 24, 30); 1e18 fails the encoder after the whole run
GUIDANCE = (0.0, 20.0)  # vLLM-Omni's and the cookbook's range (NVIDIA: 1, 3, 4, 6; control guidance 1.5 to 3)
FLOW_SHIFT = (0.0, 50.0)  # over 0 (0 and below give NaN sigmas), at most 50 (NVIDIA: 3, 5, 10)
SEED = (0, 2**63 - 1)  # helpers.settings: 0 to 2**63 - 1
CONTROL_WEIGHT = (0.0, 10.0)  # a transfer hint's weight: non-negative (vLLM-Omni), at most 10 (NVIDIA: 1)
LORA_SCALE = (-4.0, 4.0)
# vLLM-Omni 0.30.0's sampler (FlowUniPC) truncates each step's shifted noise level to a whole timestep; when the first
# two are the same, it starts a step late and fails on the last (`assert self.this_order > 0`, a 500). That happens
# with a large flow shift at many steps (at 50 steps from 21.5, at 35 from 30.5) or a tiny one. SIGMA_MAX is the
# scheduler's first noise level for 1,000 training timesteps (0.999 in float32).
SIGMA_MAX, TRAIN_TIMESTEPS = 0.9990000128746033, 1000
DEFAULT_FLOW_SHIFT = {"video": 10.0, "transfer": 10.0, "action": 5.0, "image": 3.0}
DEFAULT_ACTION_STEPS = 30
MAX_SEQUENCE_LENGTH = 4096  # the pipeline's default prompt length in tokens; more only costs (60,000: 5x the time)
MAX_HINTS = 2  # the transfer notebook's most (edge and depth); each adds a transformer pass a step
MAX_ACTION_WIDTH = 64  # Cosmos 3's action_dim (the widest embodiment the notebooks send is 57)
MAX_ACTION_ROWS = 400  # a chunk's actions: at most NVIDIA's longest clip (397 frames)
TIERS = ("256", "480", "704", "720")
TRANSFER_HINTS = ("edge", "blur", "depth", "seg", "wsm")
DERIVED_HINTS = ("edge", "blur")  # the only hints vLLM-Omni 0.30.0 derives from a source clip itself
TRANSFER_CHUNK, TRANSFER_WSM_CHUNK, TRANSFER_CONDITIONAL = 93, 101, 1  # vLLM-Omni's defaults when none is sent
EDGE_PRESETS = ("none", "very_low", "low", "medium", "high", "very_high")
ACTION_MODES = ("forward_dynamics", "inverse_dynamics", "policy")
# vLLM-Omni 0.30.0's embodiments (`cosmos3.action.EMBODIMENT_TO_DOMAIN_ID`): another name fails the job (a 500).
DOMAINS = (
    "abc_yam agibot_gear_gripper agibot_gear_gripper_ext agibotworld av behavior1k_lerobot bridge_orig_lerobot "
    "camera_pose drawanything droid_lerobot embodiment_b embodiment_c_gripper embodiment_c_gripper_ext fractal galbot "
    "hand_pose libero maniparena molmoact2_yam no_action pusht robomind-franka robomind-franka-dual robomind-ur umi "
    "xdof_yam"
).split()
TRUE, FALSE = ("1", "on", "t", "true", "y", "yes"), ("0", "off", "f", "false", "n", "no")  # pydantic's booleans


@dataclass(frozen=True)
class Limits:
    """What one request may ask for. `max_pixel_frames` bounds the work of one call (pixels a frame times frames);
    `max_sound_s` the sound's length; `max_run_s` how long one generation may run before its participant is answered
    with a 504."""

    max_pixels: int
    max_frames: int
    max_pixel_frames: int
    max_steps: int
    max_upload_mib: int
    max_queued: int
    max_sound_s: int
    max_run_s: int

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
            f"pixel-frames a call, {self.max_steps} steps, {self.max_sound_s} s of sound, {self.max_upload_mib} MiB a "
            f"file, {self.max_queued} generations waiting or running per participant, {self.max_run_s} s a "
            "generation"
        )


# The defaults admit every preset and tier the notebooks offer on the machine, and nothing far beyond
# (tests/test_room_limits.py derives them from the presets). On a GPU, NVIDIA's published sizes: pictures up to
# 720p (and the images route's own default, 1024x1024), NVIDIA's frame caps (397 at 256p; 720p at 197 frames is the
# most work a call), 50 steps (images and transfer), sound as long as NVIDIA's longest clip (397 frames at 24 fps,
# 16.5 s). On a CPU, what the notebooks run there at `tiny`: up to 100 frames (a transfer `draft`), 720p times 9
# frames of work a call (`helpers.settings.CPU_PIXEL_FRAMES`), the longest sound a CPU preset makes (93 frames at
# 24 fps, 3.9 s). Files up to 100 MiB. Four generations per participant: the audiovisual notebook's "Several clients
# at once" sends four. The time a generation may run: on a GPU an hour, about 1.7 times the largest admitted request
# (a two-control transfer at 720p, 197 frames and 50 steps, about 2,150 s with Nano on one H200, extrapolated from
# docs/performance.md section 19); on a CPU 10 minutes, about 10 times the slowest admitted request at `tiny` on two
# shared cores (62 s, a two-control transfer at 720p: support/benchmarks/room_limits.py --slowest).
DEFAULTS: dict[str, Limits] = {
    "gpu": Limits(1024 * 1024, 397, 1280 * 720 * 197, 50, 100, 4, 17, 3600),
    "cpu": Limits(1024 * 1024, 100, 1280 * 720 * 9, 50, 100, 4, 4, 600),
}

# What a participant changes in the cookbook's notebooks to come within each limit.
NOTEBOOK_HINT = {
    "size": "a smaller TIER (or the preset's own, TIER=0)",
    "num_frames": "a smaller PRESET (smoke or draft) or TIER",
    "num_inference_steps": "a smaller PRESET (smoke or draft)",
    "upload": "a smaller IMAGE or VIDEO file",
    "sound": "a shorter sound (sound_duration) or a smaller PRESET",
}


class Refusal(Exception):
    """A request the room does not pass on: the status, and the body: vLLM's error envelope (`error`: message, type,
    param, code) and beside it `room_limit`, the limit's name and number (or its range) and the value asked for, for a
    program to read."""

    def __init__(
        self,
        status: int,
        param: str,
        message: str,
        limit: tuple[str, Any] | None = None,
        value: Any = None,
        allowed: tuple[Any, Any] | None = None,
    ):
        super().__init__(message)
        self.status, self.param = status, param
        reason = {400: "Bad Request", 404: "Not Found", 429: "Too Many Requests", 504: "Gateway Timeout"}[status]
        self.body: dict[str, Any] = {"error": {"message": message, "type": reason, "param": param, "code": status}}
        if limit is not None:
            self.body["room_limit"] = {"name": limit[0], "limit": limit[1], "value": value}
        elif allowed is not None:
            self.body["room_limit"] = {"name": param, "range": list(allowed), "value": value}


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


def _wrong(param: str, value: Any, what: str) -> Refusal:
    """A value the room does not pass on: not of its type, not among its choices, or a key it does not take."""
    shown = value if isinstance(value, int | float | bool) or value is None else _short(value)
    return Refusal(400, param, f"{param}={shown} {what}", value=shown)


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _range_text(low: float | None, high: float | None, low_open: bool = False) -> str:
    def number(x: float) -> str:
        return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"

    if high is None:
        return f"{'over' if low_open else 'of at least'} {number(low or 0)}"
    if low is None:
        return f"of at most {number(high)}"
    return f"{'over' if low_open else 'from'} {number(low)} {'and at most' if low_open else 'to'} {number(high)}"


def _out_of_range(
    param: str, value: Any, low: float | None, high: float | None, why: str, low_open: bool = False
) -> Refusal:
    shown = value if isinstance(value, int | float) else _short(value)
    return Refusal(
        400,
        param,
        f"{param}={shown} is out of this server's range for it: give a number {_range_text(low, high, low_open)}"
        + (f" ({why})." if why else "."),
        allowed=(low, high),
        value=shown,
    )


# --- Numbers ------------------------------------------------------------------------------------------------------


class _Unreadable:
    """A value vLLM-Omni refuses itself with a 400 that names the field (pydantic's `int_parsing` and the like)."""


UNREADABLE = _Unreadable()


class NonFinite(float):
    """A JSON `NaN`, `Infinity` or `-Infinity` literal (Python's `json` reads them; the room does not pass them on)."""


@dataclass(frozen=True)
class Number:
    """A number field: whole or not, and the room's range (None: vLLM-Omni's own bounds are enough)."""

    whole: bool
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    why: str = ""


def read_number(param: str, raw: Any, spec: Number, *, strict_json: bool = False) -> Any:
    """The number in `raw`: None when absent, UNREADABLE when it is no number (vLLM-Omni's 400 names the field), or a
    Refusal when it is not finite or outside the room's range.

    A form value is read as Python's `float` reads it, which takes every text pydantic's lax mode takes as a number
    (and more: tests/test_room_limits.py checks this against pydantic), so a number the room cannot read is one
    vLLM-Omni refuses too. `strict_json` (extra_params, which the pipeline reads with `int()` and `float()` rather
    than pydantic): only JSON numbers are numbers; anything else is refused here."""
    if raw is None or (isinstance(raw, str) and raw == "" and not strict_json):
        return None
    if isinstance(raw, bool) or (strict_json and not isinstance(raw, int | float)):
        raise _wrong(param, raw, f"is not a number: give {'a whole number' if spec.whole else 'a number'}.")
    value: float | int
    if isinstance(raw, str):
        text = raw.strip()
        if re.fullmatch(r"[+-]?[0-9]{1,40}", text):
            value = int(text)
        else:
            try:
                value = float(raw)
            except ValueError:
                return UNREADABLE
    elif isinstance(raw, int | float):
        value = raw
    else:
        return UNREADABLE  # a list or an object where a number goes: pydantic's 400
    if isinstance(value, float) and not math.isfinite(value):
        bounded = spec.low is not None or spec.high is not None
        raise Refusal(
            400,
            param,
            f"{param}={raw if isinstance(raw, str) else str(value)} is not a finite number: give "
            + (f"a number {_range_text(spec.low, spec.high, spec.low_open)}" if bounded else "a finite number")
            + (f" ({spec.why})." if spec.why else "."),
            allowed=(spec.low, spec.high) if bounded else None,
            value=raw if isinstance(raw, str) else str(value),
        )
    if spec.whole:
        if isinstance(value, float):
            if not value.is_integer():
                if strict_json:
                    raise _wrong(param, raw, "is not a whole number.")
                return UNREADABLE  # pydantic: "a number with a fractional part"
            value = int(value)
    below = spec.low is not None and (value <= spec.low if spec.low_open else value < spec.low)
    if below or (spec.high is not None and value > spec.high):
        shown = raw if isinstance(raw, str) else value
        raise _out_of_range(param, shown, spec.low, spec.high, spec.why, spec.low_open)
    return value


def read_bool(raw: Any, *, strict_json: bool = False) -> Any:
    """A boolean as pydantic reads a form's (`true`, `yes`, `1`, `on`... in any case), or UNREADABLE."""
    if raw is None or raw == "":
        return None
    if isinstance(raw, bool):
        return raw
    if strict_json:
        return UNREADABLE
    if isinstance(raw, str):
        text = raw.lower()
        return True if text in TRUE else False if text in FALSE else UNREADABLE
    if isinstance(raw, int) and raw in (0, 1):
        return bool(raw)
    return UNREADABLE


# The video form's number and boolean fields (vLLM-Omni's `_parse_video_form`), with the room's ranges.
VIDEO_NUMBERS: dict[str, Number] = {
    "width": Number(True),
    "height": Number(True),
    "num_frames": Number(True),
    "num_inference_steps": Number(True),
    "fps": Number(False, *FPS, why="the notebooks' 1 to 60; NVIDIA uses 10 to 30"),
    "guidance_scale": Number(False, *GUIDANCE, why="vLLM-Omni's own range; 1 turns guidance off"),
    "guidance_scale_2": Number(False, *GUIDANCE, why="vLLM-Omni's own range; not used by Cosmos 3"),
    "true_cfg_scale": Number(False, *GUIDANCE, why="vLLM-Omni's own range; not used by Cosmos 3"),
    "boundary_ratio": Number(False, 0.0, 1.0, why="vLLM-Omni's own range; not used by Cosmos 3"),
    "flow_shift": Number(False, *FLOW_SHIFT, low_open=True, why="0 and below give no video; NVIDIA uses 3 to 10"),
    "seed": Number(True, *SEED, why="the notebooks' seeds"),
    "sound_duration": Number(False),  # finite; its range is the video's length (check_request)
    "num_outputs_per_prompt": Number(True, 1, 1, why="Cosmos 3 makes one video a request"),
    "short_edge": Number(True, 1, 8192, why="not used by Cosmos 3"),
    "start_time_seconds": Number(False, 0.0, 3600.0, why="not used by Cosmos 3"),
    "frame_interpolation_exp": Number(True, 1, 3, why="not applied by Cosmos 3; 2**exp frames where it is"),
    "frame_interpolation_scale": Number(False, 0.0, 4.0, low_open=True, why="not applied by Cosmos 3"),
}
VIDEO_BOOLS = ("generate_sound", "enable_frame_interpolation", "return_stage_metrics")
VIDEO_TEXTS = ("prompt", "negative_prompt", "model", "user", "aspect_ratio", "quality", "control_type", "seconds")
VIDEO_TEXTS += ("size",)
VIDEO_JSON = ("image_reference", "video_reference", "audio_reference", "lora", "extra_params")
VIDEO_FILES = ("input_reference", "control_reference", "source_video", "source_audio")
VIDEO_FILES += ("video_noise_mask", "audio_noise_mask")
IMAGE_NUMBERS: dict[str, Number] = {
    "n": Number(True),
    "num_inference_steps": Number(True),
    "guidance_scale": VIDEO_NUMBERS["guidance_scale"],
    "true_cfg_scale": VIDEO_NUMBERS["true_cfg_scale"],
    "flow_shift": VIDEO_NUMBERS["flow_shift"],
    "seed": VIDEO_NUMBERS["seed"],
    "output_compression": Number(True),
    "layers": Number(True),
}


# --- JSON ---------------------------------------------------------------------------------------------------------

_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]")


class _Duplicate(Exception):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _Duplicate(key)
        result[key] = value
    return result


def json_depth(text: str) -> int:
    """How deeply `text`'s arrays and objects nest, counted without recursion (a deep one ends `json.loads`)."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    depth = deepest = 0
    for char in brackets:
        depth += 1 if char in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def check_text(param: str, text: Any) -> None:
    """A prompt is text, but Cosmos 3's pipeline reads one that is JSON (a structured caption) with `json.loads`,
    which a deeply nested one ends (a 500): no caption nests more than a few levels."""
    if isinstance(text, str) and json_depth(text) > MAX_JSON_DEPTH:
        raise Refusal(
            400,
            param,
            f"{param} nests brackets more than {MAX_JSON_DEPTH} levels deep: a structured caption nests a few "
            "(the server reads it as JSON, and a deeper one fails the generation).",
            allowed=(0, MAX_JSON_DEPTH),
            value=f"<text nested {json_depth(text)} levels>",
        )


def read_json(param: str, text: str) -> Any:
    """A form field's or body's JSON, read as vLLM-Omni reads it (`json.loads`), or UNREADABLE where vLLM-Omni
    refuses it itself (`Invalid JSON`). Refused here: nesting deeper than 32 levels, a key twice in an object, and
    `NaN`/`Infinity`, which Python's `json` reads but no setting is."""
    if json_depth(text) > MAX_JSON_DEPTH:
        raise Refusal(
            400,
            param,
            f"{param} nests its JSON more than {MAX_JSON_DEPTH} levels deep: no setting needs more than a few "
            "(deeper JSON would end vLLM-Omni's engine).",
            allowed=(0, MAX_JSON_DEPTH),
            value=f"<JSON nested {json_depth(text)} levels>",
        )
    try:
        value = json.loads(text, object_pairs_hook=_pairs, parse_constant=NonFinite)
    except _Duplicate as duplicate:
        raise Refusal(
            400,
            param,
            f"{param} names {str(duplicate)!r} twice in one JSON object: give each key once.",
        ) from None
    except json.JSONDecodeError:
        return UNREADABLE
    except (ValueError, RecursionError) as exc:  # e.g. an integer of more than 4,300 digits
        raise Refusal(400, param, f"{param} is JSON no setting is made of ({exc}).") from None
    bad = _non_finite(value)
    if bad is not None:
        path, number = bad
        raise Refusal(
            400,
            f"{param}{path}",
            f"{param}{path}={number} is not a finite number: JSON settings are finite numbers.",
            value=str(number),
        )
    return value


def _non_finite(value: Any, path: str = "") -> tuple[str, float] | None:
    if isinstance(value, float) and not math.isfinite(value):
        return path, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = _non_finite(item, f"{path}.{key}" if isinstance(key, str) else f"{path}[{key}]")
        if found is not None:
            return found
    return None


# --- The sampler's schedule ------------------------------------------------------------------------------------


def schedule_fails(steps: int, shift: float) -> bool:
    """Whether FlowUniPC's first two timesteps are the same at `steps` steps and this flow shift (its numbers, in
    the same float64 arithmetic as NumPy's `linspace`)."""
    if steps < 2:
        return False

    def timestep(sigma: float) -> int:
        return int(shift * sigma / (1 + (shift - 1) * sigma) * TRAIN_TIMESTEPS)

    return timestep(SIGMA_MAX) == timestep((0.0 - SIGMA_MAX) / steps + SIGMA_MAX)


def check_schedule(param: str, steps: int, shift: float) -> None:
    if not schedule_fails(steps, shift):
        return
    low, high = 1.0, FLOW_SHIFT[1]
    for _ in range(60):  # the largest flow shift that works at this many steps (they fail above it)
        middle = (low + high) / 2
        low, high = (middle, high) if not schedule_fails(steps, middle) else (low, middle)
    top = math.floor(low * 10) / 10
    raise Refusal(
        400,
        param,
        f"{param}={shift:g} with {steps} steps gives vLLM-Omni's sampler the same first timestep twice, which fails "
        f"the generation: at {steps} steps give a flow shift from 0.1 to {top:g} (NVIDIA uses 3 to 10), or fewer "
        "steps.",
        allowed=(0.1, top),
        value=shift,
    )


# --- Sizes --------------------------------------------------------------------------------------------------------


def parse_size(param: str, text: str) -> tuple[int, int] | None:
    """WIDTHxHEIGHT as numbers; None for text that is not WIDTHxHEIGHT, which vLLM-Omni answers with a 400 itself.
    A size of the right form that is not positive is refused here: vLLM-Omni's synchronous route fails it as its own
    error (500, "Video generation failed"). A side of more digits than any picture has is over the limit."""
    found = SIZE.fullmatch(text)
    if not found:
        return None
    if len(found[1]) > 9 or len(found[2]) > 9:
        return (10**9, 10**9)  # vLLM-Omni would fail the generation reading it; over every limit here
    if int(found[1]) < 1 or int(found[2]) < 1:
        raise Refusal(
            400,
            param,
            f"{param}={text!r} is not a size: give WIDTHxHEIGHT with two positive whole numbers, e.g. 832x480 "
            "(in the cookbook's notebooks, TIER and ASPECT_RATIO set it).",
        )
    check_sides(param, text, int(found[1]), int(found[2]))
    return int(found[1]), int(found[2])


def check_sides(param: str, shown: Any, width: int, height: int) -> None:
    """A picture under 16 pixels a side has no latent cell: vLLM-Omni 0.30.0 fails its generation (a 500)."""
    if 1 <= min(width, height) < MIN_SIDE:
        raise Refusal(
            400,
            param,
            f"{param}={shown} is a picture of {width}x{height}: give each side at least {MIN_SIDE} pixels (the model "
            f"works on cells of {MIN_SIDE}; a smaller side has none).",
            allowed=(MIN_SIDE, None),
            value=f"{width}x{height}",
        )


def parse_image_size(text: Any) -> tuple[int, int] | None:
    """The images route's size as vLLM-Omni's `parse_size` reads it (`int()` of each side of the one `x`, so
    `" 1100 x 1000"` is 1100x1000), or None where it refuses it itself."""
    if not isinstance(text, str):
        return None
    if SIZE.fullmatch(text):
        return parse_size("size", text)
    parts = text.split("x")
    if len(parts) != 2:
        return None
    try:
        width, height = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    if width <= 0 or height <= 0:
        return None
    check_sides("size", repr(text), width, height)
    return width, height


# --- Uploads ------------------------------------------------------------------------------------------------------


@dataclass
class Upload:
    """What the room learns of a file part as it streams past: its size, its first bytes, and for an MP4 or MOV its
    index (`moov`), read to count a video's frames and its picture."""

    name: str
    filename: str
    content_type: str
    size: int = 0
    head: bytearray = field(default_factory=bytearray)
    moov: bytearray | None = None
    _box_left: int = 0  # bytes of the current top-level box still to come (-1: it runs to the end)
    _box_header: bytearray = field(default_factory=bytearray)
    _in_moov: bool = False
    _iso: bool | None = None

    HEAD = 256 * 1024  # a JPEG's picture size can follow 64 KiB of EXIF

    def take(self, data: bytes) -> None:
        if len(self.head) < self.HEAD:
            self.head += data[: self.HEAD - len(self.head)]
        self.size += len(data)
        if self._iso is None and len(self.head) >= 12:
            self._iso = self.head[4:8] == b"ftyp"
        if self._iso:
            self._boxes(data)

    def _boxes(self, data: bytes) -> None:
        """Walk the top-level boxes of an ISO media file as it streams, keeping `moov` and skipping the rest."""
        view = memoryview(data)
        while view:
            if self._box_left == 0:
                need = 8 if len(self._box_header) < 8 or self._box_header[:4] != b"\0\0\0\1" else 16
                take = min(need - len(self._box_header), len(view))
                self._box_header += view[:take]
                view = view[take:]
                if len(self._box_header) == 8 and self._box_header[:4] == b"\0\0\0\1":
                    continue  # a 64-bit size follows
                if len(self._box_header) < need:
                    return
                size = struct.unpack(">I", self._box_header[:4])[0]
                if size == 1:
                    size = struct.unpack(">Q", self._box_header[8:16])[0]
                kind = bytes(self._box_header[4:8])
                self._box_left = -1 if size == 0 else max(0, size - len(self._box_header))
                self._box_header = bytearray()
                self._in_moov = kind == b"moov" and self.moov is None
                if self._in_moov:
                    self.moov = bytearray()
                if self._box_left == 0:
                    self._in_moov = False
                continue
            take = len(view) if self._box_left < 0 else min(self._box_left, len(view))
            if self._in_moov and self.moov is not None:
                if len(self.moov) + take > MOOV_BYTES:
                    raise Refusal(400, self.name, f"{self.name}'s MP4 index is over {MOOV_BYTES // MIB} MiB.")
                self.moov += view[:take]
            view = view[take:]
            if self._box_left > 0:
                self._box_left -= take
                if self._box_left == 0:
                    self._in_moov = False

    def kind(self) -> str | None:
        """image, video (an MP4 or MOV), other-video (a container the room cannot read), or None: not media."""
        h = bytes(self.head[:16])
        if h.startswith((b"\x89PNG", b"\xff\xd8\xff", b"GIF8", b"BM", b"II*\0", b"MM\0*")) or (
            h[:4] == b"RIFF" and h[8:12] == b"WEBP"
        ):
            return "image"
        if h[4:8] == b"ftyp":
            return "image" if h[8:12] in (b"heic", b"heix", b"avif", b"mif1", b"msf1") else "video"
        if h.startswith((b"\x1aE\xdf\xa3", b"OggS", b"FLV", b"\0\0\1\xba", b"\0\0\1\xb3", b"\0\0\0\1")) or (
            h[:4] == b"RIFF" and h[8:12] == b"AVI "
        ):
            return "other-video"
        if len(self.head) > 376 and self.head[0] == 0x47 and self.head[188] == 0x47:
            return "other-video"  # MPEG-TS
        return None

    def picture(self) -> tuple[int, int] | None:
        """The picture's width and height from its header (PNG, GIF, BMP, WebP, JPEG), or a video's from its index."""
        h = bytes(self.head)
        with contextlib.suppress(struct.error, IndexError, ValueError):
            if h.startswith(b"\x89PNG") and h[12:16] == b"IHDR":
                return struct.unpack(">II", h[16:24])
            if h.startswith(b"GIF8"):
                return struct.unpack("<HH", h[6:10])
            if h.startswith(b"BM"):
                width, height = struct.unpack("<ii", h[18:26])
                return abs(width), abs(height)
            if h[:4] == b"RIFF" and h[8:12] == b"WEBP":
                chunk = h[12:16]
                if chunk == b"VP8X":
                    return int.from_bytes(h[24:27], "little") + 1, int.from_bytes(h[27:30], "little") + 1
                if chunk == b"VP8L":
                    bits = int.from_bytes(h[21:25], "little")
                    return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
                if chunk == b"VP8 ":
                    width, height = struct.unpack("<HH", h[26:30])
                    return width & 0x3FFF, height & 0x3FFF
            if h.startswith(b"\xff\xd8"):
                return _jpeg_size(h)
            if self.moov is not None:
                track = _mp4_video_track(bytes(self.moov))
                return track[1] if track else None
        return None

    def frames(self) -> int | None:
        """An MP4's or MOV's video frames (its index's sample count), or None where the room cannot count them."""
        if self.moov is None:
            return None
        with contextlib.suppress(struct.error, IndexError, ValueError):
            track = _mp4_video_track(bytes(self.moov))
            return track[0] if track else None
        return None


def _jpeg_size(h: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 9 < len(h):
        if h[at] != 0xFF:
            return None
        marker = h[at + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            at += 2
            continue
        length = struct.unpack(">H", h[at + 2 : at + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", h[at + 5 : at + 9])
            return width, height
        at += 2 + length
    return None


def _children(data: bytes) -> list[tuple[bytes, bytes]]:
    boxes, at = [], 0
    while at + 8 <= len(data):
        size, kind = struct.unpack(">I4s", data[at : at + 8])
        header = 8
        if size == 1:
            size, header = struct.unpack(">Q", data[at + 8 : at + 16])[0], 16
        elif size == 0:
            size = len(data) - at
        if size < header:
            break
        boxes.append((kind, data[at + header : at + size]))
        at += size
    return boxes


def _mp4_video_track(moov: bytes) -> tuple[int, tuple[int, int]] | None:
    """The frames and picture of an MP4's video tracks (the most frames, the largest picture): `stsz`'s sample count,
    `tkhd`'s width and height. None where they cannot be counted: a fragmented MP4 (`mvex`, its samples in `moof`
    boxes), or a track without a sample count."""
    boxes = _children(moov)
    if any(kind == b"mvex" for kind, _ in boxes):
        return None
    found: list[tuple[int, tuple[int, int]]] = []
    for kind, trak in boxes:
        if kind != b"trak":
            continue
        parts = dict(_children(trak))
        mdia = dict(_children(parts.get(b"mdia", b"")))
        if mdia.get(b"hdlr", b"")[8:12] != b"vide":
            continue
        tkhd = parts.get(b"tkhd", b"")
        width, height = struct.unpack(">II", tkhd[-8:]) if len(tkhd) >= 84 else (0, 0)
        stbl = dict(_children(dict(_children(mdia.get(b"minf", b""))).get(b"stbl", b"")))
        stsz = stbl.get(b"stsz", b"")
        frames = struct.unpack(">I", stsz[8:12])[0] if len(stsz) >= 12 else 0
        if frames == 0:
            return None
        found.append((frames, (width >> 16, height >> 16)))
    if not found:
        return None
    return max(f for f, _ in found), max((p for _, p in found), key=lambda p: p[0] * p[1])


# --- Parsing the request as vLLM-Omni will -----------------------------------------------------------------------

_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_PARAM = re.compile(rf'\s*;\s*({_TOKEN})=({_TOKEN}|"[^"\\\r\n]*")')
_BOUNDARY = re.compile(r"[0-9A-Za-z'()+_,./:=?-]{1,70}")


def header_options(value: str, what: str) -> tuple[str, dict[str, str]]:
    """`type; key=value; ...` read strictly: every key lower case and once, every value a token or a plain quoted
    string, so that python-multipart (which Starlette uses) reads it the same way; anything else is refused."""
    head, semicolon, rest = value.partition(";")
    params: dict[str, str] = {}
    rest = semicolon + rest
    at = 0
    while at < len(rest):
        found = _PARAM.match(rest, at)
        if not found:
            if rest[at:].strip() == "":
                break
            raise Refusal(
                400,
                what,
                f"The {what} header {value!r} is not of a form the room reads the same way as "
                "the server: give `type; key=value` parameters, each once, as HTTP clients send them.",
            )
        key, raw = found[1], found[2]
        if key != key.lower() or key in params:
            raise Refusal(
                400,
                what,
                f"The {what} header {value!r} names {key!r} twice or in capitals: give each "
                "parameter once, in lower case.",
            )
        params[key] = raw[1:-1] if raw.startswith('"') else raw
        at = found.end()
    return head.strip(), params


class FormScanner:
    """Reads a form body as it streams past, as Starlette will read it or more strictly: multipart (`boundary`) or
    urlencoded (`boundary` None). Keeps its small fields; a file part is counted and sniffed, not kept, and refused
    as soon as it passes `max_bytes`. A field sent twice, a part whose headers are not of the plain form clients send,
    or a body that ends before its last boundary is refused."""

    def __init__(
        self,
        boundary: bytes | None,
        max_bytes: int,
        on_field: Callable[[str, str], None],
    ) -> None:
        self.fields: dict[str, str] = {}
        self.files: dict[str, Upload] = {}
        self.max_bytes = max_bytes
        self.on_field = on_field
        self._urlencoded = bytearray() if boundary is None else None
        self._delimiter = b"\r\n--" + (boundary or b"")
        self._pending = b"\r\n"  # the body starts with "--boundary", the delimiter without its line break
        self._state = "start"
        self._name: str | None = None
        self._file: Upload | None = None
        self._value = bytearray()
        self._size = 0
        self._parts = 0
        self._form_bytes = 0
        self.oversize = False  # a field over 1 MiB: Starlette answers it ("Part exceeded maximum size of 1024KB.")

    def feed(self, chunk: bytes) -> None:
        if self._urlencoded is not None:
            self._urlencoded += chunk
            if len(self._urlencoded) > FIELD_BYTES:
                raise Refusal(400, "body", f"A form of over {FIELD_BYTES // MIB} MiB is no generation request.")
            return
        data = self._pending + chunk
        self._pending = b""
        while data:
            if self._state == "end":
                return  # the epilogue after the last boundary: nobody reads it
            if self._state == "after":  # just past a delimiter: a line break (a part follows) or "--" (the end)
                if len(data) < 2:
                    self._pending = data
                    return
                if data[:2] == b"--":
                    self._state = "end"
                    return
                if data[:2] != b"\r\n":
                    raise Refusal(400, "body", "The form has a boundary followed by neither a line break nor `--`.")
                data, self._state = data[2:], "headers"
            elif self._state in ("start", "data"):
                at = data.find(self._delimiter)
                if self._state == "start":
                    if len(data) < len(self._delimiter):
                        if not self._delimiter.startswith(data):
                            raise Refusal(400, "body", "The form does not start with its boundary.")
                        self._pending = data
                        return
                    if at != 0:
                        raise Refusal(400, "body", "The form does not start with its boundary.")
                if at < 0:  # keep what could be the start of a delimiter for the next chunk
                    keep = len(self._delimiter) - 1
                    self._take(data[: max(0, len(data) - keep)])
                    self._pending = data[max(0, len(data) - keep) :]
                    return
                self._take(data[:at])
                if self._state == "data":
                    self._end_part()
                data, self._state = data[at + len(self._delimiter) :], "after"
            else:  # headers: up to the blank line
                at = data.find(b"\r\n\r\n")
                if at < 0:
                    if len(data) > HEADER_BYTES:
                        raise Refusal(400, "body", f"A form part's headers run over {HEADER_BYTES // 1024} KiB.")
                    self._pending = data
                    return
                self._start_part(data[:at])
                data, self._state = data[at + 4 :], "data"

    def finish(self) -> None:
        if self._urlencoded is None:
            if self._state != "end":
                raise Refusal(400, "body", "The form ends before its closing boundary.")
            return
        body = bytes(self._urlencoded)
        if not re.fullmatch(rb"[!-~]*", body):
            raise Refusal(400, "body", "An urlencoded form has characters that should be percent-encoded.")
        for pair in filter(None, body.split(b"&")):
            name, equals, value = pair.partition(b"=")
            if not equals:
                raise Refusal(400, "body", f"The form's part {pair[:40]!r} is not NAME=VALUE.")
            try:
                key = unquote_plus(name.decode("ascii"), errors="strict")
                text = unquote_plus(value.decode("ascii"), errors="strict")
            except UnicodeDecodeError:
                raise Refusal(400, "body", "A form field is not UTF-8 text.") from None
            self._field(key, text)

    def _start_part(self, raw: bytes) -> None:
        self._parts += 1
        if self._parts > MAX_PARTS:
            raise Refusal(400, "body", f"The form has over {MAX_PARTS} parts: no generation request has.")
        disposition: str | None = None
        content_type = ""
        for line in raw.split(b"\r\n"):
            found = re.fullmatch(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+): *([^\r\n]*)", line)
            if not found:
                raise Refusal(400, "body", f"A form part's header {line[:60]!r} is not `Name: value`.")
            name, value = found[1].lower(), found[2].decode("latin-1")
            if name == b"content-disposition":
                if disposition is not None:
                    raise Refusal(400, "body", "A form part has two Content-Disposition headers.")
                disposition = value
            elif name == b"content-type":
                content_type = value
        if disposition is None:
            raise Refusal(400, "body", "A form part has no Content-Disposition header.")
        kind, options = header_options(disposition, "Content-Disposition")
        if kind != "form-data" or set(options) - {"name", "filename"} or "name" not in options:
            raise Refusal(
                400,
                "body",
                f"A form part's Content-Disposition {disposition!r} is not `form-data; name=...` (and `filename=...` "
                "for a file), as HTTP clients send it.",
            )
        name = options["name"]
        if not re.fullmatch(r"[A-Za-z0-9_.\[\]-]{1,100}", name):
            raise Refusal(400, "body", f"A form field's name {name[:60]!r} is not a field name.")
        self._name = name
        self._file = Upload(name, options["filename"], content_type) if "filename" in options else None
        if self._file is not None:
            if name in self.files or name in self.fields:
                raise _twice(name)
            if len(self.files) >= MAX_FILES:
                raise Refusal(
                    400, name, f"The form has over {MAX_FILES} files: Cosmos 3 takes a reference and a control at most."
                )
            self.files[name] = self._file
        self._value, self._size = bytearray(), 0

    def _take(self, data: bytes) -> None:
        if self._state != "data" or not data:
            return
        self._size += len(data)
        if self._file is not None:
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
            self._file.take(data)
        elif self._size <= FIELD_BYTES:  # a longer field is no setting; Starlette refuses it itself (400)
            self._value += data

    def _end_part(self) -> None:
        if self._name is None or self._file is not None:
            return
        if self._size > FIELD_BYTES:
            self.oversize = True
            return
        try:
            text = self._value.decode("utf-8")
        except UnicodeDecodeError:
            raise Refusal(400, self._name, f"The form field {self._name} is not UTF-8 text.") from None
        self._field(self._name, text)

    def _field(self, name: str, value: str) -> None:
        if name in self.fields or name in self.files:
            raise _twice(name)
        self._form_bytes += len(value)
        if self._form_bytes > FORM_BYTES:
            raise Refusal(400, "body", f"The form's fields add up to over {FORM_BYTES // MIB} MiB.")
        self.fields[name] = value
        self.on_field(name, value)


def _twice(name: str) -> Refusal:
    return Refusal(
        400,
        name,
        f"{name} is sent twice: give each field once (the server would read only the last; the room does not guess).",
    )


class _JSONScanner:
    """A JSON body (the images route), kept whole up to 1 MiB to read its fields at the end."""

    def __init__(self) -> None:
        self.body = bytearray()
        self.fields: dict[str, Any] = {}
        self.files: dict[str, Upload] = {}
        self.readable = True
        self.oversize = False

    def feed(self, chunk: bytes) -> None:
        self.body += chunk
        if len(self.body) > FIELD_BYTES:
            raise Refusal(400, "body", f"A JSON body of over {FIELD_BYTES // MIB} MiB is no generation request.")

    def finish(self) -> None:
        if not self.body:
            return
        try:
            text = bytes(self.body).decode(json.detect_encoding(bytes(self.body)), "surrogatepass")
        except (UnicodeDecodeError, LookupError):
            self.readable = False
            return  # FastAPI answers it itself (400, "There was an error parsing the body")
        parsed = read_json("body", text)
        if isinstance(parsed, dict):
            self.fields = parsed
        else:
            self.readable = False  # malformed JSON or not an object: vLLM-Omni's own 400


# --- The checks ---------------------------------------------------------------------------------------------------


def check_field(limits: Limits, name: str, value: str) -> None:
    """Refuse a video form field that is wrong on its own, as soon as it has streamed in (before any file after it):
    a number out of range or not finite, a size, frames or steps over a limit, a path on the server."""
    if name in VIDEO_NUMBERS:
        number = read_number(name, value, VIDEO_NUMBERS[name])
        if name == "num_frames" and isinstance(number, int) and number > limits.max_frames:
            raise _over(name, value, "max_frames", limits.max_frames, f"{number} frames", "num_frames")
        if name == "num_inference_steps" and isinstance(number, int) and number > limits.max_steps:
            raise _over(name, value, "max_steps", limits.max_steps, f"{number} steps", "num_inference_steps")
        if name in ("width", "height") and isinstance(number, int) and number > limits.max_pixels:
            raise _over(name, value, "max_pixels", limits.max_pixels, f"at least {number:,} pixels a frame", "size")
        if name == "sound_duration" and isinstance(number, float | int) and number > limits.max_sound_s:
            raise _over(name, value, "max_sound_s", limits.max_sound_s, f"{number:g} s of sound", "sound")
    elif name == "size" and (size := parse_size("size", value)) is not None and size[0] * size[1] > limits.max_pixels:
        raise _over("size", value, "max_pixels", limits.max_pixels, f"{size[0] * size[1]:,} pixels a frame", "size")
    elif name in ("prompt", "negative_prompt", "aspect_ratio"):
        check_text(name, value)
    elif name == "frame_interpolation_model_path" and value:
        raise _wrong(
            name,
            value,
            "names a path on the server: a shared server takes no paths from a participant "
            "(Cosmos 3 does not interpolate frames).",
        )
    elif name == "input_references":
        raise _wrong(name, value, "is not taken by this server: Cosmos 3 takes one reference, as input_reference.")


@dataclass
class _Work:
    """What a request asks the engine for, as the room reads it."""

    pixels: int = 0
    size_text: str = ""
    frames: int = 1
    frames_param: str = "num_frames"
    frames_value: Any = None
    work_frames: int = 1  # frames the engine denoises: a transfer job's chunks, each padded to its length
    fps: float = DEFAULT_FPS
    sound: bool = False
    mode: str = "video"


def check_request(
    limits: Limits,
    route: str,
    fields: dict[str, Any],
    files: dict[str, Upload] | None = None,
    *,
    capabilities: dict[str, Any] | None = None,
    adapters: str | None = None,
) -> None:
    """Refuse (`Refusal`) a generation request whose fields, with vLLM-Omni's defaults for what is left out, are over
    `limits`, out of range, or not what Cosmos 3 takes from a participant. What vLLM-Omni refuses itself with a 400
    naming the field is left to it."""
    files = files or {}
    if route == IMAGE_ROUTE:
        return _check_image(limits, fields, adapters)
    fields = {
        k: v if isinstance(v, str) else json.dumps(v) if isinstance(v, dict | list) else str(v)
        for k, v in fields.items()
        if v is not None
    }
    for name, value in fields.items():
        check_field(limits, name, value)
    for name, upload in files.items():
        if name == "input_references":
            raise _wrong(
                name,
                f"<file {upload.filename}>",
                "is not taken by this server: Cosmos 3 takes one reference, as input_reference.",
            )
        if name in VIDEO_TEXTS or name in VIDEO_JSON or name in VIDEO_NUMBERS or name in VIDEO_BOOLS:
            raise _wrong(name, f"<file {upload.filename}>", "is a file where a text field goes.")
    for name in VIDEO_FILES:
        if name in fields and fields[name] != "":
            raise _wrong(name, fields[name], "is text where a file upload goes: send the file as a form file part.")
    numbers = {name: read_number(name, fields.get(name), spec) for name, spec in VIDEO_NUMBERS.items()}
    parsed = {name: read_json(name, fields[name]) for name in VIDEO_JSON if fields.get(name, "") != ""}
    extra = parsed.get("extra_params")
    extra = extra if isinstance(extra, dict) else {}  # another type is vLLM-Omni's to refuse ("expected dict")
    for name in ("image_reference", "video_reference", "audio_reference"):
        reference = _check_reference(name, parsed.get(name))
        if reference is not None:
            _check_uploads(limits, {name: reference}, {}, _Work())
    if "lora" in parsed:
        _check_lora(parsed["lora"], adapters)

    work = _Work()
    _check_extra_types(extra, route)
    mode = "action" if "action_mode" in extra else "video"
    hints = [k for k in TRANSFER_HINTS if extra.get(k) is not None]
    control_type = (fields.get("control_type") or "").strip().lower()
    if control_usable(fields, files):
        hints = sorted(set(hints) | {control_type}, key=TRANSFER_HINTS.index)
    # A control vLLM-Omni refuses itself (a type without its upload, a text file...): its 400 comes first.
    refused_control = ("control_reference" in files or fields.get("control_type", "") != "") and not control_usable(
        fields, files
    )
    if hints:
        mode = "transfer" if mode == "video" else "both"
    work.mode = mode
    if mode == "both":
        raise _wrong(
            "extra_params",
            extra.get("action_mode"),
            "asks for an action job with transfer controls: Cosmos 3 does one or the other.",
        )

    # The picture.
    size = fields.get("size")
    width, height = numbers["width"], numbers["height"]
    tier = extra.get("resolution", extra.get("image_size"))
    explicit: tuple[int, int] | None = None
    if size is not None:
        if width is not None or height is not None:
            raise _wrong("size", size, "comes with width or height: give size, or width and height, not both.")
        explicit = parse_size("size", size)
        work.size_text = size
    elif width is not None or height is not None:
        if width is None or height is None:
            which = "width" if width is not None else "height"
            raise _wrong(
                which,
                fields[which],
                "comes without the other side: give both width and height (the "
                "server would make 1280x720 instead), or size.",
            )
        if isinstance(width, int) and isinstance(height, int) and width >= 1 and height >= 1:
            check_sides("width", f"{fields['width']} (with height={fields['height']})", width, height)
            explicit = (width, height)
        work.size_text = f"width={fields['width']}, height={fields['height']}"
    candidates: list[tuple[int, str]] = []
    if explicit is not None and mode != "transfer":
        candidates.append((explicit[0] * explicit[1], work.size_text))
    canvas_tier = int(tier) if tier is not None else TRANSFER_TIER if mode == "transfer" else None
    if canvas_tier is None and mode == "action" and explicit is None and size is None and width is None:
        canvas_tier = ACTION_TIER
    if canvas_tier is not None:
        w, h = TIER_CANVASES[canvas_tier]
        candidates.append((w * h, f"resolution={canvas_tier} (its largest picture, {w}x{h})"))
    if not candidates and size is None and width is None:
        candidates.append((DEFAULT_VIDEO_SIZE[0] * DEFAULT_VIDEO_SIZE[1], "1280x720 (the server's default)"))
    if candidates:
        work.pixels, work.size_text = max(candidates)
        if work.pixels > limits.max_pixels:
            param, shown = "size", work.size_text
            if shown.startswith("width="):
                param, shown = "width", f"{fields['width']} (with height={fields['height']})"
            raise _over(param, shown, "max_pixels", limits.max_pixels, f"{work.pixels:,} pixels a frame", "size")

    # The frames and their rate.
    fps = numbers["fps"]
    work.fps = float(fps) if isinstance(fps, int | float) else DEFAULT_FPS
    num_frames = numbers["num_frames"]
    if isinstance(num_frames, int):
        work.frames, work.frames_param, work.frames_value = max(num_frames, 1), "num_frames", fields["num_frames"]
    elif num_frames is None and re.fullmatch(r"[1-9]\d*", fields.get("seconds", "")):  # `num_frames=""` is absent
        seconds = fields["seconds"]
        frames = int(float(seconds) * work.fps) if len(seconds) <= 12 else 10**12
        work.frames, work.frames_param, work.frames_value = max(frames, 1), "seconds", seconds
    if work.frames > limits.max_frames:
        raise _over(
            work.frames_param, work.frames_value, "max_frames", limits.max_frames, f"{work.frames} frames", "num_frames"
        )
    work.work_frames = work.frames
    if mode == "transfer":
        _check_transfer(limits, fields, files, extra, hints, numbers, work)
    elif mode == "action":
        _check_action(fields, files, parsed, extra, numbers, capabilities)
    _check_video_extras(extra, work, refused_control)
    if work.pixels * work.work_frames > limits.max_pixel_frames:
        chunks = f" in {work.work_frames} frames of transfer chunks" if work.work_frames != work.frames else ""
        raise _over(
            work.frames_param,
            work.frames_value if work.frames_value is not None else work.frames,
            "max_pixel_frames",
            limits.max_pixel_frames,
            f"{work.frames} frames of {work.size_text}{chunks}, "
            f"{work.pixels * work.work_frames / 1e6:.1f} million pixel-frames",
            "num_frames",
        )
    steps = numbers["num_inference_steps"]
    steps = steps if isinstance(steps, int) else DEFAULT_ACTION_STEPS if mode == "action" else DEFAULT_VIDEO_STEPS
    if steps > limits.max_steps:
        raise _over(
            "num_inference_steps", steps, "max_steps", limits.max_steps, f"{steps} steps", "num_inference_steps"
        )
    shift, shift_param = DEFAULT_FLOW_SHIFT[mode], "flow_shift"  # extra_params' flow shift wins over the form's
    for name, value in (("flow_shift", numbers["flow_shift"]), ("extra_params.flow_shift", extra.get("flow_shift"))):
        if isinstance(value, int | float) and not isinstance(value, bool):
            shift, shift_param = float(value), name
    check_schedule(shift_param, steps, shift)
    _check_sound(limits, fields, extra, work, capabilities)
    _check_uploads(limits, files, fields, work)


def _check_image(limits: Limits, fields: dict[str, Any], adapters: str | None) -> None:
    bad = _non_finite(fields)
    if bad is not None:
        raise Refusal(
            400, bad[0].lstrip("."), f"{bad[0].lstrip('.')}={bad[1]} is not a finite number.", value=str(bad[1])
        )
    numbers = {name: read_number(name, fields.get(name), spec) for name, spec in IMAGE_NUMBERS.items()}
    for name in ("prompt", "negative_prompt", "system_prompt"):
        check_text(name, fields.get(name))
    size, size_text = DEFAULT_IMAGE_SIZE, f"{DEFAULT_IMAGE_SIZE[0]}x{DEFAULT_IMAGE_SIZE[1]} (the server's default)"
    if fields.get("size") is not None:
        size, size_text = parse_image_size(fields["size"]), str(fields["size"])
    if fields.get("generator_device") is not None:
        raise _wrong(
            "generator_device",
            fields["generator_device"],
            "is not taken by a shared server: it picks where the server draws its noise.",
        )
    if fields.get("lora") is not None:
        _check_lora(fields["lora"], adapters)
    extra = fields.get("extra_params")
    if isinstance(extra, dict):
        for key in extra:
            if key not in IMAGE_EXTRA:
                raise _unknown_key(key, IMAGE_EXTRA, "an image")
        _check_extra_types(extra, IMAGE_ROUTE)
    if size is not None:
        pixels = size[0] * size[1]
        if pixels > limits.max_pixels:
            raise _over("size", size_text, "max_pixels", limits.max_pixels, f"{pixels:,} pixels a frame", "size")
        n = numbers["n"]
        if isinstance(n, int) and 1 <= n <= 10 and pixels * n > limits.max_pixel_frames:
            raise _over(
                "n",
                fields["n"],
                "max_pixel_frames",
                limits.max_pixel_frames,
                f"{n} frames of {size_text}, {pixels * n / 1e6:.1f} million pixel-frames",
                "num_frames",
            )
    steps = numbers["num_inference_steps"]
    steps = steps if isinstance(steps, int) else DEFAULT_IMAGE_STEPS
    if steps > limits.max_steps:
        raise _over(
            "num_inference_steps", steps, "max_steps", limits.max_steps, f"{steps} steps", "num_inference_steps"
        )
    shift, shift_param = DEFAULT_FLOW_SHIFT["image"], "flow_shift"  # here the top-level flow shift wins
    extra_shift = extra.get("flow_shift") if isinstance(extra, dict) else None
    for name, value in (("extra_params.flow_shift", extra_shift), ("flow_shift", numbers["flow_shift"])):
        if isinstance(value, int | float) and not isinstance(value, bool):
            shift, shift_param = float(value), name
    check_schedule(shift_param, steps, shift)


def _check_reference(name: str, value: Any) -> Upload | None:
    """A URL the server would fetch (a request from inside the room's network) is refused: send the picture or
    clip as a file, or as a `data:` URL, which is returned as an upload to measure. Anything else that is no URL
    vLLM-Omni refuses itself."""
    found = None
    for text in _strings(value):
        if text.startswith("data:") and "," in text:
            head, _, data = text.partition(",")
            with contextlib.suppress(ValueError):
                payload = base64.b64decode(data) if head.endswith(";base64") else data.encode("latin-1")
                found = Upload(name, "", head[5:].split(";")[0])
                found.take(payload)
        if text.strip().lower().startswith(("http:", "https:", "ftp:", "//")):
            raise _wrong(
                name,
                text,
                "asks the server to fetch a URL: a shared server fetches nothing for a "
                "participant. Upload the file as input_reference, or send it as a data: URL.",
            )
    return found


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return [text for item in items for text in _strings(item)]


def _check_lora(value: Any, adapters: str | None) -> None:
    """A LoRA adapter loads weights from a path on the server: taken only from the room's adapters folder."""
    if value in (None, "", {}):
        return
    if not adapters:
        raise _wrong(
            "lora",
            value,
            "asks the server to load an adapter from a path of its disk: this server was "
            "started without an adapters folder, so it loads none.",
        )
    if not isinstance(value, dict):
        return  # vLLM-Omni: "expected dict"
    for key in value:
        if key not in ("name", "path", "scale", "int_id"):
            raise _unknown_key(key, ("name", "path", "scale", "int_id"), "a LoRA adapter", prefix="lora")
    read_number(
        "lora.scale", value.get("scale"), Number(False, *LORA_SCALE, why="an adapter's strength"), strict_json=True
    )
    read_number("lora.int_id", value.get("int_id"), Number(True, 0, 2**31 - 1), strict_json=True)
    path = value.get("path")
    if not isinstance(path, str) or not path:
        return  # vLLM-Omni: "both name and path are required"
    folder = os.path.realpath(adapters)
    target = os.path.realpath(os.path.join(folder, path))
    if os.path.commonpath([folder, target]) != folder or not os.path.exists(target):
        raise _wrong(
            "lora.path",
            path,
            f"is not an adapter of this server's adapters folder: name one of "
            f"{sorted(os.listdir(folder))[:20] if os.path.isdir(folder) else []}.",
        )
    _check_adapter_folder(target, path)


# The layers of Cosmos 3 that vLLM-Omni 0.30.0 takes a LoRA on, by their leaf names (its LinearBase layers).
LORA_MODULES = frozenset({"to_q", "to_k", "to_v", "to_out", "gate_proj", "up_proj", "down_proj"})


def _check_adapter_folder(target: str, path: str) -> None:
    """A path of the adapters folder that vLLM-Omni would fail on, as the server's error, is refused as the
    participant's: not a PEFT adapter folder, or one whose target_modules are not vLLM-Omni's layers (an adapter saved
    by diffusers names Cosmos 3's layers its own way)."""
    config_file = os.path.join(target, "adapter_config.json")
    if not os.path.isfile(config_file) or not os.path.isfile(os.path.join(target, "adapter_model.safetensors")):
        raise _wrong(
            "lora.path",
            path,
            "is not a PEFT adapter folder: it needs adapter_config.json and adapter_model.safetensors.",
        )
    try:
        with open(config_file, encoding="utf-8") as file:
            modules = json.load(file).get("target_modules")
    except (OSError, ValueError, AttributeError):
        modules = None
    names = [modules] if isinstance(modules, str) else modules if isinstance(modules, list) else None
    tensors = _safetensors_names(os.path.join(target, "adapter_model.safetensors"))
    if (
        names is None
        or not all(isinstance(n, str) and n.rsplit(".", 1)[-1] in LORA_MODULES for n in names)
        or not all(".gen_layers." in t or ".language_model." in t for t in tensors)
    ):
        raise _wrong(
            "lora.path",
            path,
            f"is an adapter whose layers are not named as vLLM-Omni names them (target_modules {modules!r}; vLLM-Omni "
            f"takes a LoRA on {', '.join(sorted(LORA_MODULES))} under gen_layers and language_model): an adapter "
            "saved by diffusers names them its own way; write it under vLLM-Omni's names "
            "(cosmos3_post_training.adapters.for_vllm_omni).",
        )


def _safetensors_names(path: str) -> list[str]:
    """The tensor names of a safetensors file, from its header (an 8-byte length, then JSON); none if unreadable."""
    try:
        with open(path, "rb") as file:
            length = int.from_bytes(file.read(8), "little")
            header = json.loads(file.read(min(length, 1 << 24)))
    except (OSError, ValueError):
        return ["(unreadable)"]
    return [name for name in header if name != "__metadata__"] if isinstance(header, dict) else ["(unreadable)"]


# extra_params: what Cosmos 3 takes from a participant, by key. Everything else is refused: vLLM-Omni passes every
# key to the pipeline unchecked, where some read paths on the server, some bypass the limits above, and a wrong type
# fails the generation as the server's error (a 500).
def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


EXTRA_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "use_system_prompt": (_is_bool, "true or false"),
    "use_duration_template": (_is_bool, "true or false"),
    "use_resolution_template": (_is_bool, "true or false"),
    "guardrails": (_is_bool, "true or false"),
    "generate_sound": (_is_bool, "true or false"),
    "sound_gen": (_is_bool, "true or false"),
    "emphasize_control_in_prompt": (_is_bool, "true or false"),
    "system_prompt": (
        lambda v: isinstance(v, str) and json_depth(v) <= MAX_JSON_DEPTH,
        "text (nesting no brackets more than 32 deep)",
    ),
    "view_point": (
        lambda v: isinstance(v, str) and len(v) <= 100,
        "a short text (NVIDIA's form; not read by vLLM-Omni 0.30.0)",
    ),
    "negative_metadata_mode": (lambda v: v in ("none", "same", "inverse"), "one of none, same, inverse"),
    "condition_video_keep": (lambda v: v in ("first", "last"), "first or last"),
    "action_mode": (lambda v: v in ACTION_MODES, f"one of {', '.join(ACTION_MODES)}"),
    "domain_name": (
        lambda v: isinstance(v, str) and v.strip().lower() in DOMAINS,
        "an embodiment vLLM-Omni 0.30.0 knows: " + ", ".join(DOMAINS),
    ),
    "resolution": (lambda v: not isinstance(v, bool) and str(v) in TIERS, f"a tier: {', '.join(TIERS)}"),
    "image_size": (lambda v: not isinstance(v, bool) and str(v) in TIERS, f"a tier: {', '.join(TIERS)}"),
}
EXTRA_NUMBERS: dict[str, Number] = {
    "flow_shift": VIDEO_NUMBERS["flow_shift"],
    "max_sequence_length": Number(True, 1, MAX_SEQUENCE_LENGTH, why="the pipeline's default; more tokens only cost"),
    "sound_duration": Number(False),  # finite; its range is the video's length (check_request)
    "audio_duration": Number(False),
    "raw_action_dim": Number(True, 1, MAX_ACTION_WIDTH, why="Cosmos 3's action width"),
    "action_chunk_size": Number(True, 1),
    "control_guidance": Number(False, *GUIDANCE, why="as guidance_scale; NVIDIA uses 1.5 to 3"),
    "num_video_frames_per_chunk": Number(True, 1),
    "num_conditional_frames": Number(True, 0),
}
VIDEO_EXTRA = (*EXTRA_TYPES, *EXTRA_NUMBERS, "condition_frame_indexes_vision", "action", *TRANSFER_HINTS)
IMAGE_EXTRA = ("use_system_prompt", "system_prompt", "use_duration_template", "use_resolution_template")
IMAGE_EXTRA += ("negative_metadata_mode", "guardrails", "flow_shift", "max_sequence_length")
SOUND_KEYS = ("generate_sound", "sound_gen", "sound_duration", "audio_duration")
ACTION_KEYS = ("action_mode", "action", "domain_name", "raw_action_dim", "action_chunk_size", "view_point")
TRANSFER_KEYS = ("control_guidance", "num_video_frames_per_chunk", "num_conditional_frames")
TRANSFER_KEYS += ("emphasize_control_in_prompt",)


def _unknown_key(key: str, allowed: tuple[str, ...], what: str, prefix: str = "extra_params") -> Refusal:
    return Refusal(
        400,
        f"{prefix}.{key}",
        f"{prefix}.{key} is not a key this server takes for {what}: vLLM-Omni passes it to the model unchecked. "
        f"It takes: {', '.join(allowed)}.",
        value=key,
    )


def _check_extra_types(extra: dict[str, Any], route: str) -> None:
    allowed = IMAGE_EXTRA if route == IMAGE_ROUTE else VIDEO_EXTRA
    for key, value in extra.items():
        param = f"extra_params.{key}"
        if key not in allowed:
            raise _unknown_key(key, allowed, "an image" if route == IMAGE_ROUTE else "a video")
        if value is None:
            continue
        if key in EXTRA_TYPES:
            test, what = EXTRA_TYPES[key]
            if not test(value):
                raise _wrong(param, value, f"is not {what}.")
        elif key in EXTRA_NUMBERS:
            read_number(param, value, EXTRA_NUMBERS[key], strict_json=True)
        elif key == "condition_frame_indexes_vision":
            if (
                not isinstance(value, list)
                or not value
                or not all(isinstance(i, int) and not isinstance(i, bool) for i in value)
            ):
                raise _wrong(param, value, "is not a list of whole numbers (the latent frames to keep), e.g. [0, 1].")
        elif key == "action":
            _check_action_rows(value)
        elif key in TRANSFER_HINTS:
            _check_hint(key, value)


def _check_action_rows(value: Any) -> None:
    param = "extra_params.action"
    if not isinstance(value, list) or not value or not all(isinstance(row, list) and row for row in value):
        raise _wrong(param, value, "is not a list of rows of numbers, one row an action.")
    width = len(value[0])
    for row in value:
        if len(row) != width:
            raise _wrong(
                param,
                f"<a row of {len(row)} numbers>",
                f"differs from the first row's {width}: give every row the same width.",
            )
        if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in row):
            raise _wrong(param, row, "has something other than numbers in it.")
    if width > MAX_ACTION_WIDTH:
        raise _out_of_range(f"{param} width", width, 1, MAX_ACTION_WIDTH, "Cosmos 3's action width")


def _check_hint(key: str, value: Any) -> None:
    param = f"extra_params.{key}"
    if value is True:
        return
    if not isinstance(value, dict):
        raise _wrong(
            param,
            value,
            "is not {} or true: a control is uploaded as control_reference, or, for edge and "
            "blur, derived by the server from input_reference (a path on the server is not taken).",
        )
    fields = {"control_weight"} | ({"preset_edge_threshold"} if key == "edge" else set())
    fields |= {"preset_blur_strength"} if key == "blur" else set()
    for name, item in value.items():
        if name in ("control_path", "control"):
            raise _wrong(
                f"{param}.{name}",
                item,
                "names a file on the server, or frames inline: a shared server "
                "takes a control only as the control_reference upload.",
            )
        if name not in fields:
            raise _unknown_key(name, tuple(sorted(fields)), f"the {key} hint", prefix=param)
        if name == "control_weight":
            read_number(
                f"{param}.control_weight", item, Number(False, *CONTROL_WEIGHT, why="NVIDIA uses 1"), strict_json=True
            )
        elif item not in EDGE_PRESETS:
            raise _wrong(f"{param}.{name}", item, f"is not one of {', '.join(EDGE_PRESETS)}.")


def _check_video_extras(extra: dict[str, Any], work: _Work, half_a_control: bool) -> None:
    for keys, mode, job in (
        (ACTION_KEYS, "action", "an action job (action_mode)"),
        (TRANSFER_KEYS, "transfer", "a transfer job (a control)"),
    ):
        for key in keys:
            if mode == "transfer" and half_a_control:
                continue  # a control_type without its upload, or the other way round: vLLM-Omni's own 400
            if key in extra and work.mode != mode:
                raise _wrong(f"extra_params.{key}", extra[key], f"belongs to {job}: this request is not one.")
    indexes = extra.get("condition_frame_indexes_vision")
    if isinstance(indexes, list):
        last = (work.frames - 1) // 4
        for index in indexes:
            if not 0 <= index <= last:
                raise _out_of_range(
                    "extra_params.condition_frame_indexes_vision",
                    index,
                    0,
                    last,
                    f"the latent frames of {work.frames} frames; more would decode frames the video does not have",
                )


def _check_action(
    fields: dict[str, str],
    files: dict[str, Upload],
    parsed: dict[str, Any],
    extra: dict[str, Any],
    numbers: dict[str, Any],
    capabilities: dict[str, Any] | None,
) -> None:
    mode = extra["action_mode"]
    if capabilities and capabilities.get("action") is False:
        raise _wrong(
            "extra_params.action_mode",
            mode,
            "asks for an action job, and this server's checkpoint has no action modules.",
        )
    if extra.get("domain_name") is None:
        raise _wrong("extra_params.domain_name", None, "is missing: an action job names its embodiment.")
    frames = numbers["num_frames"]
    if not isinstance(frames, int):
        raise _wrong(
            "num_frames",
            fields.get("num_frames"),
            "is missing: an action job sends num_frames, the chunk's actions plus one.",
        )
    chunk = extra.get("action_chunk_size")
    chunk = chunk if isinstance(chunk, int) else frames - 1
    if chunk < 1 or frames not in (chunk, chunk + 1):
        raise _wrong(
            "num_frames",
            frames,
            f"does not fit action_chunk_size={chunk}: an action job makes "
            "action_chunk_size + 1 frames (or action_chunk_size).",
        )
    actions = extra.get("action")
    if mode == "forward_dynamics" and actions is None:
        raise _wrong("extra_params.action", None, "is missing: forward dynamics follows the actions it is given.")
    if isinstance(actions, list) and len(actions) > MAX_ACTION_ROWS:
        raise _wrong(
            "extra_params.action", f"<{len(actions)} rows>", f"has more rows than any chunk ({MAX_ACTION_ROWS})."
        )
    width = extra.get("raw_action_dim")
    if mode != "forward_dynamics" and width is None:
        raise _wrong("extra_params.raw_action_dim", None, f"is missing: {mode} needs the embodiment's action width.")
    reference = files.get("input_reference")
    if reference is None and parsed.get("image_reference") is None and parsed.get("video_reference") is None:
        raise _wrong(
            "input_reference",
            None,
            "is missing: an action job starts from an image (or, for inverse dynamics, a clip).",
        )
    if mode == "inverse_dynamics" and reference is not None and reference.kind() == "image":
        raise _wrong(
            "input_reference",
            f"<image {reference.filename}>",
            "is a picture: inverse dynamics reads the actions from a clip.",
        )


def _check_transfer(
    limits: Limits,
    fields: dict[str, str],
    files: dict[str, Upload],
    extra: dict[str, Any],
    hints: list[str],
    numbers: dict[str, Any],
    work: _Work,
) -> None:
    if len(hints) > MAX_HINTS:
        raise _wrong(
            "extra_params",
            "+".join(hints),
            f"asks for {len(hints)} controls: this server takes at most "
            f"{MAX_HINTS} (each adds a transformer pass at every step).",
        )
    for hint in hints:
        if (
            hint in extra
            and hint not in DERIVED_HINTS
            and not (hint == fields.get("control_type", "").strip().lower() and "control_reference" in files)
        ):
            raise _wrong(
                f"extra_params.{hint}",
                extra[hint],
                f"asks the server to derive a {hint} control, which "
                "vLLM-Omni 0.30.0 derives only for edge and blur: upload it as control_reference with "
                f"control_type={hint}.",
            )
    derived = [h for h in hints if h in extra and h in DERIVED_HINTS and not (h == fields.get("control_type"))]
    if derived and "input_reference" not in files:
        raise _wrong(
            f"extra_params.{derived[0]}",
            extra[derived[0]],
            "derives a control from the source clip: upload it as input_reference.",
        )
    if not isinstance(numbers["num_frames"], int):
        raise _wrong(
            "num_frames",
            fields.get("num_frames"),
            "is missing: a transfer job sends num_frames (without it the server takes every frame of the control).",
        )
    chunk = extra.get("num_video_frames_per_chunk")
    if not isinstance(chunk, int):
        chunk = TRANSFER_WSM_CHUNK if hints == ["wsm"] else TRANSFER_CHUNK
    elif chunk > math.ceil((limits.max_frames - 1) / 4) * 4 + 1:  # the pipeline pads 100 frames to 101 anyway
        raise _over(
            "extra_params.num_video_frames_per_chunk",
            chunk,
            "max_frames",
            limits.max_frames,
            f"chunks of {chunk} frames",
            "num_frames",
        )
    chunk = 1 if work.frames == 1 else math.ceil((chunk - 1) / 4) * 4 + 1
    overlap = extra.get("num_conditional_frames")
    overlap = overlap if isinstance(overlap, int) else TRANSFER_CONDITIONAL
    if overlap >= chunk and work.frames > chunk:
        raise _out_of_range(
            "extra_params.num_conditional_frames",
            overlap,
            0,
            chunk - 1,
            "fewer than a chunk's frames, or the chunks never advance",
        )
    chunks = 1 if work.frames <= chunk else 1 + math.ceil((work.frames - chunk) / (chunk - overlap))
    work.work_frames = chunks * chunk


def _check_sound(
    limits: Limits,
    fields: dict[str, str],
    extra: dict[str, Any],
    work: _Work,
    capabilities: dict[str, Any] | None,
) -> None:
    """The sound is no longer than its video (frames / fps), nor than `max_sound_s`; it comes only with a video of
    its own (not an action or transfer job) on a checkpoint that makes sound."""
    on = read_bool(fields.get("generate_sound")) is True or any(
        extra.get(k) is True for k in ("generate_sound", "sound_gen")
    )
    length = work.frames / work.fps
    asked = [
        ("sound_duration", fields.get("sound_duration")),
        ("extra_params.sound_duration", extra.get("sound_duration")),
        ("extra_params.audio_duration", extra.get("audio_duration")),
    ]
    for param, raw in asked:
        value = read_number(param, raw, Number(False), strict_json=param != "sound_duration")
        if not isinstance(value, int | float):
            continue
        if value <= 0 and param != "sound_duration":  # the form's own `gt=0` refuses it there
            raise _out_of_range(param, value, 0, min(length, limits.max_sound_s), "seconds of sound", low_open=True)
        if value > limits.max_sound_s:
            raise _over(param, raw, "max_sound_s", limits.max_sound_s, f"{value:g} s of sound", "sound")
        if value > length * (1 + 1e-9):
            raise Refusal(
                400,
                param,
                f"{param}={raw} asks for {value:g} s of sound with a video of {work.frames} frames at {work.fps:g} fps "
                f"({length:.3f} s): the sound cannot be longer than its video. Give at most {length:.3f}, or more "
                "frames.",
                allowed=(0, round(length, 6)),
                value=value,
            )
    if not on:
        return
    if work.mode != "video":
        raise _wrong(
            "generate_sound",
            True,
            f"comes with a {work.mode} job: Cosmos 3 makes sound only with a video "
            "of its own (text, image or video to video).",
        )
    if capabilities and capabilities.get("sound") is False:
        raise _wrong("generate_sound", True, "asks for sound, and this server's checkpoint has no sound modules.")
    if not any(v is not None and v != "" for _, v in asked) and length > limits.max_sound_s:
        raise _over(
            work.frames_param,
            work.frames_value,
            "max_sound_s",
            limits.max_sound_s,
            f"{length:g} s of sound ({work.frames} frames at {work.fps:g} fps)",
            "sound",
        )


CONTROL_SUFFIXES = (".bmp", ".gif", ".jpg", ".jpeg", ".png", ".tif", ".tiff", ".webp", ".mkv", ".mov", ".mp4", ".webm")


def control_usable(fields: dict[str, str], files: dict[str, Upload]) -> bool:
    """Whether vLLM-Omni takes the control upload as it came; where it does not (no type, an unknown type, an empty
    file, a sound, a suffix that is no picture or video, a type without an upload), it answers its own 400 first."""
    control = files.get("control_reference")
    control_type = (fields.get("control_type") or "").strip().lower()
    if control is None:
        return False
    suffix = os.path.splitext(control.filename)[1].lower()
    return (
        control.size > 0
        and control_type in TRANSFER_HINTS
        and not control.content_type.lower().startswith("audio/")
        and (not suffix or suffix in CONTROL_SUFFIXES)
    )


def _check_uploads(limits: Limits, files: dict[str, Upload], fields: dict[str, str], work: _Work) -> None:
    for name, upload in files.items():
        picture = upload.picture()
        if picture and picture[0] * picture[1] > MAX_REFERENCE_PIXELS:
            raise Refusal(
                400,
                name,
                f"{name} is a picture of {picture[0]}x{picture[1]} ({picture[0] * picture[1]:,} pixels): this server "
                f"decodes at most {MAX_REFERENCE_PIXELS:,} ({int(math.sqrt(MAX_REFERENCE_PIXELS))} squared). Send it "
                "smaller; the server resizes it to the video's size anyway.",
                allowed=(1, MAX_REFERENCE_PIXELS),
                value=picture[0] * picture[1],
            )
        if name == "input_reference" and upload.kind() == "other-video":
            raise _wrong(
                name,
                f"<file {upload.filename}>",
                "is a video in a container this server does not measure (the server would decode it at its own "
                "size): send it as an MP4 or MOV.",
            )
        frames = upload.frames()
        if picture and frames:
            decoded = picture[0] * picture[1] * min(frames, max(work.frames, 1))
            if decoded > REFERENCE_DECODE * limits.max_pixel_frames:
                raise _over(
                    name,
                    f"<a video of {frames} frames of {picture[0]}x{picture[1]}>",
                    "max_pixel_frames",
                    limits.max_pixel_frames,
                    f"decoding {decoded:,} pixel-frames (the server decodes the frames it uses at "
                    f"the clip's own size; {REFERENCE_DECODE} times the limit is taken)",
                    "upload",
                )
    control = files.get("control_reference")
    if control is None or not control_usable(fields, files):
        return  # vLLM-Omni refuses it itself
    kind = control.kind()
    if kind == "image":
        return
    frames = control.frames() if kind == "video" else None
    if frames is None:
        raise _wrong(
            "control_reference",
            f"<file {control.filename}>",
            "is a video whose frames this server cannot "
            "count (the server would decode up to 5,000 of them): send it as an MP4 or MOV.",
        )
    if frames > limits.max_frames:
        raise _over(
            "control_reference",
            f"<a video of {frames} frames>",
            "max_frames",
            limits.max_frames,
            f"decoding {frames} frames",
            "num_frames",
        )


# --- The middleware -----------------------------------------------------------------------------------------------


@dataclass
class Entry:
    """A generation the server accepted and has not finished: who sent it, when, its job id (async), and when it
    came to the head of the queue (when it began to run, as near as the middleware can tell)."""

    participant: str
    arrived: float
    job: str | None = None
    started: float | None = None


class RoomLimits:
    """The ASGI middleware (`--middleware local_server.room_limits.RoomLimits`)."""

    def __init__(
        self, app: App, limits: Limits | None = None, keys: list[str] | None = None, adapters: str | None = None
    ) -> None:
        self.app = app
        self.limits = limits if limits is not None else Limits.from_env(os.environ.get(ENV))
        if keys is None:
            listed = os.environ.get(KEYS_ENV)
            keys = json.loads(listed) if listed else [k for k in [os.environ.get("VLLM_API_KEY")] if k]
        self._keys = {hashlib.sha256(k.encode()).digest() for k in keys}
        self.adapters = adapters if adapters is not None else os.environ.get(ADAPTERS_ENV) or None
        self._queue: dict[int, Entry] = {}  # in arrival order
        self._tickets = 0
        self._listed_at = 0.0
        self._timed_out: dict[str, bytes] = {}  # jobs that ran past max_run_s: the answer to every poll
        self._deleted: set[str] = set()  # of those, the ones the server has ended and the room has deleted
        self._capabilities: dict[str, Any] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.limits is None or scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        path = scope["path"].removeprefix(scope.get("root_path", ""))
        if scope["type"] == "websocket":  # vLLM-Omni's streaming routes: none of the room's, none measured
            await receive()
            return await send({"type": "websocket.close", "code": 1008, "reason": "not open on a room server"})
        method = scope["method"]
        if method not in ("GET", "HEAD", "OPTIONS") and not (
            (method == "POST" and path in (*VIDEO_ROUTES, IMAGE_ROUTE)) or (method == "DELETE" and JOB.match(path))
        ):
            return await _answer(send, _closed(method, path))
        if not self._keyed(scope):
            return await self.app(scope, receive, send)  # vLLM's own authentication answers an unkeyed request
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

    def _scanner(self, scope: Scope, route: str) -> FormScanner | _JSONScanner | None:
        """How the body is read, chosen as Starlette and FastAPI choose (None: vLLM-Omni refuses it itself)."""
        assert self.limits is not None
        limits = self.limits
        for name in (b"content-type", b"content-encoding"):
            if sum(1 for k, _ in scope.get("headers", []) if k.lower() == name) > 1:
                raise Refusal(400, name.decode(), f"The request has two {name.decode()} headers.")
        encoding = _header(scope, b"content-encoding").strip().lower()
        if encoding not in ("", "identity"):
            raise Refusal(400, "content-encoding", f"The body is {encoding}-encoded: send it as it is.")
        content_type = _header(scope, b"content-type")
        if route == IMAGE_ROUTE:
            # vLLM refuses any other media type with its own 400 (`validate_json_request`), and reads no other.
            return _JSONScanner() if content_type.lower().split(";", 1)[0] == "application/json" else None
        media = content_type.split(";", 1)[0].strip()
        if media.lower() not in ("multipart/form-data", "application/x-www-form-urlencoded"):
            return None  # Starlette reads no form from it: vLLM-Omni answers that the prompt is missing
        if media != media.lower():
            raise Refusal(400, "content-type", f"The Content-Type {media!r} is in capitals: send it in lower case.")
        _, options = header_options(content_type, "Content-Type")
        charset = options.pop("charset", "utf-8").lower()
        if charset not in ("utf-8", "utf8"):
            raise Refusal(400, "content-type", f"The form's charset is {charset}: send it as UTF-8.")
        boundary = options.pop("boundary", None)
        if options or (media.lower() == "multipart/form-data") != (boundary is not None):
            raise Refusal(
                400,
                "content-type",
                f"The Content-Type {content_type!r} is not a form the room reads the "
                "same way as the server: `multipart/form-data; boundary=...` or urlencoded.",
            )
        if boundary is not None and not _BOUNDARY.fullmatch(boundary):
            raise Refusal(
                400, "content-type", f"The form's boundary {boundary!r} is not of the characters HTTP clients use."
            )
        return FormScanner(
            boundary.encode("latin-1") if boundary is not None else None,
            limits.max_upload_mib * MIB,
            lambda name, value: check_field(limits, name, value) if route != IMAGE_ROUTE else None,
        )

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
        try:
            scanner = self._scanner(scope, route)
        except Refusal as refusal:
            return await _answer(send, refusal)
        self._tickets += 1
        ticket = self._tickets
        self._queue[ticket] = Entry(who, time.monotonic())
        self._advance()
        refused: list[Refusal] = []  # what was over a limit; `ours`: where the answer was this middleware's
        ours: list[Refusal] = []
        status: list[int] = []
        body = bytearray()

        async def inspected() -> Message:
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request" and scanner is not None:
                try:
                    scanner.feed(message.get("body", b""))
                    if not message.get("more_body", False):
                        scanner.finish()
                        if route != IMAGE_ROUTE and _asks_for_modules(scanner.fields):
                            await self._probe(scope)
                        if not scanner.oversize and (route != IMAGE_ROUTE or getattr(scanner, "readable", True)):
                            check_request(
                                self.limits,
                                route,
                                scanner.fields,
                                scanner.files,
                                capabilities=self._capabilities,
                                adapters=self.adapters,
                            )
                except Refusal as refusal:
                    refused.append(refusal)
                    self._drop(ticket)
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
            if route == "/v1/videos/sync":
                await self._within_time(scope, inspected, watched, send, ticket, status, ours)
            else:
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
                self._drop(ticket)

    async def _within_time(
        self,
        scope: Scope,
        inspected: Receive,
        watched: Send,
        send: Send,
        ticket: int,
        status: list[int],
        ours: list[Refusal],
    ) -> None:
        """A synchronous generation, answered with a 504 naming `max_run_s` once it has run that long (counted from
        when it came to the head of the queue: the time it waits behind others is not its own). The engine cannot be
        stopped mid-generation, so the request keeps its place in the queue until vLLM-Omni is done with it: the next
        generation's clock starts when the engine is free, not when this participant was answered."""
        assert self.limits is not None
        task = asyncio.ensure_future(self.app(scope, inspected, watched))
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=WATCH_S)
                if done:
                    return task.result()
                entry = self._queue.get(ticket)
                if entry is not None and entry.started is None:
                    with contextlib.suppress(Exception):  # jobs ahead that ended unpolled: this clock starts then
                        await self._refresh(scope)
                if ours or entry is None or entry.started is None or status:
                    continue
                ran = time.monotonic() - entry.started
                if ran > self.limits.max_run_s:
                    refusal = _timed_out(self.limits.max_run_s, ran)
                    ours.append(refusal)  # vLLM-Omni's answer, when it comes, goes nowhere
                    await _answer(send, refusal)
        except asyncio.CancelledError:
            task.cancel()
            raise

    def _advance(self) -> None:
        """The generation at the head of the queue is running: its clock starts."""
        head = next(iter(self._queue.values()), None)
        if head is not None and head.started is None:
            head.started = time.monotonic()

    def _drop(self, ticket: int) -> None:
        self._queue.pop(ticket, None)
        self._advance()

    async def _probe(self, scope: Scope) -> None:
        """Once: whether the served checkpoint makes sound and actions (its transformer's configuration), so that a
        request for what it cannot make is a 400, not the generation's failure."""
        if self._capabilities is not None:
            return
        self._capabilities = {}
        with contextlib.suppress(Exception):
            status, body = await _call(self.app, scope, "GET", "/v1/models", b"")
            root = json.loads(body)["data"][0]["root"] if status == 200 else None
            self._capabilities = checkpoint_capabilities(root)

    async def _job(self, scope: Scope, receive: Receive, send: Send, job: str) -> None:
        """A job's status (`GET`) gets its place in the queue while it waits or runs; a job the server reports ended,
        or one cancelled (`DELETE`), leaves the queue. A job that has run past `max_run_s` is answered with a 504
        naming the limit, at this poll and every later one. The answer (a small JSON) is held until whole to read it."""
        assert self.limits is not None
        if scope["method"] == "GET":
            await self._refresh(scope)
            if job in self._timed_out:
                if not any(e.job == job for e in self._queue.values()) and job not in self._deleted:
                    self._deleted.add(job)  # the engine is done with it: its video goes, as the participant was told
                    await _call(self.app, scope, "DELETE", f"/v1/videos/{job}", b"")
                return await _raw_answer(send, 504, self._timed_out[job])
            entry = next((e for e in self._queue.values() if e.job == job), None)
            if entry is not None and entry.started is not None:
                ran = time.monotonic() - entry.started
                if ran > self.limits.max_run_s:
                    return await self._time_out(scope, send, job, ran)
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

    async def _time_out(self, scope: Scope, send: Send, job: str, ran: float) -> None:
        """A job that ran past `max_run_s`: its record, marked failed with the room's 504, answers every later poll.
        vLLM-Omni cannot stop a running generation (its `DELETE` only forgets the job), so the job keeps its place in
        the queue until the server lists it as ended, and is deleted then: the next generation's clock starts when
        the engine is free."""
        assert self.limits is not None
        refusal = _timed_out(self.limits.max_run_s, ran)
        _, record = await _call(self.app, scope, "GET", f"/v1/videos/{job}", b"")
        try:
            answer = json.loads(record)
        except ValueError:
            answer = {"id": job, "object": "video"}
        answer = answer if isinstance(answer, dict) else {"id": job}
        answer.update(status="failed", error={"code": 504, "message": refusal.body["error"]["message"]})
        answer["room_limit"] = refusal.body["room_limit"]
        self._timed_out[job] = json.dumps(answer).encode()
        await _raw_answer(send, 504, self._timed_out[job])

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
        self._advance()


def _asks_for_modules(fields: dict[str, Any]) -> bool:
    """Whether a video request asks for sound or actions, which only some checkpoints make."""
    extra = str(fields.get("extra_params", ""))
    return "generate_sound" in fields or any(
        f'"{key}"' in extra for key in ("generate_sound", "sound_gen", "action_mode")
    )


def checkpoint_capabilities(root: str | None) -> dict[str, Any]:
    """Whether the checkpoint at `root` (a folder, or a Hugging Face id in the local cache) makes sound and actions,
    from its transformer's configuration; {} where the room cannot tell."""
    if not root:
        return {}
    candidates = [os.path.join(root, "transformer", "config.json")]
    if not os.path.isdir(root) and "/" in root:
        cache = os.environ.get("HF_HUB_CACHE") or os.path.join(
            os.environ.get("HF_HOME") or os.path.expanduser("~/.cache/huggingface"), "hub"
        )
        pattern = os.path.join(cache, f"models--{root.replace('/', '--')}", "snapshots", "*", "transformer")
        candidates = sorted(glob.glob(os.path.join(pattern, "config.json")), key=os.path.getmtime)[-1:]
    for path in candidates:
        with contextlib.suppress(OSError, ValueError):
            with open(path) as file:
                config = json.load(file)
            return {
                "sound": bool(config.get("sound_gen") or config.get("sound_dim")),
                "action": bool(config.get("action_gen")),
            }
    return {}


def _closed(method: str, path: str) -> Refusal:
    """vLLM-Omni serves more than the room's routes: chat completions that make images, image edits, sleep and wake,
    SageMaker's `/invocations`. None is measured by the room limits, so none is open on a room server."""
    return Refusal(
        404,
        "route",
        f"{method} {path} is not open on this room server: it serves generations at POST /v1/videos, /v1/videos/sync "
        "and /v1/images/generations, and a job's GET and DELETE. The person running the server can turn the room "
        "limits off (`serve_vllm_omni.sh --room-limits off`).",
    )


def _timed_out(limit: int, ran: float) -> Refusal:
    return Refusal(
        504,
        "max_run_s",
        f"This generation has run {ran:.0f} s, past this server's room limit of {limit:,} s a generation "
        "(max_run_s): the room answers it with this error and keeps no result (the server cannot stop a generation "
        "it has started, and finishes it). Ask for less (fewer frames or steps, a smaller size), or try again when "
        "the server is less busy. The person running the server sets the limits (`serve_vllm_omni.sh --room-limits`).",
        limit=("max_run_s", limit),
        value=round(ran, 1),
    )


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
    await _raw_answer(send, refusal.status, json.dumps(refusal.body).encode())


async def _raw_answer(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 429:
        headers.append((b"retry-after", b"5"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _call(app: App, scope: Scope, method: str, path: str, query: bytes) -> tuple[int, bytes]:
    """A request of the middleware's own to the server behind it, with the caller's headers (its key)."""
    headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() not in (b"content-type", b"content-length")]
    inner = {**scope, "method": method, "path": path, "raw_path": path.encode(), "query_string": query}
    inner["headers"] = headers
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
