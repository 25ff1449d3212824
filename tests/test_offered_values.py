"""Every value a notebook's parameters cell offers runs that notebook, at `tiny` on this machine's CPU, or stops in its
set-up with the message that names the fix.

The values are read from the parameters cells' comments (`tests/offered.py`), so a value added to a comment without
a run here fails `test_every_offered_value_is_run_somewhere`. Each value is run one of four ways:
- by the session's run of the notebook (`SESSION`, the runs the other notebook tests read), or the audiovisual
  pair's nbmake run (`NBMAKE`);
- by a run of its own here (`VARIATIONS`: one run takes a value of several parameters at once), the whole notebook in
  this process (`execute_in_process`: the session's runs already prove it in a kernel of its own, and a kernel's
  start and imports would double a small run's time), whose files are decoded and checked against the settings those
  values give;
- where it changes only the set-up (`SET_UP`), by the notebook's set-up cells, which must accept it;
- where this machine cannot run it (`REFUSED_HERE`: a preset too large for a CPU, a GPU, guardrails), by the set-up
  cells, which must refuse it with the fix.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cookbook_tools import notebooks
from cosmos3_audiovisual.modes import parse_modes
from helpers import audiovisual_settings, speeds
from helpers.errors import CookbookError
from tests.action_checks import check_action_run
from tests.conftest import SERVER_KEY
from tests.dataset_checks import check_file
from tests.notebook_checks import (
    NBMAKE,
    QUICKSTART_TINY,
    SESSION,
    SMOKE,
    ReachedTheServer,
    check_run,
    check_tuning_run,
    error_outputs,
    execute_in_process,
    printed,
    run_setup,
)
from tests.offered import offered
from tests.post_training_checks import check_post_training_run
from tests.transfer_checks import check_transfer_run

AV_DIFFUSERS, AV_VLLM, TUNING = (*notebooks.PAIR, notebooks.TUNING)
ACTION_DIFFUSERS, ACTION_VLLM = notebooks.ACTION_PAIR
TRANSFER_DIFFUSERS, TRANSFER_VLLM = notebooks.TRANSFER_PAIR
DATASET_DIFFUSERS, DATASET_VLLM = notebooks.DATASET_PAIR
POST_DIFFUSERS, POST_VLLM = notebooks.POST_TRAINING_PAIR
# What each vLLM-Omni notebook's variation asks for by name (tests/conftest.py runs it beside the servers' other tests)
SERVED = {
    AV_VLLM: ("omni_server",),
    ACTION_VLLM: ("omni_server", "omni_server_nosound"),
    TRANSFER_VLLM: ("omni_server",),
    DATASET_VLLM: ("omni_server",),
    POST_VLLM: ("omni_server", "post_training_vllm_run"),
}
NOWHERE = "http://127.0.0.1:9"
ONE_IMAGE = str(
    Path(__file__).parent / "fixtures" / "dataset_one_image.json"
)  # a vLLM-Omni set-up that gets past its checks stops at the wait for this server

# Runs of their own: every value of a parameter that the session's run does not take, several parameters to a run.
# The audiovisual pair's vLLM-Omni twin takes the same values against the session's server, where SPEED only prints
# the server's flags; each run makes one mode, so that a run costs seconds.
_AUDIOVISUAL = [
    {"PRESET": "draft", "ASPECT_RATIO": "4:3", "SPEED": "fast", "MODES": "t2i", "LONG_CHUNKS": 0},
    {"TIER": 480, "ASPECT_RATIO": "1:1", "SPEED": "turbo", "MODES": "t2i", "LONG_CHUNKS": 0},
    {"TIER": 720, "ASPECT_RATIO": "3:4", "SPEED": "low_vram", "MODES": "t2i", "LONG_CHUNKS": 0},
    {"TIER": 256, "ASPECT_RATIO": "9:16", "SPEED": "min_vram", "MODES": "fl2v", "LONG_CHUNKS": 0},
]  # 16:9 and the default modes: the nbmake runs (`NBMAKE`)
VARIATIONS: dict[str, list[dict[str, object]]] = {
    AV_DIFFUSERS: _AUDIOVISUAL,
    AV_VLLM: _AUDIOVISUAL,
    TUNING: [
        {"SPEED": "none", "PRESET": "draft", "MODES": "t2i"},
        {"SPEED": "turbo", "TIER": 256, "MODES": "t2v"},
        {"SPEED": "fp8", "TIER": 480, "MODES": "t2i"},
        {"SPEED": "fp8_turbo", "MODES": "t2v"},
        {"SPEED": "fp8_attention", "TIER": 256, "MODES": "t2i"},
        {"SPEED": "low_vram", "TIER": 720, "MODES": "t2i"},
        {"SPEED": "min_vram", "MODES": "t2i"},
    ],
    ACTION_DIFFUSERS: [{"PRESET": "draft", "SPEED": "fast", "ROLLOUT_CHUNKS": 1}],
    ACTION_VLLM: [{"PRESET": "draft", "SPEED": "fast", "ROLLOUT_CHUNKS": 1}],
    TRANSFER_DIFFUSERS: [{"SPEED": "fast"}],
    TRANSFER_VLLM: [{"SPEED": "fast"}],
    # A dataset of one image (tests/fixtures/dataset_one_image.json, whose own preset is draft) at each value.
    DATASET_DIFFUSERS: [
        {"PRESET": "spec", "SPEED": "fast", "SPEC": ONE_IMAGE},
        {"PRESET": "draft", "SPEED": "turbo", "SPEC": ONE_IMAGE},
    ],
    DATASET_VLLM: [
        {"PRESET": "spec", "SPEED": "fast", "SPEC": ONE_IMAGE},
        {"PRESET": "draft", "SPEED": "turbo", "SPEC": ONE_IMAGE},
    ],
    # The vLLM-Omni twin serves the session's adapter (trained at smoke) at the draft size.
    POST_DIFFUSERS: [{"PRESET": "draft"}],
    POST_VLLM: [{"PRESET": "draft"}],
}
# Values that change only the set-up (where the model runs, whether guardrails load, random weights being exempt).
SET_UP: dict[str, list[object]] = {"GUARDRAILS": ["off"], "DEVICE": ["cpu"]}
# Values this machine cannot run, and the words of the refusal. A vLLM-Omni notebook is asked for a server of its own
# (BASE_URL="auto"): there the set-up knows the server would run on this CPU. A transfer's `draft` is the whole
# 121-frame clip, too long for a CPU.
_TOO_LARGE = re.escape("On a CPU use PRESET='smoke' (with any TIER)")
REFUSED_HERE: dict[tuple[str, object], str] = {
    ("PRESET", "published"): _TOO_LARGE,
    ("GUARDRAILS", "on"): "cosmos_guardrail",
    ("DEVICE", "cuda"): "no NVIDIA GPU|no CUDA GPU",
}
REFUSED_HERE_IN: dict[str, dict[tuple[str, object], str]] = {
    name: {**REFUSED_HERE, **({("PRESET", "draft"): _TOO_LARGE} if name in notebooks.TRANSFER_PAIR else {})}
    for name in notebooks.NOTEBOOKS
}


def _run_values(name: str, defaults: dict[str, object]) -> set[tuple[str, object]]:
    """(parameter, value) of every run of `name`; a run's MODES also runs each mode it lists ("all": every one)."""
    own = [SESSION[name], *([NBMAKE[name]] if name in NBMAKE else []), *VARIATIONS[name]]
    runs = [{**defaults, **SMOKE, **v} for v in own]
    ran = {(parameter, value) for run in runs for parameter, value in run.items()}
    for run in runs:
        modes = str(run.get("MODES", ""))
        ran |= {("MODES", mode) for mode in (audiovisual_settings.MODES if modes == "all" else modes.split(","))}
    return ran


