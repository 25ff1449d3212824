"""The settings of images, videos and sound: the audiovisual family's modes, which the dataset family makes too.
A table in the shape every family's settings share (`helpers.settings.Family`): `PRESETS`, `settings_for(task,
preset, *, seed, model, tier, **overrides)` and a settings class.

One `AudiovisualSettings` object feeds both backends: the `pipe(...)` call of the Diffusers notebook and the form
fields of the vLLM-Omni request. Sizes and steps come from a preset and its overrides, never from edited code. How
fast a size runs is a separate choice (`SPEED`, `helpers.speeds`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from helpers import models
from helpers.canvases import ASPECT_RATIOS, CANVASES
from helpers.errors import InvalidSettingError, allowed
from helpers.settings import TIERS, Family, Preset, check_steps, check_tier, presets

MODES: tuple[str, ...] = ("t2i", "t2v", "i2v", "v2v", "t2v_sound", "i2v_sound", "v2v_sound", "fl2v")
MODE_TITLES: dict[str, str] = {
    "t2i": "Text to image",
    "t2v": "Text to video",
    "i2v": "Image to video",
    "v2v": "Video to video",
    "t2v_sound": "Text to video with sound",
    "i2v_sound": "Image to video with sound",
    "v2v_sound": "Video to video with sound",
    "fl2v": "First and last frame to video",
}
SOUND_MODES: frozenset[str] = frozenset({"t2v_sound", "i2v_sound", "v2v_sound"})
IMAGE_CONDITIONED_MODES: frozenset[str] = frozenset({"i2v", "i2v_sound"})
# Modes whose `pipe(...)` call takes `video=`: a clip to continue, or (fl2v) the first and the last frame.
VIDEO_CONDITIONED_MODES: frozenset[str] = frozenset({"v2v", "v2v_sound", "fl2v"})

# The tiers' sizes at each aspect ratio: the shared table.
SIZES: dict[int, dict[str, tuple[int, int]]] = {tier: CANVASES[tier] for tier in TIERS}
FPS_CHOICES: tuple[int, ...] = (10, 16, 24, 30)  # vLLM-Omni's Cosmos 3 recipes and NVIDIA's README
# NVIDIA's framework caps a video at 400 / 300 / 200 frames at 256p / 480p / 720p (docs/faq.md, args.py); frames are
# 4k+1 (the VAE packs 4 pictures into each latent frame after the first), so these are the longest allowed.
TIER_MAX_FRAMES: dict[int, int] = {256: 397, 480: 297, 720: 197}
MIN_FRAMES, MAX_FRAMES = 5, max(TIER_MAX_FRAMES.values())
FRAME_CHOICES: tuple[int, ...] = tuple(range(MIN_FRAMES, MAX_FRAMES + 1, 4))
SIZE_MULTIPLE = 16


@dataclass(frozen=True)
class AudiovisualSettings:
    """Everything that decides one generation, whatever backend runs it."""

    mode: str
    width: int
    height: int
    num_frames: int
    fps: int
    num_inference_steps: int
    guidance_scale: float
    flow_shift: float
    seed: int
    enable_sound: bool
    preset: str

    @property
    def is_image(self) -> bool:
        return self.mode == "t2i"

    @property
    def size(self) -> str:
        """The `WIDTHxHEIGHT` string used by the vLLM-Omni API."""
        return f"{self.width}x{self.height}"

    @property
    def duration_s(self) -> float:
        return 0.0 if self.is_image else self.num_frames / self.fps

    @property
    def pixel_frames(self) -> int:
        return self.width * self.height * self.num_frames

    @property
    def condition_frame_indexes(self) -> tuple[int, int]:
        """The latent frames a video-conditioned mode keeps clean: the clip's first two (its first 5 pictures), or
        for fl2v the first and the last (the VAE packs 4 pictures into each latent frame after the first)."""
        return (0, (self.num_frames - 1) // 4) if self.mode == "fl2v" else (0, 1)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# NVIDIA's published settings, what a preset's None keeps: a 720p 16:9 video of 189 frames (7.9 s at 24 fps) in 35
# steps, guidance 6, flow shift 10 (NVIDIA's shipped video defaults set 10 at every Nano tier; the framework's 3 / 5 /
# 10 per tier applies only when no shift is configured; vLLM-Omni's video default is 10 too); an image 1024x1024 in
# 50 steps. NVIDIA's framework samples images with guidance 4 and no negative prompt at every step; vLLM-Omni's
# default is 7, but applied only on timesteps 400-1000, which diffusers cannot do: 7 at every step over-guides.
# Images are shifted by 3, as NVIDIA and vLLM-Omni do.
PUBLISHED_TIER, PUBLISHED_FRAMES, PUBLISHED_STEPS = 720, 189, 35
PUBLISHED_IMAGE_SIZE, PUBLISHED_IMAGE_STEPS = (1024, 1024), 50
FPS, GUIDANCE, FLOW_SHIFT = 24, 6.0, 10.0
IMAGE_GUIDANCE, IMAGE_FLOW_SHIFT = 4.0, 3.0
PRESETS: dict[str, Preset] = presets(
    Preset("smoke", tier=256, num_frames=9, steps=2),
    Preset("draft", tier=256, num_frames=93, steps=20),
    Preset("published", tier=None, num_frames=None, steps=None),
)
_OVERRIDES = (
    "aspect_ratio",
    "width",
    "height",
    "num_frames",
    "fps",
    "num_inference_steps",
    "guidance_scale",
    "flow_shift",
    "enable_sound",
)


def size_for(tier: int, aspect_ratio: str = "16:9") -> tuple[int, int]:
    """(width, height) of a resolution tier at an aspect ratio."""
    if check_tier(tier) is None:
        raise InvalidSettingError(f"TIER={tier!r} names no size: give one of {allowed(TIERS)}.", "TIER")
    sizes = SIZES[tier]
    if aspect_ratio not in sizes:
        raise InvalidSettingError(
            f"ASPECT_RATIO={aspect_ratio!r} is not an aspect ratio. Allowed: {allowed(ASPECT_RATIOS)}.", "ASPECT_RATIO"
        )
    return sizes[aspect_ratio]


def check_size(width: int, height: int) -> None:
    for name, value in (("width", width), ("height", height)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise InvalidSettingError(f"{name} must be a positive whole number of pixels, got {value!r}.")
        if value % SIZE_MULTIPLE:
            lower = value - value % SIZE_MULTIPLE
            raise InvalidSettingError(
                f"{name}={value} is not a multiple of {SIZE_MULTIPLE}. Use {lower or SIZE_MULTIPLE} or "
                f"{lower + SIZE_MULTIPLE}, or pick a tier ({allowed(SIZES)}) and aspect ratio "
                f"({allowed(ASPECT_RATIOS)})."
            )


def tier_for_size(width: int, height: int) -> int:
    """The resolution tier a size counts as: the smallest whose largest picture has at least as many pixels."""
    for tier, by_ratio in SIZES.items():
        if width * height <= max(w * h for w, h in by_ratio.values()):
            return tier
    return max(SIZES)


def check_num_frames(num_frames: int, width: int, height: int) -> None:
    tier = tier_for_size(width, height)
    most = TIER_MAX_FRAMES[tier]
    if num_frames not in FRAME_CHOICES or num_frames > most:
        limits = ", ".join(f"{t}p {n}" for t, n in TIER_MAX_FRAMES.items())
        raise InvalidSettingError(
            f"num_frames={num_frames!r} is not allowed at {width}x{height} ({tier}p): use 4k+1 frames from "
            f"{MIN_FRAMES} to {most} (5, 9, 13, ..., 189, ...). The VAE compresses time 4x and would silently drop "
            f"other counts, and NVIDIA caps each tier ({limits})."
        )


def check_fps(fps: int) -> None:
    if fps not in FPS_CHOICES:
        raise InvalidSettingError(f"fps={fps!r} is not allowed. Allowed frame rates: {allowed(FPS_CHOICES)}.")


def _size(p: Preset, tier: int | None, is_image: bool, given: dict[str, Any], published_tier: int) -> tuple[int, int]:
    """The picture's size: width and height as given, or the tier (TIER, else the preset's, else the checkpoint's
    published one) at the aspect ratio (16:9 for a video, 1:1 for an image); a published image without either is
    NVIDIA's 1024x1024."""
    if ("width" in given) != ("height" in given):
        raise InvalidSettingError("Give width and height together (or neither, to use the preset's size).")
    if "width" in given:
        if tier is not None or "aspect_ratio" in given:
            raise InvalidSettingError("Give either width and height, or tier and aspect_ratio, not both.")
        return given["width"], given["height"]
    tier = tier or p.tier
    if is_image and tier is None and "aspect_ratio" not in given:
        return PUBLISHED_IMAGE_SIZE
    return size_for(tier or published_tier, given.get("aspect_ratio", "1:1" if is_image else "16:9"))


