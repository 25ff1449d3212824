"""run_with_diffusers.ipynb end to end on the tiny checkpoint, with every output decoded and checked: the session's
papermill run (every mode), the SPEED switches, the quick tier's nbmake run, and the lesson cells outside the cookbook.
Bad input is tests/test_refusals.py's."""

from __future__ import annotations

from pathlib import Path

import papermill
import pytest

from checkpoints import random_weights
from cookbook_tools import notebooks
from helpers.assets import notebook_path
from tests.notebook_checks import (
    ALL_MODES,
    NBMAKE,
    SMOKE,
    check_nbmake_run,
    check_run,
    error_outputs,
    printed,
    run_nbmake,
)

NAME = "run_with_diffusers.ipynb"
TEST_PARAMETERS = {
    "MODEL",
    "PRESET",
    "TIER",
    "ASPECT_RATIO",
    "SPEED",
    "SEED",
    "MODES",
    "OUTPUT_DIR",
    "IMAGE",
    "VIDEO",
    "GUARDRAILS",
    "DEVICE",
    "DISTILLED_MODEL",
    "COMPARE",
    "PROGRESS",
    "KEEP_LOADED",
}

pytestmark = pytest.mark.notebook


def test_parameters_used_by_tests_and_docs_exist_in_the_notebook():
    # papermill only warns on a misspelled parameter and runs with the default, so check names explicitly.
    assert TEST_PARAMETERS <= notebooks.parameter_names(NAME)
    inspected = papermill.inspect_notebook(str(notebook_path(NAME)))
    assert inspected["MODEL"]["default"] == '"nvidia/Cosmos3-Nano"'
    assert all(p["help"] for p in inspected.values()), "every parameter documents itself with a comment"


def test_a_first_run_all_is_cheap_a_draft_of_three_modes_on_one_gpu():
    # The whole tour is one parameter away (MODES="all"); the defaults finish in minutes on one GPU (measured by
    # support/benchmarks/first_run_all.py on one H200: support/benchmarks/results/first_run_all_h200.json).
    inspected = papermill.inspect_notebook(str(notebook_path(NAME)))
    assert (inspected["PRESET"]["default"], inspected["MODES"]["default"]) == ('"draft"', '"t2v,i2v,t2v_sound"')
    assert inspected["SPEED"]["default"] == '"none"' and inspected["COMPARE"]["default"] == '""'
    assert "GPUS" not in inspected, "several GPUs are make_it_fast_with_diffusers.ipynb's, run only when asked"


def test_papermill_runs_every_mode_and_every_file_is_what_the_settings_ask(audiovisual_diffusers_run: Path) -> None:
    executed = audiovisual_diffusers_run
    assert error_outputs(executed) == []
    # The cleanup cell let go of every reference to the pipeline (form, comparison, output history).
    assert notebooks.run_info(executed)["pipeline_released"] is True
    check_run(
        notebooks.run_folder_from(executed),
        ALL_MODES,
        "smoke",
        0,
        compared=("smoke",),
        shifts=True,
        four_step="tiny-distilled",
        long_chunks=3,  # the default LONG_CHUNKS
    )
    # Looking inside the denoising: the estimate after the first step and after the last (smoke: 2 steps).
    assert notebooks.run_info(executed)["estimate_steps"] == ["step 1", "step 2"]
    # The 4-step section ran the distilled pipeline on the checkpoint's own noise levels, not a scheduler of ours.
    sigmas = random_weights.published()["variants"]["distilled"]["modular"]["distilled_sigmas"]
    assert f"tiny-distilled: FlowMatchEulerDiscreteScheduler at {sigmas}" in printed(executed)


def test_the_fp8_revisions_format_runs_through_the_notebook_as_published(tmp_path):
    """`tiny-fp8`, a ModelOpt FP8 checkpoint in the `@fp8` revisions' format: the quickstart turns on ModelOpt's
    checkpointing, `from_pretrained` restores the FP8 layers, and every call runs the checkpoint's schedule (on a CPU,
    two steps: both weight-only)."""
    executed = notebooks.execute(
        NAME,
        tmp_path / "out.ipynb",
        {
            "MODEL": "tiny-fp8",
            "PRESET": "smoke",
            "MODES": "t2v_sound,t2i",
            "LONG_CHUNKS": 0,
            "OUTPUT_DIR": str(tmp_path / "media"),
        },
    )
    assert error_outputs(executed) == []
    manifest = check_run(notebooks.run_folder_from(executed), ["t2v_sound", "t2i"], "smoke", 0)
    assert manifest["info"]["fp8"] is True


# The quick tier's one notebook run end to end (scripts/test_quick.sh), as nbmake runs a notebook from a fresh
# python3 kernel: the default modes (sound and an image) and the long video, at 16:9 (`NBMAKE`).
@pytest.mark.quick
def test_nbmake_runs_the_notebook_from_a_fresh_python3_kernel(tmp_path: Path) -> None:
    media_dir = tmp_path / "media"
    run_nbmake(NAME, {**SMOKE, **NBMAKE[NAME], "OUTPUT_DIR": str(media_dir)}, tmp_path)
    check_nbmake_run(NAME, media_dir)


# The call once more, as a reader would write it after pasting the two cells: a settings object of their own, sound.
CALL_OUTSIDE = """
import json, types
s = types.SimpleNamespace(
    num_frames=9, height=64, width=96, fps=24, num_inference_steps=2, guidance_scale=6.0, flow_shift=10.0, seed=0
)
out = generate(s, "A red ball rolls across a wooden floor.", "blurry", enable_sound=True)
export_to_video(list(out.video), f"{RUN_DIR}/call.mp4", fps=24)
print("RESULT " + json.dumps({"video": list(out.video.shape), "sound": list(out.sound.shape)}))
"""


@pytest.mark.slow
def test_the_quickstart_and_the_call_run_pasted_into_a_python_file_without_the_cookbook(tmp_path, _isolated_cache):
    from checkpoints.random_weights import ensure_tiny_checkpoint
    from helpers import media
    from tests.lesson_cells import run_outside_the_cookbook

    variables = {
        "MODEL": str(ensure_tiny_checkpoint()),
        "DEVICE": "cpu",
        "SAFETY_CHECKER": False,
        "SPEED": "none",
        "RUN_DIR": str(tmp_path),
    }
    result = run_outside_the_cookbook(notebook_path(NAME), variables, CALL_OUTSIDE)
    quickstart = media.probe(tmp_path / "quickstart.mp4")  # the literal call's smoke size on a CPU
    assert (quickstart.width, quickstart.height, quickstart.num_frames, quickstart.fps) == (160, 96, 17, 24)
    assert result["video"] == [9, 64, 96, 3] and 2 in result["sound"], result  # frames; stereo sound
    call = media.probe(tmp_path / "call.mp4")
    assert (call.width, call.height, call.num_frames) == (96, 64, 9)
    assert media.read_frames(tmp_path / "call.mp4").std() > 1  # pictures, not a blank file
