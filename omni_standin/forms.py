"""Request parsing and validation for the generation routes (docs/vllm-omni-contract.md §2.3, §2.10, §2.11, §4).

Two stages, as on the real server: FastAPI's own parsing (`Form`/`File` parameters and the JSON body model), whose
failures become 400 validation errors naming `body.<field>`; then the request models and the checks of the
form stage (JSON fields, model name, the server's limits, conditioning uploads), whose failures are 400 before any
job exists. Every value the stand-in reads is checked for its type and for being finite (`omni_standin.values`),
so none reaches the pipeline as a 500 without a reason.
"""

from __future__ import annotations

import asyncio
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import File, Form, HTTPException, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field, field_validator

from helpers import prompts
from helpers.presets import GenerationSettings
from omni_standin import references
from omni_standin.limits import MAX_FPS, Limits
from omni_standin.values import check_prompt, extra_bool, extra_number, json_object, parse_json

VIDEO_DEFAULTS = {"width": 1280, "height": 720, "fps": 24.0, "steps": 35, "guidance_scale": 6.0, "flow_shift": 10.0}
IMAGE_DEFAULTS = {"width": 1024, "height": 1024, "steps": 50, "guidance_scale": 7.0, "flow_shift": 3.0}
DEFAULT_VIDEO_SEED = 42
IMAGE_FORMATS = {"png": "png", "jpeg": "jpeg", "jpg": "jpeg", "webp": "webp"}
DEFAULT_LIMITS = Limits()
SYSTEM_PROMPTS = ("dynamic", "en_vanilla", "en_recaption", "en_think_recaption", "en_unified", "custom")


@dataclass
class GenerationRequest:
    """What the engine needs for one pipeline call: the prompt pair, the settings and the conditioning."""

    prompt: str
    negative_prompt: str
    settings: GenerationSettings
    image: Any = None
    video: list[Any] | None = None
    safety_check: bool = True
    # Cosmos 3's text templates are off on the server unless `extra_params` turns them on.
    resolution_template: bool = False
    duration_template: bool = False
    n: int = 1
    # Seconds of sound in the MP4: `sound_duration`, else `audio_duration`, else num_frames / fps (vLLM-Omni's order).
    sound_duration_s: float | None = None
    # A video reference keeps these latent frames clean (vLLM-Omni's default: the first two), read from that end.
    condition_frame_indexes: tuple[int, ...] = (0, 1)
    condition_video_keep: str = "first"
    lora: dict[str, Any] | None = None


class VideoRequest(BaseModel):
    """The fields of `VideoGenerationRequest` that Cosmos 3 reads; building it is the form stage's check."""

    prompt: str
    model: str | None = None
    size: str | None = None
    width: int | None = Field(None, ge=1)
    height: int | None = Field(None, ge=1)
    num_frames: int | None = Field(None, ge=1)
    seconds: str | None = None
    fps: float | None = Field(None, ge=1, le=MAX_FPS, allow_inf_nan=False)
    num_inference_steps: int | None = Field(None, ge=1, le=200)
    guidance_scale: float | None = Field(None, ge=0, le=20, allow_inf_nan=False)
    flow_shift: float | None = Field(None, allow_inf_nan=False)
    negative_prompt: str | None = None
    seed: int | None = Field(None, ge=-(2**63), le=2**63 - 1)
    generate_sound: bool | None = None
    sound_duration: float | None = Field(None, gt=0, allow_inf_nan=False)
    extra_params: dict[str, Any] | None = None
    lora: dict[str, Any] | None = None
    return_stage_metrics: bool | None = None
    quality: Literal["lossless", "high"] | None = None


