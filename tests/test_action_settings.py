"""The action presets: NVIDIA's per-embodiment settings, errors that name the field, and the tables and the caption
that must be diffusers 0.42.1's own (the vLLM-Omni notebook sends the caption diffusers would build)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from diffusers.pipelines.cosmos import pipeline_cosmos3_omni as cosmos3

from cosmos3_action import action_settings
from helpers.errors import InvalidSettingError


def test_each_embodiment_runs_as_nvidia_runs_it() -> None:
    car = action_settings.settings_for("fd_av")
    assert (car.chunk_size, car.num_frames, car.fps, car.resolution_tier, car.view_point) == (
        60,
        61,
        10,
        480,
        "ego_view",
    )
    assert (car.num_inference_steps, car.guidance_scale, car.flow_shift, car.action_width) == (30, 1.0, 10.0, 9)
    arm = action_settings.settings_for("fd_droid_lerobot")
    assert (arm.chunk_size, arm.fps, arm.action_width, arm.normalized) == (16, 15, 10, True)
    policy = action_settings.settings_for("policy_droid_lerobot")
    assert (policy.flow_shift, policy.prompt) == (5.0, "Pick up the object and place it in the target container.")
    smoke = action_settings.settings_for("id_av", "smoke", seed=4)
    assert (smoke.resolution_tier, smoke.num_inference_steps, smoke.chunk_size, smoke.seed) == (256, 2, 60, 4)
    assert smoke.mode == "id_av" and smoke.to_dict()["num_frames"] == 61
    assert all(e.source for e in action_settings.EMBODIMENTS.values())


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: action_settings.settings_for("dreaming_av"),
            "task='dreaming_av' is not an action task. Allowed:",
        ),
        (
            lambda: action_settings.settings_for("fd_tank"),
            "domain_name='tank' has no preset. Allowed:",
        ),
        (
            lambda: action_settings.settings_for("policy_av"),
            "the published one (nvidia/Cosmos3-Nano-Policy-DROID)",
        ),
        (
            lambda: action_settings.settings_for("fd_av", "huge"),
            "PRESET='huge' is not a preset. Allowed: 'smoke', 'draft', 'published'",
        ),
        (
            lambda: action_settings.settings_for("fd_av", chunk_size=10),
            "chunk_size=10 gives 11 frames",
        ),
        (
            lambda: action_settings.settings_for("fd_av", num_frames=60),
            "num_frames must be 61",
        ),
        (
            lambda: action_settings.settings_for("fd_av", view_point="top"),
            "view_point='top' is not known",
        ),
        (lambda: action_settings.settings_for("fd_av", fps=0), "fps=0 is out of range"),
        (
            lambda: action_settings.settings_for("fd_av", tier=300),
            "TIER=300 is not a resolution tier",
        ),
        (
            lambda: action_settings.settings_for("fd_av", guidance=2),
            "Unknown setting(s) ['guidance']",
        ),
    ],
)
def test_a_wrong_setting_names_the_field_and_the_allowed_values(call, message: str) -> None:
    with pytest.raises(InvalidSettingError) as err:
        call()
    assert message in str(err.value)


def test_actions_are_checked_against_the_embodiment() -> None:
    s = action_settings.settings_for("fd_av", chunk_size=8)
    good = np.zeros((8, 9), dtype=np.float64)
    assert action_settings.check_actions(good, s).dtype == np.float32
    for wrong, message in [
        (np.zeros((8, 7)), "actions have 7 columns but domain_name='av' takes 9"),
        (np.zeros((9, 9)), "actions have 9 steps but chunk_size is 8"),
        (np.zeros(9), "must be a 2-D array"),
        (np.full((8, 9), np.nan), "NaN or infinity"),
    ]:
        with pytest.raises(InvalidSettingError, match=message.replace("(", r"\(")):
            action_settings.check_actions(wrong, s)


def test_a_checkpoint_without_action_heads_or_too_narrow_ones_is_refused() -> None:
    action_settings.check_action_heads({"action_gen": True, "action_dim": 64}, widest=57)
    with pytest.raises(InvalidSettingError, match="action_gen=False"):
        action_settings.check_action_heads({"action_gen": False, "action_dim": 64})
    with pytest.raises(InvalidSettingError, match="action_dim=9 is narrower than the 10-wide"):
        action_settings.check_action_heads({"action_gen": True, "action_dim": 9}, widest=10)


def test_the_tables_are_diffusers_own() -> None:
    assert action_settings.ACTION_WIDTHS == cosmos3._EMBODIMENT_TO_RAW_ACTION_DIM
    assert action_settings.VIEW_POINTS == cosmos3._ACTION_VIEWPOINT_TEMPLATES


@pytest.mark.parametrize(
    ("task", "domain", "preset", "size"),
    [("forward_dynamics", "av", "published", (832, 480)), ("policy", "droid_lerobot", "smoke", (320, 256))],
)
def test_the_caption_is_the_one_diffusers_builds(task: str, domain: str, preset: str, size: tuple[int, int]) -> None:
    s = action_settings.settings_for(f"{action_settings.TASKS[task]}_{domain}", preset)
    want = cosmos3.Cosmos3OmniPipeline._build_action_json_prompt(
        s.prompt, view_point=s.view_point, num_frames=s.num_frames, fps=s.fps, height=size[1], width=size[0]
    )
    assert action_settings.caption(s, *size) == want
    assert json.loads(want)["resolution"] == {"H": size[1], "W": size[0]}
