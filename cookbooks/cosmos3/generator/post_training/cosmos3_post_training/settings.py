"""What a fine-tune runs at: the clips' canvas and length, the training steps, the learning rate and how often the
training is saved, and the generations that show what the adapter changed. `PRESET` keeps its meaning from the one
vocabulary (`helpers.settings`); the numbers are this family's.

NVIDIA publishes no LoRA recipe for Nano (its fine-tuning cookbook trains Nano in full on eight H100s and offers a
LoRA for Super only), so `published` is Nano's published generation setting brought to one GPU: the 480p tier, the
bundled clips' 33 frames, 35 sampling steps, and a typical LoRA schedule of 1,000 steps at 1e-4.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from helpers.canvases import CANVASES
from helpers.errors import InvalidSettingError
from helpers.settings import Family, Preset, check_steps, presets

# `steps` are the sampling steps of the generations that compare the adapter with the model it was trained on.
PRESETS: dict[str, Preset] = presets(
    Preset("smoke", tier=256, num_frames=9, steps=2),
    Preset("draft", tier=256, num_frames=33, steps=20),
    Preset("published", tier=480, num_frames=33, steps=35),
)
# Per preset: training steps, learning rate, steps between saves. The tiny random-weight checkpoint (smoke) learns
# at a larger rate, so that a minute on a CPU shows the loss fall.
TRAINING: dict[str, tuple[int, float, int]] = {
    "smoke": (60, 2e-3, 20),
    "draft": (100, 1e-4, 25),
    "published": (1000, 1e-4, 100),
}
# Nano's video sampling: guidance 6, flow shift 10 (NVIDIA's defaults at every tier), 24 fps for what it generates.
GUIDANCE, FLOW_SHIFT, FPS = 6.0, 10.0, 24
# The generation pathway's projections in every decoder layer (diffusers' names): the attention of the video tokens
# and their feed-forward. The text tower (`to_q`, `to_k`, `to_v`, `to_out`, `mlp.*`) stays as it was trained.
GENERATION_PROJECTIONS: tuple[str, ...] = (
    "add_q_proj",
    "add_k_proj",
    "add_v_proj",
    "to_add_out",
    "mlp_moe_gen.gate_proj",
    "mlp_moe_gen.up_proj",
    "mlp_moe_gen.down_proj",
)


@dataclass(frozen=True)
class TrainingSettings:
    """One fine-tune: the canvas and length its clips are cut to, its schedule, its adapter, and the text-to-video
    generations (at `num_inference_steps`, guidance and flow shift) that show what it changed."""

    preset: str
    width: int
    height: int
    num_frames: int
    train_steps: int
    learning_rate: float
    save_every: int
    rank: int
    num_inference_steps: int
    guidance_scale: float
    flow_shift: float
    seed: int
    fps: int = FPS
    mode: str = "t2v"
    is_image: bool = False
    enable_sound: bool = False

    @property
    def size(self) -> str:
        return f"{self.width}x{self.height}"

    @property
    def duration_s(self) -> float:
        return self.num_frames / self.fps

    @property
    def pixel_frames(self) -> int:
        return self.width * self.height * self.num_frames

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def fingerprint(self) -> dict[str, Any]:
        """What a saved checkpoint must share with this fine-tune to go on from it: everything but how long it trains
        and how often it saves (so a second run may train longer)."""
        return {k: v for k, v in self.to_dict().items() if k not in ("train_steps", "save_every")}


def _positive(name: str, value: Any, kind: type, parameter: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, kind | int) or not value > 0:
        raise InvalidSettingError(f"{parameter}={value!r} is not allowed: use a positive number ({name}).")
    return kind(value)


_OVERRIDES = ("rank", "train_steps", "learning_rate", "save_every", "num_frames")


def _build(task: str, p: Preset, tier: int | None, given: dict[str, Any], *, seed: int, model: str) -> TrainingSettings:
    """The settings of a fine-tune under the checked preset, tier and seed (`FAMILY`, `settings_for`)."""
    if task != "t2v":
        raise InvalidSettingError(f"A fine-tune here trains text to video; task={task!r} is not one.", "task")
    steps, rate, every = TRAINING[p.name]
    steps = _positive("training steps", given.get("train_steps", steps), int, "TRAIN_STEPS")
    rate = _positive("the optimizer's step size", given.get("learning_rate", rate), float, "LEARNING_RATE")
    if not rate < 1:
        raise InvalidSettingError(f"LEARNING_RATE={rate} is not allowed: use a rate below 1 (a LoRA: about 1e-4).")
    every = _positive("training steps between saves", given.get("save_every", every), int, "SAVE_EVERY")
    rank = _positive("the adapter's rank", given.get("rank", 16), int, "RANK")
    if rank > 256:
        raise InvalidSettingError(f"RANK={rank} is not allowed: use 1 to 256 (a LoRA: 8 to 64).")
    frames = given.get("num_frames", p.num_frames)
    if isinstance(frames, bool) or not isinstance(frames, int) or frames < 5 or (frames - 1) % 4:
        raise InvalidSettingError(
            f"TRAIN_FRAMES={frames!r} is not allowed: use 5, 9, 13, ... (4k + 1, as the video autoencoder packs "
            "frames), or 0 for the preset's."
        )
    width, height = CANVASES[tier or p.tier]["16:9"]  # type: ignore[index]
    return TrainingSettings(
        preset=p.name,
        width=width,
        height=height,
        num_frames=frames,
        train_steps=steps,
        learning_rate=rate,
        save_every=min(every, steps),
        rank=rank,
        num_inference_steps=check_steps(p.steps),
        guidance_scale=GUIDANCE,
        flow_shift=FLOW_SHIFT,
        seed=seed,
    )


FAMILY = Family("post_training", PRESETS, _OVERRIDES, _build)


def settings_for(preset: str = "published", *, seed: int = 0, tier: Any = None, **overrides: Any) -> TrainingSettings:
    """The settings of a fine-tune (text to video) under a named preset: `FAMILY.settings_for`, the entry every family
    shares, with this family's overrides (`rank`, `train_steps`, `learning_rate`, `save_every`, `num_frames`; None
    keeps the preset's). Every wrong value raises `InvalidSettingError` naming the notebook parameter."""
    return FAMILY.settings_for("t2v", preset, seed=seed, tier=tier, **overrides)


def describe() -> list[dict[str, Any]]:
    """Each preset's numbers, for the notebooks' tables."""
    rows = []
    for name in PRESETS:
        s = settings_for(name)
        rows.append(
            {
                "PRESET": name,
                "clips": f"{s.size}, {s.num_frames} frames",
                "training steps": s.train_steps,
                "learning rate": s.learning_rate,
                "saved every": s.save_every,
                "sampling steps": s.num_inference_steps,
            }
        )
    return rows
