"""The vocabulary every notebook shares, whatever it generates: the presets (one shape, one name for one meaning in
every family), the resolution tiers, GUARDRAILS, seeds, what a CPU makes in seconds, and the one entry from a
family's table to its settings.

Each family's settings (`helpers.audiovisual_settings`, `cosmos3_action.action_settings`,
`cosmos3_transfer.transfer_settings`) are a table, a `Family`: its `PRESETS` built from `Preset`, the overrides it
takes and how one task becomes settings. Every family's `settings_for(task, preset, *, seed, model, tier,
**overrides)` is `Family.settings_for` on its table, so the same keywords mean the same thing and are checked once,
here; what it returns is a settings object that `helpers.runs` records one way (`Settings`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from helpers import models
from helpers.canvases import CANVASES
from helpers.errors import InvalidSettingError, allowed

# What each preset name means, in every family: the numbers differ by task, the meaning does not.
PRESET_MEANINGS: dict[str, str] = {
    "smoke": "the smallest call that checks everything runs: the tiny checkpoint on a CPU, a generation in seconds",
    "draft": "the 256p tier: quick looks at a prompt or a control before a full run",
    "published": "NVIDIA's published settings for the task: its tier, length and steps",
}
# The resolution tiers NVIDIA publishes (the tier is the shorter side of a 16:9 picture), in every family; 704 is a
# bin of diffusers' action and transfer canvases (`helpers.canvases`) that the cookbook does not offer.
TIERS: tuple[int, ...] = (256, 480, 720)
GUARDRAIL_CHOICES: tuple[str, ...] = ("auto", "on", "off")
# A CPU takes what the tiny checkpoint makes in about a quarter of a minute on two cores: its video decoder, most of
# the work there, turns about half a million pixel-frames a second, so a 720p clip of 9 frames is the largest
# (`smoke` at TIER 720). The audiovisual and action `draft` fit; a transfer's 121-frame `draft` would take half a
# minute a call, 480p at 189 frames two minutes a video, and 720p five.
CPU_PIXEL_FRAMES = 1280 * 720 * 9


@dataclass(frozen=True)
class Preset:
    """How big, how long and how many steps. None keeps the task's own value: NVIDIA's published one (its tier,
    its frames, its steps: 35 for a video, 50 for an image or a transfer, 30 for an action task)."""

    name: str
    tier: int | None
    num_frames: int | None
    steps: int | None

    @property
    def meaning(self) -> str:
        return PRESET_MEANINGS[self.name]


def presets(*table: Preset) -> dict[str, Preset]:
    """A family's presets by name: exactly the shared names, in their order, so that a name means one thing."""
    names = tuple(p.name for p in table)
    if names != tuple(PRESET_MEANINGS):
        raise ValueError(f"a family's presets are {list(PRESET_MEANINGS)}, in that order; got {list(names)}")
    for p in table:
        if p.tier is not None and p.tier not in TIERS:
            raise ValueError(f"preset {p.name!r}: tier {p.tier} is not one of {TIERS}")
    return {p.name: p for p in table}


def get_preset(table: dict[str, Preset], name: str) -> Preset:
    if name not in table:
        raise InvalidSettingError(f"PRESET={name!r} is not a preset. Allowed: {allowed(table)}.", "PRESET")
    return table[name]


def check_tier(tier: Any) -> int | None:
    """The one tier check, for every family: TIER as a notebook gives it (the `tier` keyword), 0 or None for the
    preset's own, else one of `TIERS`."""
    if tier in (0, None):
        return None
    if isinstance(tier, bool) or tier not in TIERS:
        raise InvalidSettingError(
            f"TIER={tier!r} is not a resolution tier. Allowed: {allowed(TIERS)} (or 0 for the preset's own).", "TIER"
        )
    return int(tier)


def check_guardrails(value: str) -> str:
    if value not in GUARDRAIL_CHOICES:
        raise InvalidSettingError(f"GUARDRAILS={value!r} is not allowed. Allowed values: {allowed(GUARDRAIL_CHOICES)}.")
    return value


def check_seed(seed: Any) -> int:
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**63:
        raise InvalidSettingError(f"seed={seed!r} is not allowed: use a whole number from 0 to 2**63-1.", "seed")
    return seed


def check_steps(steps: Any) -> int:
    if not isinstance(steps, int) or isinstance(steps, bool) or not 1 <= steps <= 200:
        raise InvalidSettingError(f"num_inference_steps={steps!r} is not allowed: use a whole number from 1 to 200.")
    return steps


