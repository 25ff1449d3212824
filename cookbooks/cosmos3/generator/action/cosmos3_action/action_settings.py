"""Action-conditioned generation settings, one preset per embodiment, validated like the audiovisual presets.

A Cosmos 3 action task (forward dynamics, inverse dynamics, policy) runs on one embodiment domain, whose action
width, chunk size, frame rate, resolution tier, view point and prompt are fixed by how the model was trained and
how NVIDIA runs it. A task is named as its settings' `mode` is: the task's short name and the domain, "fd_av" for a
car's forward dynamics. `settings_for` picks them, applies a preset (`smoke`, `draft`, `published`) and validated
overrides through the entry every family shares (`helpers.settings.Family`), and refuses what the model cannot take
before anything is loaded or sent. Both backends read the same `ActionSettings`. Each value's source is in
`Embodiment.source` and in docs/action.md.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from helpers import models
from helpers.canvases import canvas
from helpers.errors import InvalidSettingError, allowed
from helpers.settings import Family, Preset, VideoOnATier, check_steps, presets

TASKS: dict[str, str] = {
    "forward_dynamics": "fd",  # a start image and actions in, video out
    "inverse_dynamics": "id",  # a clip in, the actions behind it out
    "policy": "policy",  # a first frame and an instruction in, video and actions out
}
VIEW_POINTS: dict[str, str] = {
    # The framing sentence diffusers 0.42.1 writes into the action caption for each view (the model was trained on
    # these exact sentences).
    "ego_view": "This video is captured from a first-person perspective looking at the scene.",
    "third_person_view": "This video is captured from a third-person perspective looking towards the agent from the "
    "front.",
    "wrist_view": "This video is captured from a wrist-mounted camera.",
    "concat_view": "This video contains concatenated views from multiple camera perspectives.",
}
# Every domain of diffusers 0.42.1's `_EMBODIMENT_TO_RAW_ACTION_DIM`: its action width (9-D pose blocks, 1-D grasp
# states, 15-D fingertip sets). The model pads each to its `action_dim` (64) and refuses wider ones.
ACTION_WIDTHS: dict[str, int] = {
    "av": 9,
    "camera_pose": 9,
    "pusht": 2,
    "umi": 10,
    "bridge_orig_lerobot": 10,
    "droid_lerobot": 10,
    "robomind-franka": 10,
    "robomind-franka-dual": 20,
    "robomind-ur": 10,
    "galbot": 30,
    "agibotworld": 29,
    "agibot_gear_gripper": 29,
    "agibot_gear_gripper_ext": 29,
    "fractal": 10,
    "hand_pose": 57,
}
_NVIDIA = "NVIDIA's Cosmos 3 action cookbook (cookbooks/cosmos3/generator/action/"
# Shared by NVIDIA's action notebooks on both backends; vLLM-Omni 0.30.0's action defaults (30 steps, guidance 1.0)
# agree. Guidance 1.0 runs one transformer pass a step: no unconditional pass.
STEPS, GUIDANCE = 30, 1.0
# NVIDIA's Diffusers and vLLM-Omni notebooks shift 10 for every world-model task; vLLM-Omni's own action default is
# 5, and NVIDIA's policy notebook sends 5. The cookbook follows NVIDIA's notebooks and sends the shift every time.
FLOW_SHIFT, POLICY_FLOW_SHIFT = 10.0, 5.0


@dataclass(frozen=True)
class Embodiment:
    """One action domain as NVIDIA runs it. `translation_scale`: stored translations are metres times this.
    `normalized`: the model reads actions normalised per channel (`cosmos3_action.actions.NORMALIZATIONS`)."""

    domain_name: str
    title: str
    chunk_size: int
    fps: int
    resolution_tier: int
    view_point: str
    prompt: str
    source: str
    translation_scale: float = 1.0
    normalized: bool = False
    policy_prompt: str = ""

    @property
    def action_width(self) -> int:
        return ACTION_WIDTHS[self.domain_name]


EMBODIMENTS: dict[str, Embodiment] = {
    e.domain_name: e
    for e in (
        Embodiment(
            "av",
            "Autonomous vehicle, ego trajectory",
            chunk_size=60,
            fps=10,
            resolution_tier=480,
            view_point="ego_view",
            prompt="You are an autonomous vehicle planning system.",
            translation_scale=1.35,
            source=f"{_NVIDIA}run_fd_with_diffusers.ipynb, run_id_with_diffusers.ipynb: 60 actions, 61 frames at "
            "10 fps, tier 480, ego view, this prompt; pose_rel_to_abs with translation_scale 1.35)",
        ),
        Embodiment(
            "camera_pose",
            "Camera trajectory",
            chunk_size=60,
            fps=30,
            resolution_tier=480,
            view_point="ego_view",
            prompt="A slow cinematic camera move through the scene.",
            source=f"{_NVIDIA}run_fd_with_diffusers.ipynb: 60 actions at 30 fps, tier 480, ego view; the prompt "
            "is the cookbook's own)",
        ),
        Embodiment(
            "droid_lerobot",
            "DROID, Franka arm with a gripper",
            chunk_size=16,
            fps=15,
            resolution_tier=480,
            view_point="concat_view",
            prompt="The robot arm grasps the red block, carries it to the blue tray and lets it go.",
            normalized=True,
            policy_prompt="Pick up the object and place it in the target container.",
            source=f"{_NVIDIA}run_fd_with_vllm.ipynb: five chunks of 16 actions, 17 frames each at 15 fps, "
            "image_size 480, the concatenated view of three cameras (the wrist on top, the two exterior cameras "
            "halved below), quantile-normalised actions; policy prompt and shift 5 from NVIDIA's policy examples)",
        ),
        Embodiment(
            "umi",
            "UMI hand-held gripper",
            chunk_size=16,
            fps=20,
            resolution_tier=256,
            view_point="ego_view",
            prompt="A hand-held gripper takes a green cup off a desk.",
            normalized=True,
            source=f"{_NVIDIA}run_fd_with_vllm.ipynb: chunks of 16 actions at 20 fps, image_size 256, ego view; "
            "normalised with the first 10 channels of the Cosmos framework's UMI quantiles, as its UMI dataset does)",
        ),
        Embodiment(
            "hand_pose",
            "Egocentric two-hand motion",
            chunk_size=16,
            fps=15,
            resolution_tier=480,
            view_point="ego_view",
            prompt="Two hands work at a table, seen from the wearer's eyes.",
            source=f"{_NVIDIA}run_fd_with_diffusers.ipynb: 16 actions at 15 fps, tier 480)",
        ),
    )
}
POLICY_EMBODIMENTS: tuple[str, ...] = ("droid_lerobot",)  # the published policy checkpoint is DROID's


# The embodiment keeps its own tier and chunk (NVIDIA's settings) unless a preset says otherwise; a chunk is fixed by
# how the model was trained, so no preset changes an action task's frames.
PRESETS: dict[str, Preset] = presets(
    Preset("smoke", tier=256, num_frames=None, steps=2),
    Preset("draft", tier=256, num_frames=None, steps=20),
    Preset("published", tier=None, num_frames=None, steps=None),
)


@dataclass(frozen=True)
class ActionSettings(VideoOnATier):
    """Everything that decides one action generation, whatever backend runs it."""

    task: str
    domain_name: str
    action_width: int
    chunk_size: int
    fps: int
    resolution_tier: int
    num_inference_steps: int
    guidance_scale: float
    flow_shift: float
    view_point: str
    prompt: str
    seed: int
    translation_scale: float
    normalized: bool
    preset: str

    @property
    def num_frames(self) -> int:
        """Frames of the clip: the chunk's actions are the transitions between them."""
        return self.chunk_size + 1

    @property
    def mode(self) -> str:
        return f"{TASKS[self.task]}_{self.domain_name}"

    def canvas(self, width: int, height: int) -> tuple[int, int]:
        """The (width, height) a picture of this shape is generated at, on this tier."""
        return canvas(width, height, self.resolution_tier)

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "num_frames": self.num_frames}


