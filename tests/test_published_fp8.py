"""The published FP8 schedule (`support/checkpoints/published.json`, section `fp8`) is the one the pinned diffusers
applies to an `@fp8` checkpoint: weight-only FP8 (W8A16) for the first and last three denoising steps, FP8 matrix
products (W8A8) between them, the text tower always W8A16. A diffusers upgrade that changes it fails here."""

from __future__ import annotations

from typing import Any

from diffusers.pipelines.cosmos import mixed_precision

from checkpoints import random_weights

PUBLISHED = random_weights.published()["fp8"]["quantization_config"]


def _steps(num_steps: int, quantization_config: dict[str, Any] = PUBLISHED, **call: Any) -> list[str]:
    """What each step of a `pipe(...)` call with these `mixed_precision_*` arguments runs."""
    config = mixed_precision.Cosmos3MixedPrecisionConfig.resolve(quantization_config=quantization_config, **call)
    return [config.precision_name(step, num_steps) for step in range(num_steps)]


def test_the_published_policy_is_the_one_diffusers_names_for_the_fp8_revisions() -> None:
    assert PUBLISHED["runtime"]["diffusion_step_policy"] == mixed_precision.FIRST_LAST_N_FP8_POLICY


def test_nvidias_35_steps_run_three_weight_only_steps_at_each_end_and_fp8_between() -> None:
    steps = _steps(35)
    assert steps[:3] == steps[-3:] == ["W8A16"] * 3 and set(steps[3:-3]) == {"W8A8"}
    config = mixed_precision.Cosmos3MixedPrecisionConfig.resolve(quantization_config=PUBLISHED)
    assert config.reasoner_policy == "high_precision"  # the text tower: W8A16 at every step


def test_the_call_can_move_or_turn_off_the_schedule() -> None:
    assert _steps(1) == ["W8A8"]  # one step keeps the checkpoint's own FP8 path, as vLLM-Omni does
    assert _steps(4) == ["W8A16"] * 4  # the first and last three overlap
    assert _steps(6, mixed_precision_first_steps=1, mixed_precision_last_steps=0) == ["W8A16"] + ["W8A8"] * 5
    assert _steps(6, mixed_precision_format="none") == ["base"] * 6  # the checkpoint's own forward throughout


def test_a_checkpoint_without_a_policy_runs_its_own_fp8_path_at_every_step() -> None:
    # The distilled 4-step FP8 checkpoints carry no `runtime`; "fp8" asks for the schedule anyway.
    distilled = {k: v for k, v in PUBLISHED.items() if k != "runtime"}
    assert _steps(4, distilled) == ["base"] * 4
    assert _steps(8, distilled, mixed_precision_format="fp8") == ["W8A16"] * 3 + ["W8A8"] * 2 + ["W8A16"] * 3
