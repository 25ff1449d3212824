"""run_with_diffusers.ipynb end to end on the tiny checkpoint, by papermill and by nbmake, with every output
decoded and checked; and its parameters and bad-input behaviour."""

from __future__ import annotations

import subprocess
import sys

import nbformat
import papermill
import pytest
from cookbook_tools import notebooks

from helpers.assets import notebook_path
from tests.notebook_checks import ALL_MODES, check_run, error_outputs

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
    # tools/benchmarks/first_run_all.py on one H200: tools/benchmarks/results/first_run_all_h200.json).
    inspected = papermill.inspect_notebook(str(notebook_path(NAME)))
    assert (inspected["PRESET"]["default"], inspected["MODES"]["default"]) == ('"draft"', '"t2v,i2v,t2v_sound"')
    assert inspected["SPEED"]["default"] == '"none"' and inspected["COMPARE"]["default"] == '""'
    assert "GPUS" not in inspected, "several GPUs are make_it_fast_with_diffusers.ipynb's, run only when asked"


def test_papermill_runs_every_mode_and_every_file_is_what_the_settings_ask(tmp_path):
    executed = notebooks.execute(
        NAME,
        tmp_path / "out.ipynb",
        {
            "MODEL": "tiny",
            "PRESET": "smoke",
            "MODES": "all",
            "SEED": 5,
            "OUTPUT_DIR": str(tmp_path / "media"),
            "COMPARE": "smoke",
            "PROGRESS": False,
        },
    )
    assert error_outputs(executed) == []
    run_dir = notebooks.run_folder_from(executed)
    assert run_dir.parent == tmp_path / "media"
    # The cleanup cell let go of every reference to the pipeline (form, comparison, output history).
    assert notebooks.run_info(executed)["pipeline_released"] is True
    check_run(run_dir, ALL_MODES, "smoke", 5, compared=("smoke",), shifts=True)
    # Looking inside the denoising: the estimate after the first step and after the last (smoke: 2 steps).
    assert notebooks.run_info(executed)["estimate_steps"] == ["step 1", "step 2"]
    # A second run writes a new folder and leaves the first untouched.
    before = {p: p.read_bytes() for p in run_dir.iterdir()}
    again = notebooks.run_folder_from(
        notebooks.execute(
            NAME,
            tmp_path / "again.ipynb",
            {
                "MODEL": "tiny",
                "PRESET": "smoke",
                "MODES": "t2i",
                "SEED": 5,
                "OUTPUT_DIR": str(tmp_path / "media"),
            },
        )
    )
    assert again != run_dir
    assert {p: p.read_bytes() for p in run_dir.iterdir()} == before


@pytest.mark.parametrize(
    ("speed", "switches"), [("turbo", ["compile", "sea_cache"]), ("low_vram", ["fp8_storage", "vae_tiling"])]
)
def test_diffusers_own_switches_run_as_speed_names_them(tmp_path, speed, switches):
    # `turbo` covers compile_repeated_blocks and SeaCache, `low_vram` float8 storage (before the weights move) and
    # VAE tiling; `min_vram` adds group offloading to the latter and `fast` is compilation alone.
    executed = notebooks.execute(
        NAME,
        tmp_path / "out.ipynb",
        {"MODEL": "tiny", "PRESET": "smoke", "MODES": "t2v", "SPEED": speed, "OUTPUT_DIR": str(tmp_path / "media")},
    )
    assert error_outputs(executed) == []
    manifest = check_run(notebooks.run_folder_from(executed), ["t2v"], "smoke", 0, shifts=True)
    assert manifest["info"]["switches"] == switches


# The quick tier's one notebook run end to end (scripts/test_quick.sh): two modes, sound and two images.
@pytest.mark.quick
def test_nbmake_runs_the_notebook_from_a_fresh_python3_kernel(tmp_path):
    # nbmake takes no parameters: inject them into a copy the way papermill does, then let nbmake run it.
    nb = papermill.iorw.load_notebook_node(str(notebook_path(NAME)))
    params = {
        "MODEL": "tiny",
        "PRESET": "smoke",
        "MODES": "v2v_sound,fl2v",
        "OUTPUT_DIR": str(tmp_path / "media"),
    }
    nbformat.write(papermill.parameterize.parameterize_notebook(nb, params), tmp_path / NAME)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbmake", "-p", "no:cacheprovider", "-q", str(tmp_path / NAME)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "1 passed" in result.stdout
    (run_dir,) = (tmp_path / "media").iterdir()
    check_run(run_dir, ["v2v_sound", "fl2v"], "smoke", 0)


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"PRESET": "ultra"}, "Unknown preset 'ultra'. Allowed presets: 'smoke'"),
        ({"MODES": "t2v,t2x"}, "Unknown mode 't2x'"),
        ({"IMAGE": "/no/such/image.png", "MODES": "i2v"}, "Conditioning image not found: /no/such/image.png"),
        (
            {"SPEED": "ludicrous"},
            "SPEED='ludicrous' is not one of the audiovisual notebooks' speeds. Allowed: 'none', 'fast'",
        ),
        ({"GUARDRAILS": "yes"}, "GUARDRAILS='yes' is not allowed. Allowed values: 'auto', 'on', 'off'"),
        ({"TIER": "1080p"}, "Unknown resolution tier '1080p'. Allowed tiers: '256p', '480p', '720p'"),
        ({"VIDEO": __file__}, "VIDEO="),  # not a video: named before the model loads
        ({"FIRST_LAST": "only-one.png"}, "FIRST_LAST='only-one.png' must name two images"),
        ({"MODEL": "/no/such/checkpoint", "GUARDRAILS": "auto"}, "MODEL='/no/such/checkpoint' is written as a path"),
        # The default Hub id on a machine without CUDA: refused in the set-up cell, before any download.
        ({"MODEL": "nvidia/Cosmos3-Nano"}, 'set MODEL = "tiny" and PRESET = "smoke"'),
    ],
)
def test_bad_parameters_stop_the_notebook_with_a_clear_message_and_write_nothing(tmp_path, parameters, message):
    if parameters.get("MODEL") == "nvidia/Cosmos3-Nano" and _has_cuda():
        pytest.skip("on a CUDA machine the Hub id is accepted: this case is for machines without one")
    with pytest.raises(papermill.PapermillExecutionError) as err:
        notebooks.execute(
            NAME,
            tmp_path / "out.ipynb",
            {"MODEL": "tiny", "PRESET": "smoke", "OUTPUT_DIR": str(tmp_path / "media"), **parameters},
        )
    assert message in str(err.value)
    media_files = (
        [p for p in (tmp_path / "media").rglob("*") if p.is_file() and p.name != "manifest.json"]
        if (tmp_path / "media").exists()
        else []
    )
    assert media_files == []


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def test_an_output_dir_that_cannot_be_written_is_named_before_the_model_loads(tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    with pytest.raises(papermill.PapermillExecutionError) as err:
        notebooks.execute(NAME, tmp_path / "out.ipynb", {"MODEL": "tiny", "OUTPUT_DIR": str(tmp_path / "a-file" / "x")})
    assert "OUTPUT_DIR=" in str(err.value) and "cannot be written to" in str(err.value)
    assert "Loaded tiny" not in (tmp_path / "out.ipynb").read_text()


def test_misspelled_parameters_are_refused_instead_of_ignored(tmp_path):
    with pytest.raises(ValueError, match="PRESETS"):
        notebooks.execute(NAME, tmp_path / "out.ipynb", {"MODEL": "tiny", "PRESETS": "smoke"})


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
    from helpers import media
    from offline_checkpoints import ensure_tiny_checkpoint
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