def get_embodiment(domain_name: str) -> Embodiment:
    if domain_name not in EMBODIMENTS:
        others = sorted(set(ACTION_WIDTHS) - set(EMBODIMENTS))
        raise InvalidSettingError(
            f"domain_name={domain_name!r} has no preset. Allowed: {allowed(EMBODIMENTS)} (the model also knows "
            f"{', '.join(others)}, without published settings)."
        )
    return EMBODIMENTS[domain_name]


_OVERRIDES = ("num_frames", "chunk_size", "fps", "num_inference_steps", "view_point", "prompt")


def parse_task(task: str) -> tuple[str, str]:
    """(task, domain_name) of an action task's name: "fd_av" is forward dynamics on the car, "policy_droid_lerobot"
    the policy on DROID's arm."""
    short, _, domain_name = str(task).partition("_")
    tasks = {name: long for long, name in TASKS.items()}
    if short not in tasks or not domain_name:
        names = ", ".join(f"{name} ({long})" for long, name in TASKS.items())
        raise InvalidSettingError(
            f"task={task!r} is not an action task. Allowed: a task's short name, {names}, then '_' and a "
            f"domain_name, as in 'fd_av'.",
            "task",
        )
    return tasks[short], domain_name


def _build(task: str, p: Preset, tier: int | None, given: dict[str, Any], *, seed: int, model: str) -> ActionSettings:
    """The settings of one action task under the checked preset, tier and seed (`FAMILY`, `settings_for`)."""
    task, domain_name = parse_task(task)
    e = get_embodiment(domain_name)
    if task == "policy" and domain_name not in POLICY_EMBODIMENTS:
        raise InvalidSettingError(
            f"task='policy' needs a policy checkpoint for domain_name={domain_name!r}; the published one "
            f"(nvidia/Cosmos3-Nano-Policy-DROID) is for {allowed(POLICY_EMBODIMENTS)}.",
            "task",
        )
    chunk_size = int(given.get("chunk_size", e.chunk_size))
    if chunk_size < 1:
        raise InvalidSettingError(
            f"chunk_size={chunk_size} must be at least 1 (NVIDIA's for {domain_name}: {e.chunk_size})."
        )
    if "num_frames" in given and given["num_frames"] != chunk_size + 1:
        raise InvalidSettingError(
            f"num_frames={given['num_frames']} does not match chunk_size={chunk_size}: an action chunk of N steps "
            f"spans N + 1 frames, so num_frames must be {chunk_size + 1} (or leave it unset)."
        )
    if chunk_size % 4:
        raise InvalidSettingError(
            f"chunk_size={chunk_size} gives {chunk_size + 1} frames, which the video autoencoder cannot pack (frames "
            "must be 4k + 1): use a multiple of 4, such as 8, 16 or 60."
        )
    view_point = given.get("view_point", e.view_point)
    if view_point not in VIEW_POINTS:
        raise InvalidSettingError(f"view_point={view_point!r} is not known. Allowed: {allowed(VIEW_POINTS)}.")
    fps = int(given.get("fps", e.fps))
    if not 1 <= fps <= 60:
        raise InvalidSettingError(f"fps={fps} is out of range: 1 to 60 (NVIDIA's for {domain_name}: {e.fps}).")
    steps = check_steps(given.get("num_inference_steps", p.steps or STEPS))
    policy = task == "policy"
    return ActionSettings(
        task=task,
        domain_name=domain_name,
        action_width=e.action_width,
        chunk_size=chunk_size,
        fps=fps,
        resolution_tier=tier or p.tier or e.resolution_tier,
        num_inference_steps=steps,
        guidance_scale=GUIDANCE,
        flow_shift=POLICY_FLOW_SHIFT if policy else FLOW_SHIFT,
        view_point=view_point,
        prompt=given.get("prompt", e.policy_prompt if policy else e.prompt),
        seed=seed,
        translation_scale=e.translation_scale,
        normalized=e.normalized,
        preset=p.name,
    )


