"""Transfer settings and control videos: what a spatial-control generation takes, validated before any work.

Cosmos 3 transfer generates a clip from a caption and one or more control videos ("hints"): a Canny edge map, a
blurred reference, a depth map, a segmentation map or a world-scenario map. `settings_for` picks the frames, frame
rate, chunking, guidance and control guidance for a set of hints under a preset (`smoke`, `draft`, `published`),
through the entry every family shares (`helpers.settings.Family`), each value with its source (`HINTS`,
docs/transfer.md). `load_control` reads a control video and
`check_controls` refuses controls the model cannot take (an unknown hint, the wrong size, too few frames) before
anything is loaded or sent. Both backends read the same `TransferSettings`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers import media
from helpers.canvases import CANVASES, canvas
from helpers.errors import InvalidSettingError, MediaError, allowed
from helpers.settings import Family, Preset, VideoOnATier, check_steps, presets

_VLLM = "vLLM-Omni 0.30.0's transfer defaults for a single hint (TRANSFER_DEFAULTS)"
_NVIDIA = "NVIDIA's Cosmos 3 transfer cookbook (cookbooks/cosmos3/generator/transfer/)"


@dataclass(frozen=True)
class Hint:
    """One kind of control video, with the settings NVIDIA runs it at."""

    name: str
    title: str
    control_guidance: float
    guidance_scale: float
    num_frames: int
    chunk: int  # num_video_frames_per_chunk: 4k + 1 frames, one chunk for NVIDIA's clips
    fps: int
    derived: bool  # computed from a source clip (the server can do it on the fly) rather than estimated offline
    source: str


HINTS: dict[str, Hint] = {
    # In the model's canonical order: diffusers 0.42.1 (Cosmos3TransferSetupStep) and vLLM-Omni 0.30.0
    # (TRANSFER_HINT_KEYS) both pack several controls in this order, whatever order they were given in.
    h.name: h
    for h in (
        Hint("edge", "Canny edge map", 1.5, 3.0, 121, 121, 30, True, f"{_NVIDIA}: 121 frames at 30 fps; {_VLLM}"),
        Hint("blur", "blurred reference", 1.5, 3.0, 121, 121, 30, True, f"{_NVIDIA}: 121 frames at 30 fps; {_VLLM}"),
        Hint("depth", "depth map", 1.5, 3.0, 121, 121, 30, False, f"{_NVIDIA}: 121 frames at 30 fps; {_VLLM}"),
        Hint("seg", "segmentation map", 2.0, 3.0, 121, 121, 30, False, f"{_NVIDIA}: 121 frames at 30 fps; {_VLLM}"),
        Hint(
            "wsm",
            "world-scenario map",
            3.0,
            1.0,
            100,
            101,
            10,
            False,
            f"{_NVIDIA}: 100 frames at 10 fps; {_VLLM}: guidance 1.0, control guidance 3.0, chunks of 101",
        ),
    )
}
# Several hints at once: diffusers' documented transfer call and NVIDIA's notebooks use 1.5; vLLM-Omni 0.30.0 falls
# back to 1.0 when more than one hint is given, so the cookbook always sends it.
MULTI_CONTROL_GUIDANCE = 1.5
STEPS, FLOW_SHIFT = 50, 10.0  # NVIDIA's transfer calls; vLLM-Omni's transfer default shift is 10 too
NUM_CONDITIONAL_FRAMES = 1  # each chunk after the first starts from the last frame of the one before


PUBLISHED_TIER = 720  # NVIDIA's transfer examples
PRESETS: dict[str, Preset] = presets(
    Preset("smoke", tier=256, num_frames=9, steps=2),
    Preset("draft", tier=256, num_frames=None, steps=20),
    Preset("published", tier=None, num_frames=None, steps=None),
)


@dataclass(frozen=True)
class TransferSettings(VideoOnATier):
    """Everything that decides one transfer generation, whatever backend runs it."""

    hints: tuple[str, ...]
    num_frames: int
    fps: int
    num_video_frames_per_chunk: int
    num_conditional_frames: int
    resolution_tier: int
    num_inference_steps: int
    guidance_scale: float
    control_guidance: float
    flow_shift: float
    seed: int
    preset: str

    @property
    def name(self) -> str:
        return "+".join(self.hints)

    @property
    def mode(self) -> str:
        return self.name

    @property
    def num_chunks(self) -> int:
        """Calls of the model one generation makes: each chunk after the first overlaps the previous one by
        `num_conditional_frames` frames."""
        chunk, overlap = self.num_video_frames_per_chunk, self.num_conditional_frames
        if self.num_frames <= chunk:
            return 1
        return 1 + -(-(self.num_frames - chunk) // (chunk - overlap))

    def canvas(self, width: int, height: int) -> tuple[int, int]:
        """The (width, height) this tier generates for a control of this shape."""
        return canvas(width, height, self.resolution_tier)

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "hints": self.name, "num_chunks": self.num_chunks}


_OVERRIDES = (
    "num_frames",
    "fps",
    "num_video_frames_per_chunk",
    "num_conditional_frames",
    "num_inference_steps",
    "guidance_scale",
    "control_guidance",
    "flow_shift",
)
# What other Cosmos 3 modes take and transfer does not: vLLM-Omni 0.30.0 fails such a job only once it runs.
_NOT_WITH_TRANSFER = {
    key: f"{key} cannot be combined with control videos: transfer makes video only, without {what} (vLLM-Omni fails "
    "such a job once it runs). Sound is made by the audiovisual cookbook and actions by the action cookbook; drop the "
    "controls to use them."
    for key, what in (
        ("generate_sound", "sound"),
        ("sound_duration", "sound"),
        ("action", "action"),
        ("action_mode", "action"),
        ("raw_actions", "action"),
    )
}


def check_hints(hints: Sequence[str] | str) -> tuple[str, ...]:
    """The hints in the model's canonical order, or an error naming the unknown one ("edge+depth" names two)."""
    given = tuple(hints.split("+")) if isinstance(hints, str) else tuple(hints)
    if not given:
        raise InvalidSettingError(f"hints is empty: give at least one control. Allowed: {allowed(HINTS)}.")
    for hint in given:
        if hint not in HINTS:
            raise InvalidSettingError(
                f"hint {hint!r} is not a Cosmos 3 control. Allowed: {allowed(HINTS)} (edge: Canny edges; seg: "
                "segmentation; wsm: world-scenario map)."
            )
    if len(set(given)) != len(given):
        raise InvalidSettingError(f"hints {list(given)} names a control twice: give each hint once.")
    return tuple(h for h in HINTS if h in given)


