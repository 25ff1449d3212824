"""Bad input is refused where it is checked: in each notebook's set-up, before a model loads or a server starts.

Every refusal runs the notebook's own set-up cells in this process (`notebook_checks.run_setup`), so each case costs
what its check costs, not a kernel's start. One bad-parameter run per notebook, in a fresh kernel, shows the refusal
stops a real "Run All" there: nothing loaded, no server started, nothing written.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import papermill
import pytest

from cookbook_tools import notebooks
from helpers.errors import CookbookError, InvalidSettingError, MediaError
from tests.notebook_checks import ReachedTheServer, execute_in_process, media_files, printed, run_setup

AV_DIFFUSERS, AV_VLLM, TUNING = (*notebooks.PAIR, notebooks.TUNING)
ACTION_DIFFUSERS, ACTION_VLLM = notebooks.ACTION_PAIR
TRANSFER_DIFFUSERS, TRANSFER_VLLM = notebooks.TRANSFER_PAIR
VLLM = {AV_VLLM, ACTION_VLLM, TRANSFER_VLLM, notebooks.DATASET_PAIR[1], notebooks.POST_TRAINING_PAIR[1]}
NOWHERE = "http://127.0.0.1:9"  # a vLLM-Omni set-up that got past its checks stops at the wait for this server


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _parameters(name: str, folder: Path, **changes: object) -> dict[str, object]:
    base: dict[str, object] = {"MODEL": "tiny", "PRESET": "smoke", "OUTPUT_DIR": str(folder / "media")}
    if name in VLLM:
        base["BASE_URL"] = NOWHERE
    return {**base, **changes}


CASES = [
    (AV_DIFFUSERS, {"PRESET": "ultra"}, "PRESET='ultra' is not a preset. Allowed: 'smoke', 'draft', 'published'"),
    (AV_DIFFUSERS, {"MODES": "t2v,t2x"}, "Unknown mode 't2x'"),
    (AV_DIFFUSERS, {"IMAGE": "/no/such/image.png", "MODES": "i2v"}, "Conditioning image not found: /no/such/image.png"),
    (AV_DIFFUSERS, {"SPEED": "ludicrous"}, "SPEED='ludicrous' is not one of this notebook's speeds. Allowed: 'none'"),
    (AV_DIFFUSERS, {"SPEED": "fp8"}, "'fp8' is offered by the tuning notebook"),
    (AV_DIFFUSERS, {"GUARDRAILS": "yes"}, "GUARDRAILS='yes' is not allowed. Allowed values: 'auto', 'on', 'off'"),
    (AV_DIFFUSERS, {"TIER": 1080}, "TIER=1080 is not a resolution tier. Allowed: 256, 480, 720"),
    (AV_DIFFUSERS, {"VIDEO": __file__}, "VIDEO="),  # not a video
    (AV_DIFFUSERS, {"FIRST_LAST": "only-one.png"}, "FIRST_LAST='only-one.png' must name two images"),
    (AV_DIFFUSERS, {"MODEL": "/no/such/checkpoint"}, "MODEL='/no/such/checkpoint' is written as a path"),
    (AV_DIFFUSERS, {"MODEL": "tiny-distilled"}, "loads it through DISTILLED_MODEL"),
    (AV_DIFFUSERS, {"MODEL": "tiny-fp8", "PRESET": "draft"}, "has FP8 matrix products, which ModelOpt runs"),
    (AV_DIFFUSERS, {"MODEL": "tiny-distilled", "MODES": "t2i"}, "set DISTILLED_MODEL='tiny-distilled'"),
    *(
        (name, {"DISTILLED_MODEL": "tiny"}, "DISTILLED_MODEL='tiny' is not a 4-step")
        for name in (AV_DIFFUSERS, AV_VLLM)
    ),
    *(
        (
            name,
            {"DISTILLED_MODEL": "nvidia/Cosmos3-Super-Image2Video-4Step", "PRESET": "draft"},
            "DISTILLED_MODEL='nvidia/Cosmos3-Super-Image2Video-4Step' is a published Cosmos 3 checkpoint",
        )
        for name in (AV_DIFFUSERS, AV_VLLM)
    ),
    (AV_VLLM, {"IMAGE": __file__}, "IMAGE="),
    (AV_VLLM, {"GUARDRAILS": "yes"}, "GUARDRAILS='yes' is not allowed. Allowed values: 'auto', 'on', 'off'"),
    (AV_VLLM, {"SPEED": "warp"}, "SPEED='warp' is not one of this notebook's speeds"),
    (TUNING, {"SPEED": "warp"}, "SPEED='warp' is not one of this notebook's speeds"),
    *((name, {"ROLLOUT_CHUNKS": 6}, "ROLLOUT_CHUNKS=6 must be 1 to 5") for name in (ACTION_DIFFUSERS, ACTION_VLLM)),
    *(
        (
            name,
            {"LONG_CHUNKS": chunks},
            f"LONG_CHUNKS={chunks} is not a length: give 0 to skip the long video, or 2 to 8",
        )
        for name in (AV_DIFFUSERS, AV_VLLM)
        for chunks in (1, 9)
    ),
    *(
        (name, {"SPEC": "/no/such/spec.json"}, "SPEC='/no/such/spec.json' is not a file")
        for name in notebooks.DATASET_PAIR
    ),
    *(
        (name, {"MAX_IN_FLIGHT": 0}, "MAX_IN_FLIGHT=0: give a whole number of jobs")
        for name in notebooks.DATASET_PAIR[1:]
    ),
    (notebooks.DATASET_PAIR[1], {"BASE_URL": "auto,http://a:8000"}, "BASE_URL='auto,http://a:8000': give"),
    *(
        (name, {"PRESET": "huge"}, "PRESET='huge' is not a preset. Allowed: 'smoke', 'draft', 'published'")
        for name in (ACTION_DIFFUSERS, ACTION_VLLM, TRANSFER_DIFFUSERS, TRANSFER_VLLM)
    ),
    *(
        (name, {"SPEED": "turbo"}, "SPEED='turbo' is not one of this notebook's speeds. Allowed: 'none', 'fast'")
        for name in (TRANSFER_DIFFUSERS, TRANSFER_VLLM)
    ),
]


@pytest.mark.parametrize(("name", "changes", "message"), CASES)
def test_the_set_up_refuses_bad_input_naming_the_parameter_and_writes_nothing(
    name: str, changes: dict, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(CookbookError) as err:  # the cookbook's own errors: a setting, a file, a model
        run_setup(name, _parameters(name, tmp_path, **changes), monkeypatch)
    assert message in str(err.value)
    assert media_files(tmp_path / "media") == []


@pytest.mark.parametrize("name", [AV_DIFFUSERS, AV_VLLM])
def test_the_published_hub_id_on_a_machine_without_a_gpu_is_refused_before_any_download(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from local_server import launcher

    if _has_cuda() or launcher.has_nvidia_gpu():
        pytest.skip("with a GPU the Hub id is accepted: this case is for machines without one")
    # BASE_URL="auto": a server of the notebook's own would be started for it, and is refused instead.
    parameters = _parameters(
        name, tmp_path, MODEL="nvidia/Cosmos3-Nano", **({"BASE_URL": "auto"} if name in VLLM else {})
    )
    with pytest.raises(CookbookError, match='set MODEL = "tiny" and PRESET = "smoke"'):
        run_setup(name, parameters, monkeypatch)


def test_an_output_dir_that_cannot_be_written_is_named_before_the_model_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    with pytest.raises(MediaError, match="cannot be written to") as err:
        run_setup(
            AV_DIFFUSERS, _parameters(AV_DIFFUSERS, tmp_path, OUTPUT_DIR=str(tmp_path / "a-file" / "x")), monkeypatch
        )
    assert "OUTPUT_DIR=" in str(err.value)


def test_a_checkpoint_without_action_heads_is_refused_at_set_up_naming_the_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from checkpoints.random_weights import ensure_tiny_checkpoint

    folder = tmp_path / "no-action-heads"
    shutil.copytree(ensure_tiny_checkpoint(), folder)
    config = folder / "transformer" / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "action_gen": False}))
    changes = {"MODEL": str(folder), "POLICY_MODEL": "tiny-nosound", "GUARDRAILS": "off"}
    with pytest.raises(InvalidSettingError, match="its transformer config has action_gen=False"):
        run_setup(ACTION_DIFFUSERS, _parameters(ACTION_DIFFUSERS, tmp_path, **changes), monkeypatch)


@pytest.mark.parametrize("name", notebooks.NOTEBOOKS)
def test_good_input_passes_the_set_up(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The other side of every case above: the same cells with the smoke parameters refuse nothing. A vLLM-Omni
    # set-up goes on to wait for its server; a Diffusers one ends with the values its lesson cells read.
    if name in VLLM:
        with pytest.raises(ReachedTheServer):
            run_setup(name, _parameters(name, tmp_path), monkeypatch)
    else:
        namespace = run_setup(name, _parameters(name, tmp_path), monkeypatch)
        assert Path(namespace["MODEL"] if name != TUNING else namespace["checkpoint"].path).is_dir()


# One per notebook: the wrong preset stops "Run All" in the set-up cell. The audiovisual Diffusers notebook's runs in a
# kernel of its own, where papermill reports the cell's error; the others run their cells in order in this process
# (`execute_in_process`), which stops at the failing cell as a kernel's "Run All" does, without a kernel's start and
# imports for each.
IN_A_KERNEL = AV_DIFFUSERS
REFUSAL = "PRESET='huge' is not a preset"


@pytest.mark.notebook
@pytest.mark.parametrize("name", notebooks.NOTEBOOKS)
def test_a_bad_parameter_stops_run_all_before_loading_or_starting_a_server(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OMNI_BASE_URL", raising=False)  # BASE_URL="auto" would mean a server of the notebook's own
    parameters = {"MODEL": "tiny", "PRESET": "huge", "PROGRESS": False, "OUTPUT_DIR": str(tmp_path / "media")}
    if name == IN_A_KERNEL:
        with pytest.raises(papermill.PapermillExecutionError, match=re.escape(REFUSAL)):
            notebooks.execute(name, tmp_path / Path(name).name, parameters)
    else:
        with pytest.raises(InvalidSettingError, match=re.escape(REFUSAL)):
            execute_in_process(name, tmp_path, **parameters)
    output = printed(tmp_path / Path(name).name)
    assert "Connected to" not in output and "Loaded" not in output, output[-2000:]
    assert media_files(tmp_path / "media") == []


def test_a_misspelled_parameter_is_refused_instead_of_ignored(tmp_path: Path) -> None:
    # papermill only warns about a name the notebook does not have, and runs with the default.
    with pytest.raises(InvalidSettingError, match="PRESETS"):
        notebooks.execute(AV_DIFFUSERS, tmp_path / "out.ipynb", {"MODEL": "tiny", "PRESETS": "smoke"})