def _build(
    mode: str, p: Preset, tier: int | None, given: dict[str, Any], *, seed: int, model: str
) -> AudiovisualSettings:
    """The settings of one mode under the checked preset, tier and seed (`FAMILY`, `settings_for`)."""
    if mode not in MODES:
        raise InvalidSettingError(f"Unknown mode {mode!r}. Allowed modes: {allowed(MODES)}.", "MODES")
    is_image = mode == "t2i"
    variant = models.variant(model)
    width, height = _size(p, tier, is_image, given, max(variant.tiers) if variant else PUBLISHED_TIER)
    check_size(width, height)

    enable_sound = bool(given.get("enable_sound", mode in SOUND_MODES))
    if is_image:
        if given.get("num_frames", 1) != 1:
            raise InvalidSettingError("Text-to-image makes one frame; leave num_frames unset for mode 't2i'.")
        if enable_sound:
            raise InvalidSettingError("Sound needs a video: use mode 't2v_sound' or 'i2v_sound', not 't2i'.")
        num_frames = 1
        steps, guidance, shift = p.steps or PUBLISHED_IMAGE_STEPS, IMAGE_GUIDANCE, IMAGE_FLOW_SHIFT
    else:
        num_frames = given.get("num_frames", p.num_frames or PUBLISHED_FRAMES)
        check_num_frames(num_frames, width, height)
        steps, guidance, shift = p.steps or PUBLISHED_STEPS, GUIDANCE, FLOW_SHIFT
    fps = given.get("fps", FPS)
    check_fps(fps)

    steps = check_steps(given.get("num_inference_steps", steps))
    guidance = float(given.get("guidance_scale", guidance))
    if not 0.0 <= guidance <= 20.0:
        raise InvalidSettingError(f"guidance_scale={guidance} is not allowed: use 0 to 20 (1 turns guidance off).")
    shift = float(given.get("flow_shift", shift))
    if shift <= 0:
        raise InvalidSettingError(f"flow_shift={shift} is not allowed: use a positive number (video 10, image 3).")
    if (v := variant) is not None:
        steps, guidance, shift, (width, height) = _for_variant(
            v, model, mode, given, steps, guidance, shift, width, height
        )
        if v.max_frames is not None and not is_image:
            if num_frames > v.max_frames and "num_frames" in given:
                raise InvalidSettingError(
                    f"MODEL={model!r} makes at most {v.max_frames} frames; num_frames={num_frames}."
                )
            num_frames = min(num_frames, v.max_frames)  # a preset's length is capped at the checkpoint's own

    return AudiovisualSettings(
        mode=mode,
        width=width,
        height=height,
        num_frames=num_frames,
        fps=fps,
        num_inference_steps=steps,
        guidance_scale=guidance,
        flow_shift=shift,
        seed=seed,
        enable_sound=enable_sound,
        preset=p.name,
    )