class ImageRequest(BaseModel):
    """`ImageGenerationRequest`: the JSON body of /v1/images/generations. Unknown keys are ignored."""

    prompt: str
    model: str | None = None
    n: int = Field(1, ge=1, le=10)
    size: str | None = None
    response_format: Literal["b64_json", "file"] = "b64_json"
    user: str | None = None
    negative_prompt: str | None = None
    num_inference_steps: int | None = Field(None, ge=1, le=200)
    guidance_scale: float | None = Field(None, ge=0, le=20, allow_inf_nan=False)
    true_cfg_scale: float | None = Field(None, ge=0, le=20, allow_inf_nan=False)
    flow_shift: float | None = Field(None, allow_inf_nan=False)
    extra_params: dict[str, Any] | None = None
    seed: int | None = Field(None, ge=-(2**63), le=2**63 - 1)
    generator_device: str | None = None
    output_format: str | None = None
    output_compression: int = Field(100, ge=0, le=100)
    lora: dict[str, Any] | None = None
    use_system_prompt: str | None = None

    @field_validator("size")
    @classmethod
    def _size_has_x(cls, value: str | None) -> str | None:
        if value is not None and "x" not in value:
            raise ValueError("size must be in the format 'WIDTHxHEIGHT'")
        return value


async def require_json(request: Request) -> None:
    """The images route takes JSON only; anything else is a 400 validation error, not a 415."""
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        raise RequestValidationError(errors=["Unsupported Media Type: Only 'application/json' is allowed"])


def check_model(requested: str | None, served: str) -> None:
    if requested is not None and requested != served:
        raise HTTPException(400, f"Model mismatch: request specifies '{requested}' but server is running '{served}'.")


def parse_size(size: str) -> tuple[int, int]:
    """(width, height) from `WIDTHxHEIGHT`, with the route's own messages."""
    parts = size.split("x")
    if len(parts) != 2:
        raise HTTPException(
            400,
            f"Invalid size format: '{size}'. Expected format: 'WIDTHxHEIGHT' (e.g., '1024x1024'). "
            "Did you mean to use 'x' as separator?",
        )
    try:
        width, height = int(parts[0]), int(parts[1])
    except ValueError:
        raise HTTPException(400, f"Invalid size format: '{size}'. Width and height must be integers.") from None
    if width <= 0 or height <= 0:
        raise HTTPException(400, f"Invalid size: {size}. Width and height must be positive integers.")
    return width, height


def _reference_url(raw: str | None, field: str, key: str) -> str | None:
    """The URL of an `image_reference`/`video_reference` field: one object, or a list of one."""
    if raw is None:
        return None
    value = parse_json(raw, field)
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, dict) and "file_id" in value:
        raise HTTPException(400, f"Invalid {field}: file_id is not supported yet.")
    if not isinstance(value, dict) or not isinstance(value.get(key), str):
        raise HTTPException(400, f'Invalid {field}: expected an object like {{"{key}": "..."}}.')
    url = value[key]
    if not url.startswith(("data:", "http://", "https://")):
        raise HTTPException(400, f"Invalid {field}.{key}: must be an http(s) URL or data URL.")
    return url


async def _url_bytes(url: str, where: str, limits: Limits, policy: references.FetchPolicy) -> bytes:
    if url.startswith("data:"):
        return await asyncio.to_thread(references.data_url_bytes, url, where)
    return await references.fetch(url, where, limits, policy)


def _sniff(data: bytes, limits: Limits, scratch: Path, frames: int | None) -> tuple[Any, list[Any] | None]:
    """(image, None) or (None, its first `frames` frames) from an upload, by content: PIL, then the video decoder."""
    image = references.decode_image(data, "input_reference", limits)
    if image is not None:
        return image, None
    return None, references.decode_video(data, "input_reference", limits, scratch, frames)


def _dimension(text: str) -> int:
    if len(text) > 18:  # int() refuses beyond 4,300 digits, and no limit is near 18
        raise HTTPException(
            400, f"Requested size has a side of {len(text)} digits, over any --max-generated-image-size."
        )
    return int(text)


def _video_size(form: VideoRequest, image: Any, video: list[Any] | None) -> tuple[int, int]:
    if form.size:
        # The field's pattern already holds digits only. vLLM-Omni checks the values later than the image route
        # does, with a bare ValueError: 400 BadRequestError on /v1/videos, 500 "Video generation failed" on sync.
        width, height = (_dimension(v) for v in form.size.split("x"))
        if width <= 0 or height <= 0:
            raise ValueError(f"Invalid size: {form.size}. Width and height must be positive integers.")
        return width, height
    if form.width and form.height:
        return form.width, form.height
    reference = image if image is not None else (video[0] if video else None)
    if reference is None:
        return VIDEO_DEFAULTS["width"], VIDEO_DEFAULTS["height"]
    # Cosmos 3 keeps the reference's aspect ratio at about 1280x720 pixels, in multiples of 16.
    ratio = reference.width / reference.height
    height = math.sqrt(VIDEO_DEFAULTS["width"] * VIDEO_DEFAULTS["height"] / ratio)
    return max(16, round(height * ratio / 16) * 16), max(16, round(height / 16) * 16)