@pytest.mark.parametrize("name", notebooks.NOTEBOOKS)
def test_every_offered_value_is_run_somewhere(name: str) -> None:
    """A value a parameters cell offers is run here, or refused here with its fix; and nothing here is run that the
    cell does not offer (the table follows the comments)."""
    values = offered(name)
    assert {"PRESET", "SPEED", "GUARDRAILS", "DEVICE"} <= set(values), values
    ran = _run_values(name, {parameter: choices[0] for parameter, choices in values.items()})
    missing = [
        (parameter, value)
        for parameter, choices in values.items()
        for value in choices
        if (parameter, value) not in ran
        and value not in SET_UP.get(parameter, [])
        and (parameter, value) not in REFUSED_HERE_IN[name]
    ]
    assert not missing, f"{name} offers {missing}, which no test runs"
    for run in VARIATIONS[name]:
        for parameter, value in run.items():
            if parameter in values:
                assert value in values[parameter], f"{name}: {parameter}={value!r} is run but not offered"


@pytest.mark.parametrize("name", notebooks.NOTEBOOKS)
def test_values_that_change_only_the_set_up_pass_it(name: str, tmp_path: Path, monkeypatch) -> None:
    base = {"MODEL": "tiny", "PRESET": "smoke", "OUTPUT_DIR": str(tmp_path / "media")}
    if name in SERVED:
        base["BASE_URL"] = NOWHERE
    for parameter, values in SET_UP.items():
        for value in values:
            if name in SERVED:
                with pytest.raises(ReachedTheServer):
                    run_setup(name, {**base, parameter: value}, monkeypatch)
            else:
                namespace = run_setup(name, {**base, parameter: value}, monkeypatch)
                assert namespace["checkpoint"].guardrails is False  # random weights: nothing to guard