FAMILY = Family("action", PRESETS, _OVERRIDES, _build, full_checkpoint="action tasks")


def settings_for(
    task: str, preset: str = "published", *, seed: int = 0, model: str = "", tier: Any = None, **overrides: Any
) -> ActionSettings:
    """The settings of one action task on one embodiment (`task`: "fd_av", "id_av", "fd_droid_lerobot",
    "policy_droid_lerobot", ...) under a preset: `FAMILY.settings_for`, the entry every family shares, with this
    family's overrides (`_OVERRIDES`; each error names the field and the allowed values). A published 4-step
    checkpoint as `model` is refused: it has no action tasks."""
    return FAMILY.settings_for(task, preset, seed=seed, model=model, tier=tier, **overrides)


POLICY_DROID = "nvidia/Cosmos3-Nano-Policy-DROID"


def policy_model(model: str, policy_model: str = "auto") -> str:
    """The checkpoint that runs the policy task next to `model`. "auto": NVIDIA's DROID policy checkpoint for a
    published one; the policy-shaped random checkpoint (action heads, no sound pathway) for `tiny`; `model` itself
    otherwise (a random Nano carries the same action heads, and a folder is the reader's choice)."""
    if policy_model != "auto":
        return policy_model
    if model.startswith("tiny"):
        return "tiny-nosound"
    if models.variant(model) is not None or model == POLICY_DROID:
        return POLICY_DROID
    return model