def _build(
    task: Sequence[str] | str, p: Preset, tier: int | None, given: dict[str, Any], *, seed: int, model: str
) -> TransferSettings:
    """The settings of one transfer generation under the checked preset, tier and seed (`FAMILY`, `settings_for`)."""
    ordered = check_hints(task)
    first = HINTS[ordered[0]]
    single = len(ordered) == 1
    num_frames = int(given.get("num_frames", p.num_frames or first.num_frames))
    if not 1 <= num_frames <= 5000:
        raise InvalidSettingError(f"num_frames={num_frames} is out of range: 1 to 5000 (NVIDIA's: {first.num_frames}).")
    chunk = int(given.get("num_video_frames_per_chunk", p.num_frames or first.chunk))
    if chunk < 1 or (chunk - 1) % 4:
        raise InvalidSettingError(
            f"num_video_frames_per_chunk={chunk} is not 4k + 1 frames, which the video autoencoder packs (the pipeline "
            f"would silently round it up to {-(-(chunk - 1) // 4) * 4 + 1}): use 9, 61, 93 or 121, for example."
        )
    overlap = int(given.get("num_conditional_frames", NUM_CONDITIONAL_FRAMES))
    if not 0 <= overlap < chunk:
        raise InvalidSettingError(
            f"num_conditional_frames={overlap} must be from 0 to num_video_frames_per_chunk - 1 ({chunk - 1}): each "
            "chunk reuses that many frames of the previous one."
        )
    fps = int(given.get("fps", first.fps))
    if not 1 <= fps <= 60:
        raise InvalidSettingError(f"fps={fps} is out of range: 1 to 60 (NVIDIA's: {first.fps}; use the control's).")
    steps = check_steps(given.get("num_inference_steps", p.steps or STEPS))
    guidance = float(given.get("guidance_scale", first.guidance_scale if single else HINTS["edge"].guidance_scale))
    control = float(given.get("control_guidance", first.control_guidance if single else MULTI_CONTROL_GUIDANCE))
    for field, value in (("guidance_scale", guidance), ("control_guidance", control)):
        if not 1.0 <= value <= 20.0:
            raise InvalidSettingError(
                f"{field}={value} is out of range: 1.0 (off: one pass fewer per step) to 20.0 (NVIDIA's: 1.0 to 3.0)."
            )
    shift = float(given.get("flow_shift", FLOW_SHIFT))
    if not 0.0 < shift <= 100.0:
        raise InvalidSettingError(f"flow_shift={shift} is out of range: above 0 up to 100 (NVIDIA's: {FLOW_SHIFT}).")
    return TransferSettings(
        hints=ordered,
        num_frames=num_frames,
        fps=fps,
        num_video_frames_per_chunk=chunk,
        num_conditional_frames=overlap,
        resolution_tier=tier or p.tier or PUBLISHED_TIER,
        num_inference_steps=steps,
        guidance_scale=guidance,
        control_guidance=control,
        flow_shift=shift,
        seed=seed,
        preset=p.name,
    )


FAMILY = Family("transfer", PRESETS, _OVERRIDES, _build, refused=_NOT_WITH_TRANSFER, full_checkpoint="transfer")


def settings_for(
    task: Sequence[str] | str,
    preset: str = "published",
    *,
    seed: int = 0,
    model: str = "",
    tier: Any = None,
    **overrides: Any,
) -> TransferSettings:
    """The settings of one transfer generation with these hints (`task`: "edge", ["edge", "depth"] or "edge+depth")
    under a preset: `FAMILY.settings_for`, the entry every family shares, with this family's overrides (`_OVERRIDES`;
    each error names the field and the allowed values). A published checkpoint without transfer (`model`: a 4-step
    one) is refused."""
    return FAMILY.settings_for(task, preset, seed=seed, model=model, tier=tier, **overrides)