FAMILY = Family("audiovisual", PRESETS, _OVERRIDES, _build)


def settings_for(
    task: str, preset: str = "published", *, seed: int = 0, model: str = "", tier: Any = None, **overrides: Any
) -> AudiovisualSettings:
    """The settings of one mode (`task`: "t2v", "i2v", ...) under a named preset: `FAMILY.settings_for`, the entry
    every family shares (`helpers.settings.Family`), with this family's overrides (`_OVERRIDES`)."""
    return FAMILY.settings_for(task, preset, seed=seed, model=model, tier=tier, **overrides)


def _for_variant(
    v: models.Variant,
    model: str,
    mode: str,
    given: dict[str, Any],
    steps: int,
    guidance: float,
    shift: float,
    width: int,
    height: int,
) -> tuple[int, float, float, tuple[int, int]]:
    """A published checkpoint's own defaults (guidance, flow shift, image size, a distilled schedule) and limits."""
    if v.modes is not None and mode not in v.modes:
        distilled = (
            " It is a 4-step checkpoint: the audiovisual Diffusers notebook loads it through DISTILLED_MODEL."
            if v.fixed_steps is not None
            else ""
        )
        raise InvalidSettingError(
            f"MODEL={model!r} makes {allowed(v.modes)} only; drop {mode!r} from MODES.{distilled}", "MODES"
        )
    tier = _tier_of((width, height))
    if tier is not None and tier not in v.tiers:
        raise InvalidSettingError(
            f"MODEL={model!r} makes {allowed(v.tiers)} videos; {width}x{height} is {tier}p: "
            f"set TIER to one of those (or PRESET='draft').",
            "TIER",
        )
    if mode == "t2i" and (width, height) == PUBLISHED_IMAGE_SIZE and "width" not in given:
        width, height = v.image_size
    if mode != "t2i":
        guidance, shift = given.get("guidance_scale", v.guidance_scale), given.get("flow_shift", v.flow_shift)
    if v.fixed_steps is not None:
        if given.get("num_inference_steps", v.fixed_steps) != v.fixed_steps or given.get("guidance_scale", 1.0) != 1.0:
            raise InvalidSettingError(
                f"MODEL={model!r} is distilled: it runs {v.fixed_steps} steps without guidance; "
                "leave num_inference_steps and guidance_scale unset."
            )
        steps, guidance = v.fixed_steps, 1.0
    return steps, float(guidance), float(shift), (width, height)


def _tier_of(size: tuple[int, int]) -> int | None:
    for tier, by_ratio in SIZES.items():
        if size in by_ratio.values():
            return tier
    return None