def largest_canvas(tier: int) -> tuple[int, int]:
    """The tier's canvas with the most pixels (what a picture of any shape is fitted into at most)."""
    return max(CANVASES[tier].values(), key=lambda size: size[0] * size[1])


class VideoOnATier:
    """What the action and transfer settings share: a video without sound, on a tier's canvas, whose picture's shape
    decides the canvas (so a call makes at most the tier's largest canvas for every frame)."""

    is_image = False
    enable_sound = False

    @property
    def duration_s(self) -> float:
        return self.num_frames / self.fps  # type: ignore[attr-defined]

    @property
    def pixel_frames(self) -> int:
        width, height = largest_canvas(self.resolution_tier)  # type: ignore[attr-defined]
        return width * height * self.num_frames  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Family:
    """One family's settings table, which `settings_for` reads: its presets, the overrides it takes besides `tier`,
    why it refuses a field another family takes (`refused`), what a 4-step checkpoint cannot make in it
    (`full_checkpoint`: empty where it makes what it can), and `build`, which makes one task's settings from the
    checked preset, tier, seed and the overrides given: `build(task, preset, tier, given, seed=..., model=...)`."""

    name: str
    presets: dict[str, Preset]
    overrides: tuple[str, ...]
    build: Callable[..., Any]
    refused: Mapping[str, str] = field(default_factory=dict)
    full_checkpoint: str = ""

    def settings_for(
        self,
        task: Any,
        preset: str = "published",
        *,
        seed: int = 0,
        model: str = "",
        tier: Any = None,
        **overrides: Any,
    ) -> Any:
        """The one entry, for every family: the settings of one `task` under a named preset, with validated
        overrides. `tier` (256, 480 or 720; 0 or None: the preset's own) changes the size and keeps the preset's
        frames and steps; a published checkpoint's `model` brings its own defaults and limits (`helpers.models`).
        A wrong value raises `InvalidSettingError` naming the field and the allowed values."""
        for key in overrides:
            if key in self.refused:
                raise InvalidSettingError(self.refused[key], key)
        unknown = sorted(set(overrides) - set(self.overrides))
        if unknown:
            raise InvalidSettingError(
                f"Unknown setting(s) {unknown}. Allowed overrides: {allowed(('tier', *self.overrides))}.", unknown[0]
            )
        p = get_preset(self.presets, preset)
        if self.full_checkpoint and (v := models.variant(model)) is not None and v.fixed_steps is not None:
            raise InvalidSettingError(
                f"MODEL={model!r} is a 4-step distilled checkpoint, which makes images and image-to-video only: use "
                f"a full checkpoint (nvidia/Cosmos3-Nano) for {self.full_checkpoint}.",
                "MODEL",
            )
        given = {k: v for k, v in overrides.items() if v is not None}
        return self.build(task, p, check_tier(tier), given, seed=check_seed(seed), model=model)


class Settings(Protocol):
    """What every family's settings give a run to record a generation by (`helpers.runs`)."""

    seed: int
    preset: str
    fps: int

    @property
    def mode(self) -> str: ...

    @property
    def num_frames(self) -> int: ...

    @property
    def is_image(self) -> bool: ...

    @property
    def enable_sound(self) -> bool: ...

    @property
    def pixel_frames(self) -> int: ...

    @property
    def duration_s(self) -> float: ...

    def to_dict(self) -> dict[str, Any]: ...


def check_fits_a_cpu(settings: Iterable[Settings], device: str) -> None:
    """On a CPU, refuse a generation larger than `CPU_PIXEL_FRAMES` before anything loads: minutes each, even for the
    tiny checkpoint. `device` is where the generations run ("cpu", "cuda", "mps"; "" when unknown, as for an external
    server, which keeps its own limits)."""
    if device != "cpu":
        return
    for s in settings:
        if s.pixel_frames > CPU_PIXEL_FRAMES:
            raise InvalidSettingError(
                f"PRESET={s.preset!r} makes {s.mode} with {s.pixel_frames / 1e6:.0f} million pixel-frames a call; on a "
                f"CPU that takes minutes a generation even with the tiny checkpoint (its video decoder alone), and "
                f"this run would not finish in a sitting. On a CPU use PRESET='smoke' (with any TIER): a call there "
                f"makes at most {CPU_PIXEL_FRAMES / 1e6:.1f} million. Run this preset on a GPU."
            )