# The Canny thresholds (low, high) of vLLM-Omni 0.30.0's on-the-fly edge control, by strength; "medium" is its
# default and what NVIDIA's transfer examples derive their edge maps with.
EDGE_THRESHOLDS: dict[str, tuple[int, int]] = {
    "very_low": (20, 50),
    "low": (50, 100),
    "medium": (100, 200),
    "high": (200, 300),
    "very_high": (300, 400),
}
# The blur recipe of vLLM-Omni 0.30.0's on-the-fly blur control, by strength: shrink by the first factor, smooth
# with a bilateral filter sized for the picture (d 30, sigmas 150 and 100 at 720 pixels), grow back, then shrink by
# the second factor and grow back with bicubic resampling.
BLUR_FACTORS: dict[str, tuple[int, int]] = {
    "very_low": (1, 4),
    "low": (4, 4),
    "medium": (2, 10),
    "high": (1, 16),
    "very_high": (4, 16),
}


def blur_map(frames: Sequence[Any], strength: str = "medium") -> list[Any]:
    """The blurred-reference control of RGB PIL frames, as vLLM-Omni derives it on the fly (`BLUR_FACTORS`)."""
    import cv2
    import numpy as np
    from PIL import Image

    if strength not in BLUR_FACTORS:
        raise InvalidSettingError(f"strength={strength!r} is not a blur strength. Allowed: {allowed(BLUR_FACTORS)}.")
    pre, down = BLUR_FACTORS[strength]
    out = []
    for frame in frames:
        pixels = np.ascontiguousarray(np.asarray(frame.convert("RGB")))
        h, w = pixels.shape[:2]
        if pre > 1:
            pixels = cv2.resize(pixels, (max(1, w // pre), max(1, h // pre)), interpolation=cv2.INTER_AREA)
        scale = max(pixels.shape[:2]) / 720
        diameter = max(1, round(30 * scale)) | 1  # odd, as the filter wants
        pixels = cv2.bilateralFilter(pixels, diameter, max(1.0, 150 * scale), max(1.0, 100 * scale))
        if pre > 1:
            pixels = cv2.resize(pixels, (w, h), interpolation=cv2.INTER_LINEAR)
        small = cv2.resize(pixels, (max(1, w // down), max(1, h // down)), interpolation=cv2.INTER_CUBIC)
        out.append(Image.fromarray(cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)))
    return out


def load_control(path: str | os.PathLike[str], hint: str, max_frames: int | None = None) -> list[Any]:
    """A control video as RGB PIL frames, or an error that names the hint and the file."""
    check_hints([hint])
    target = Path(path).expanduser()
    try:
        return media.load_video(target, max_frames=max_frames)
    except MediaError as exc:
        raise MediaError(
            f"The {hint} control {target} cannot be read: {exc} Pass a video file (MP4, WebM or MOV) of the same "
            "length and size as the other controls."
        ) from exc


def check_controls(controls: Mapping[str, Sequence[Any]], s: TransferSettings) -> tuple[int, int]:
    """Refuse controls the generation cannot take, naming the hint and the fix; returns the canvas (width, height).

    Every control must hold at least `s.num_frames` frames (both backends would make a shorter video without a word)
    and be exactly the tier's canvas for its shape (they would rescale it, each its own way)."""
    check_hints(list(controls))
    if set(controls) != set(s.hints):
        raise InvalidSettingError(
            f"The controls given ({allowed(controls)}) are not the settings' hints ({allowed(s.hints)}): make "
            "the settings with transfer_settings.settings_for(list(controls), ...)."
        )
    sizes = {}
    for hint, frames in controls.items():
        if len(frames) < s.num_frames:
            raise InvalidSettingError(
                f"The {hint} control has {len(frames)} frames; num_frames={s.num_frames} needs at least that many: "
                "pass a longer control or lower num_frames."
            )
        sizes[hint] = frames[0].size
    width, height = next(iter(sizes.values()))
    want = s.canvas(width, height)
    for hint, size in sizes.items():
        if size != want:
            canvases = ", ".join(f"{w}x{h}" for w, h in CANVASES[s.resolution_tier].values())
            raise InvalidSettingError(
                f"The {hint} control is {size[0]}x{size[1]}; at resolution_tier={s.resolution_tier} this run "
                f"generates {want[0]}x{want[1]} (the tier's canvases: "
                f"{canvases}). Fit every control to it first: "
                f"[media.fit_frame(f, {want[0]}, {want[1]}) for f in frames]."
            )
    return want


def describe() -> list[dict[str, Any]]:
    """One row per hint, for a table."""
    return [
        {
            "hint": h.name,
            "control": h.title,
            "control_guidance": h.control_guidance,
            "guidance_scale": h.guidance_scale,
            "frames": h.num_frames,
            "fps": h.fps,
            "made from": "the source clip" if h.derived else "an estimator or a simulator",
        }
        for h in HINTS.values()
    ]