def check_actions(actions: Any, s: ActionSettings) -> np.ndarray:
    """The actions of one chunk as a float32 (chunk_size, action_width) array, or an error naming what differs."""
    array = np.asarray(actions, dtype=np.float32)
    if array.ndim != 2:
        raise InvalidSettingError(f"actions must be a 2-D array (steps, {s.action_width}); got shape {array.shape}.")
    if array.shape[1] != s.action_width:
        raise InvalidSettingError(
            f"actions have {array.shape[1]} columns but domain_name={s.domain_name!r} takes {s.action_width} "
            f"per step (action_settings.ACTION_WIDTHS). Give one {s.action_width}-wide row per step."
        )
    if array.shape[0] != s.chunk_size:
        raise InvalidSettingError(
            f"actions have {array.shape[0]} steps but chunk_size is {s.chunk_size}: split a longer trajectory with "
            "actions.chunks(actions, chunk_size) and send one chunk per call."
        )
    if not np.isfinite(array).all():
        raise InvalidSettingError("actions contain NaN or infinity: every value must be a finite number.")
    return array


def check_action_heads(transformer_config: Mapping[str, Any], widest: int = 0) -> None:
    """Refuse a checkpoint without action heads (or with heads narrower than `widest`) before any generation."""
    if not transformer_config.get("action_gen", False):
        raise InvalidSettingError(
            "This checkpoint has no action heads: its transformer config has action_gen=False. Action tasks need "
            "a Cosmos 3 checkpoint trained with action_gen=True (nvidia/Cosmos3-Nano, nvidia/Cosmos3-Super, "
            "nvidia/Cosmos3-Nano-Policy-DROID, or MODEL='tiny')."
        )
    if transformer_config.get("action_dim", 0) < widest:
        raise InvalidSettingError(
            f"This checkpoint's action_dim={transformer_config.get('action_dim')} is narrower than the {widest}-wide "
            "actions asked for: use a checkpoint with action_dim of at least that (the published ones have 64)."
        )


def caption(s: ActionSettings, width: int, height: int) -> str:
    """The structured action caption diffusers 0.42.1 builds from `s.prompt` and the view point, for a canvas of
    `width` x `height`. vLLM-Omni 0.30.0 takes the prompt as it is sent, so sending this one gives both backends
    the same text."""
    seconds = s.num_frames / s.fps
    minutes, rest = divmod(round(seconds), 60)
    text = s.prompt.strip()
    if text and not text.endswith((".", "!", "?")):
        text += "."
    shapes = {"1,1": 1.0, "4,3": 4 / 3, "3,4": 3 / 4, "16,9": 16 / 9, "9,16": 9 / 16}
    fields = {
        "cinematography": {"framing": VIEW_POINTS[s.view_point]},
        "actions": [{"time": f"0:00-{minutes}:{rest:02d}", "description": text}],
        "duration": f"{math.floor(seconds)}s",
        "fps": float(s.fps),
        "resolution": {"H": height, "W": width},
        "aspect_ratio": min(shapes, key=lambda k: abs(shapes[k] - width / height)),
    }
    return json.dumps(fields)


def describe() -> list[dict[str, Any]]:
    """One row per embodiment preset, for a table."""
    return [
        {
            "domain_name": e.domain_name,
            "embodiment": e.title,
            "width": e.action_width,
            "chunk": e.chunk_size,
            "frames": e.chunk_size + 1,
            "fps": e.fps,
            "tier": e.resolution_tier,
            "view_point": e.view_point,
        }
        for e in EMBODIMENTS.values()
    ]