@pytest.mark.parametrize(
    ("name", "parameter", "value"), [(n, *key) for n in notebooks.NOTEBOOKS for key in REFUSED_HERE]
)
def test_values_this_machine_cannot_run_stop_in_the_set_up_naming_the_fix(
    name: str, parameter: str, value: object, tmp_path: Path, monkeypatch
) -> None:
    from diffusers.utils import is_cosmos_guardrail_available

    from local_server import launcher

    if parameter == "DEVICE" and launcher.has_nvidia_gpu():
        pytest.skip("this machine has a GPU")
    if parameter == "GUARDRAILS" and is_cosmos_guardrail_available() and name not in SERVED:
        pytest.skip("cosmos_guardrail is installed here")
    if parameter == "PRESET" and launcher.has_nvidia_gpu():
        pytest.skip("a GPU takes every preset")
    parameters = {"MODEL": "tiny", "PRESET": "smoke", "OUTPUT_DIR": str(tmp_path / "media"), parameter: value}
    if name in SERVED:
        parameters["BASE_URL"] = "auto"  # a server of the notebook's own, on this machine
    with pytest.raises(CookbookError, match=REFUSED_HERE_IN[name][(parameter, value)]) as err:
        run_setup(name, parameters, monkeypatch)
    assert parameter in str(err.value), str(err.value)  # the message names the parameter to change
    assert not (tmp_path / "media").exists() or not any((tmp_path / "media").rglob("*.mp4"))


def _variations() -> list:
    return [
        pytest.param(
            name,
            run,
            id=f"{name}-{'-'.join(map(str, run.values()))}",
            marks=[pytest.mark.served(*SERVED[name])] if name in SERVED else [],
        )
        for name in notebooks.NOTEBOOKS
        for run in VARIATIONS[name]
    ]


@pytest.mark.notebook
@pytest.mark.parametrize(("name", "variation"), _variations())
def test_each_variation_runs_the_notebook_to_its_end(request, name: str, variation: dict, tmp_path: Path) -> None:
    parameters = dict(variation)
    if name in SERVED:
        server = request.getfixturevalue("omni_server_nosound" if name == ACTION_VLLM else "omni_server")
        parameters |= {"BASE_URL": request.getfixturevalue("omni_server").base_url, "API_KEY": SERVER_KEY}
        if name == ACTION_VLLM:
            parameters["POLICY_BASE_URL"] = server.base_url
        if name == POST_VLLM:
            parameters["ADAPTER"] = str(request.getfixturevalue("post_training_vllm_run").adapter)
    executed = execute_in_process(name, tmp_path, **parameters)
    assert error_outputs(executed) == []
    run_dir = (
        None
        if name in (*notebooks.DATASET_PAIR, *notebooks.POST_TRAINING_PAIR)
        else notebooks.run_folder_from(executed)
    )
    preset = str(variation.get("PRESET", "smoke"))
    if name in (AV_DIFFUSERS, AV_VLLM):
        modes = parse_modes(str(variation.get("MODES", "t2v,i2v,t2v_sound")))
        manifest = check_run(
            run_dir,
            modes,
            preset,
            0,
            shifts=name == AV_DIFFUSERS and "t2v" in modes,
            quickstart=QUICKSTART_TINY,
            tier=int(variation.get("TIER", 0)),
            aspect_ratio=str(variation.get("ASPECT_RATIO", "")),
        )
        if name == AV_DIFFUSERS:  # each SPEED turned on the switches the one table gives it
            assert manifest["info"]["switches"] == list(speeds.switches(str(variation.get("SPEED", "none"))))
    elif name == TUNING:
        info = notebooks.run_info(executed)
        modes = str(variation["MODES"]).split(",")
        speed = str(variation["SPEED"])
        check_tuning_run(run_dir, info["timings"], modes, preset, 0, speed, tier=int(variation.get("TIER", 0)))
        if speed.startswith("fp8"):  # GPU-only switches say what they skip, and the notebook goes on
            assert "fp8_linears: " in printed(executed) and "needs a CUDA GPU" in printed(executed)
        if speed == "fp8_turbo":  # the step cache's count in the run's table: at 2 steps it computes both, each twice
            assert [row["decoder passes"] for row in info["timings"]] == ["4 of 4"], info["timings"]
    elif name in notebooks.ACTION_PAIR:
        check_action_run(run_dir, preset, 0, int(variation["ROLLOUT_CHUNKS"]))
    elif name in notebooks.POST_TRAINING_PAIR:  # the comparison's videos at the draft size, and the trained adapter
        backend = "diffusers" if name == POST_DIFFUSERS else "vllm_omni"
        (run_dir,) = (tmp_path / "media").glob(f"{backend}-*")
        check_post_training_run(run_dir, str(variation["PRESET"]))
    elif name in notebooks.DATASET_PAIR:  # one image at the draft preset (the spec's own, or PRESET's)
        folder = tmp_path / "media" / "one-image"
        [row] = [json.loads(line) for line in (folder / "images" / "metadata.jsonl").read_text().splitlines()]
        assert (row["settings"]["preset"], row["settings"]["num_inference_steps"]) == ("draft", 20), row
        check_file(folder / "images" / row["file_name"], row)
    else:
        check_transfer_run(run_dir, preset, 0, (320, 192, 9))