def _condition_indexes(extra: dict[str, Any]) -> tuple[int, ...]:
    """`extra_params.condition_frame_indexes_vision`: a list of ints, an int or "0,47", sorted and without repeats."""
    raw = extra.get("condition_frame_indexes_vision", [0, 1])
    items = raw.split(",") if isinstance(raw, str) else raw if isinstance(raw, list) else [raw]
    try:
        indexes = sorted({int(str(item).strip()) for item in items})
    except ValueError:
        raise HTTPException(
            400, f"Invalid condition_frame_indexes_vision {raw!r}: give latent frame indexes such as [0, 47]."
        ) from None
    if not indexes or indexes[0] < 0:
        raise HTTPException(400, f"Invalid condition_frame_indexes_vision {raw!r}: indexes must be 0 or more.")
    return tuple(indexes)


def _round_frames(num_frames: int) -> int:
    """The pipeline rounds up to 4k+1 (192 -> 193); the VAE compresses time fourfold."""
    return num_frames if num_frames % 4 == 1 else num_frames + (5 - num_frames % 4) % 4


@dataclass
class VideoUpload:
    """A parsed video form: the validated fields plus the raw conditioning, decoded by `conditioning`."""

    form: VideoRequest
    input_reference: bytes | None
    image_reference: str | None
    video_reference: str | None

    def _fps(self) -> float:
        return self.form.fps or VIDEO_DEFAULTS["fps"]

    def _num_frames(self, limits: Limits) -> int:
        """The frames generated (4k+1), refused over `--max-num-frames` before any of them costs anything."""
        form = self.form
        if form.num_frames is not None:
            asked: float = form.num_frames
        elif form.seconds is not None:
            asked = float(form.seconds) * self._fps()  # a float: `seconds` may have thousands of digits
        else:
            asked = 1  # the sampling-params sentinel Cosmos 3 receives when num_frames is omitted
        limits.check_frames(asked)
        num_frames = _round_frames(int(asked))
        limits.check_frames(num_frames)
        return num_frames

    def _sound(self, num_frames: int, limits: Limits) -> tuple[bool, float | None]:
        """(generate sound, its length in seconds if given), from the form and its `extra_params` aliases."""
        extra = self.form.extra_params or {}
        sound = extra_bool(extra, ("generate_sound", "sound_gen"), bool(self.form.generate_sound))
        seconds = extra_number(extra, ("sound_duration", "audio_duration"), self.form.sound_duration, positive=True)
        if sound:
            limits.check_sound(num_frames / self._fps() if seconds is None else seconds)
        return sound, seconds

    def check_limits(self, limits: Limits) -> None:
        """What the request's own fields decide (frames, sound, an explicit size), before any reference is read."""
        num_frames = self._num_frames(limits)
        self._sound(num_frames, limits)
        if self.form.size or (self.form.width and self.form.height):
            limits.check_video(*_video_size(self.form, None, None), num_frames)

    def reference_frames(self, limits: Limits) -> int | None:
        """How many frames of a reference video Cosmos 3 reads from its start: those its kept latents cover (4
        pictures a latent after the first), at most the video generated; None (all) when it reads from the end."""
        extra = self.form.extra_params or {}
        if extra.get("condition_video_keep", "first") == "last":
            return None
        return min(max(_condition_indexes(extra)) * 4 + 1, self._num_frames(limits))

    async def conditioning(
        self, limits: Limits, policy: references.FetchPolicy, scratch: Path
    ) -> tuple[Any, list[Any] | None]:
        """(image, video frames) from whichever reference was sent; the checks of the contract's §4."""
        frames = self.reference_frames(limits)
        if self.input_reference is not None and (self.image_reference or self.video_reference):
            raise HTTPException(
                400,
                "Provide only one of input_reference, image_reference, or video_reference when using "
                "input_reference; image_reference and video_reference may be combined.",
            )
        if self.input_reference is not None:
            image, video = await asyncio.to_thread(_sniff, self.input_reference, limits, scratch, frames)
            if image is None and video is None:
                raise HTTPException(400, "Invalid input_reference: provided content is not a valid image or video.")
            return image, video
        image_url = _reference_url(self.image_reference, "image_reference", "image_url")
        video_url = _reference_url(self.video_reference, "video_reference", "video_url")
        image = video = None
        if image_url is not None:
            data = await _url_bytes(image_url, "image_reference.image_url", limits, policy)
            image = await asyncio.to_thread(references.decode_image, data, "image_reference", limits)
            if image is None:
                raise HTTPException(400, "Invalid image_reference: provided content is not a valid image.")
        if video_url is not None:
            data = await _url_bytes(video_url, "video_reference.video_url", limits, policy)
            video = await asyncio.to_thread(references.decode_video, data, "video_reference", limits, scratch, frames)
            if video is None:
                raise HTTPException(400, "Invalid video_reference: provided content is not a valid video.")
        return image, video

    def generation_request(
        self,
        default_flow_shift: float | None,
        limits: Limits = DEFAULT_LIMITS,
        image: Any = None,
        video: list[Any] | None = None,
    ) -> GenerationRequest:
        """Settings with the server's defaults filled in (video branch: seed 42, 24 fps, 35 steps, ...)."""
        form = self.form
        extra = form.extra_params or {}
        num_frames = self._num_frames(limits)
        width, height = _video_size(form, image, video)
        limits.check_video(width, height, num_frames)
        sound, sound_seconds = self._sound(num_frames, limits)
        flow_shift = extra_number(extra, ("flow_shift",), form.flow_shift)
        if flow_shift is None:
            flow_shift = default_flow_shift or VIDEO_DEFAULTS["flow_shift"]
        indexes = _condition_indexes(extra)
        keep = extra.get("condition_video_keep", "first")
        if video is not None and keep not in ("first", "last"):
            raise HTTPException(400, f"Invalid condition_video_keep {keep!r}: use 'first' or 'last'.")
        mode = "v2v" if video is not None else ("i2v" if image is not None else "t2v")
        if video is not None:
            # Only the frames the kept latents cover are read, from the chosen end (4 pictures per latent frame).
            wanted = min(max(indexes) * 4 + 1, _round_frames(num_frames))
            video = video[:wanted] if keep == "first" else video[-wanted:]
            if indexes == (0, (_round_frames(num_frames) - 1) // 4):
                mode = "fl2v"
        if sound:
            mode += "_sound"
        fps = self._fps()
        settings = GenerationSettings(
            mode=mode,
            width=width,
            height=height,
            num_frames=num_frames,
            fps=int(fps) if float(fps).is_integer() else fps,  # type: ignore[arg-type]
            num_inference_steps=form.num_inference_steps or VIDEO_DEFAULTS["steps"],
            guidance_scale=VIDEO_DEFAULTS["guidance_scale"] if form.guidance_scale is None else form.guidance_scale,
            flow_shift=float(flow_shift),
            seed=DEFAULT_VIDEO_SEED if form.seed is None else form.seed,
            enable_sound=sound,
            preset="server",
        )
        return GenerationRequest(
            prompt=prompts.with_settings(form.prompt, settings),
            negative_prompt=form.negative_prompt or "",
            settings=settings,
            image=image,
            video=video,
            safety_check=extra_bool(extra, ("guardrails",), True),
            resolution_template=extra_bool(extra, ("use_resolution_template",), False),
            duration_template=extra_bool(extra, ("use_duration_template",), False),
            sound_duration_s=sound_seconds,
            condition_frame_indexes=indexes,
            condition_video_keep=keep,
            lora=form.lora,
        )


async def video_form(
    prompt: Annotated[str, Form()],
    model: Annotated[str | None, Form()] = None,
    size: Annotated[str | None, Form(pattern=r"^\d+x\d+$")] = None,
    width: Annotated[int | None, Form()] = None,
    height: Annotated[int | None, Form()] = None,
    num_frames: Annotated[int | None, Form()] = None,
    seconds: Annotated[str | None, Form(pattern=r"^[1-9]\d*$")] = None,
    fps: Annotated[float | None, Form()] = None,
    num_inference_steps: Annotated[int | None, Form()] = None,
    guidance_scale: Annotated[float | None, Form()] = None,
    flow_shift: Annotated[float | None, Form()] = None,
    negative_prompt: Annotated[str | None, Form()] = None,
    seed: Annotated[int | None, Form()] = None,
    generate_sound: Annotated[bool | None, Form()] = None,
    sound_duration: Annotated[float | None, Form()] = None,
    input_reference: Annotated[UploadFile | None, File()] = None,
    image_reference: Annotated[str | None, Form()] = None,
    video_reference: Annotated[str | None, Form()] = None,
    extra_params: Annotated[str | None, Form()] = None,
    lora: Annotated[str | None, Form()] = None,
    return_stage_metrics: Annotated[bool | None, Form()] = None,
    quality: Annotated[str | None, Form()] = None,
) -> VideoUpload:
    """The form of /v1/videos and /v1/videos/sync; a pydantic error here is a 400 `BadRequestError`."""
    request = VideoRequest(
        prompt=prompt,
        model=model,
        size=size,
        width=width,
        height=height,
        num_frames=num_frames,
        seconds=seconds,
        fps=fps,
        num_inference_steps=num_inference_steps,
        guidance_scale=guidance_scale,
        flow_shift=flow_shift,
        negative_prompt=negative_prompt,
        seed=seed,
        generate_sound=generate_sound,
        sound_duration=sound_duration,
        extra_params=json_object(extra_params, "extra_params"),
        lora=json_object(lora, "lora"),
        return_stage_metrics=return_stage_metrics,
        quality=quality,
    )
    check_prompt(prompt)
    upload = await input_reference.read() if input_reference is not None else None
    return VideoUpload(request, upload, image_reference, video_reference)


def image_generation_request(body: ImageRequest, limits: Limits) -> GenerationRequest:
    """Text-to-image settings with the T2I defaults (1024x1024, 50 steps, guidance 7, shift 3, random seed)."""
    if body.use_system_prompt is not None and body.use_system_prompt not in SYSTEM_PROMPTS:
        raise HTTPException(400, f"Invalid use_system_prompt {body.use_system_prompt!r}: use one of {SYSTEM_PROMPTS}.")
    check_prompt(body.prompt)
    width, height = parse_size(body.size) if body.size else (IMAGE_DEFAULTS["width"], IMAGE_DEFAULTS["height"])
    limits.check_image(width, height)
    extra = body.extra_params or {}
    flow_shift = extra_number(extra, ("flow_shift",), body.flow_shift)
    settings = GenerationSettings(
        mode="t2i",
        width=width,
        height=height,
        num_frames=1,
        fps=24,
        num_inference_steps=body.num_inference_steps or IMAGE_DEFAULTS["steps"],
        guidance_scale=IMAGE_DEFAULTS["guidance_scale"] if body.guidance_scale is None else body.guidance_scale,
        flow_shift=float(IMAGE_DEFAULTS["flow_shift"] if flow_shift is None else flow_shift),
        seed=random.randint(0, 2**32 - 1) if body.seed is None else body.seed,
        enable_sound=False,
        preset="server",
    )
    return GenerationRequest(
        prompt=body.prompt,
        negative_prompt=body.negative_prompt or "",
        settings=settings,
        safety_check=extra_bool(extra, ("guardrails",), True),
        resolution_template=extra_bool(extra, ("use_resolution_template",), False),
        duration_template=extra_bool(extra, ("use_duration_template",), False),
        n=body.n,
        lora=body.lora,
    )


def image_format(requested: str | None) -> str:
    """png, jpeg or webp; any other value silently becomes jpeg, as on the real server."""
    return "png" if requested is None else IMAGE_FORMATS.get(requested.lower(), "jpeg")
