"""The action pair (`cookbooks/cosmos3/generator/action/`) end to end on the tiny checkpoints, each run once per
session by papermill (tests/conftest.py): the vLLM-Omni notebook against the session's real servers, its policy on the
second one (`tiny-nosound`). Every file they write is decoded or loaded again
(`tests/action_checks.py`), and the two notebooks' videos and actions are compared with each other."""

from __future__ import annotations

import base64
import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cookbook_tools import notebooks
from cosmos3_action import action_settings, actions
from helpers import assets, media
from helpers.assets import notebook_path
from tests.action_checks import ACTION_DIFFUSERS, ACTION_VLLM, ROLLOUT_CHUNKS, check_action_run
from tests.conftest import SERVER_KEY
from tests.notebook_checks import SMOKE, mean_frame_difference, printed, sections

pytestmark = pytest.mark.notebook


def test_the_twins_mirror_each_other_and_start_with_the_quickstart() -> None:
    # Only the backend's own sections differ, and a wrong call is a wrong request on the server's side.
    vllm_only = {"## How large an action request may be", "## When a request is wrong"}
    diffusers_only = {"## When a call is wrong"}
    vllm, diffusers = sections(ACTION_VLLM), sections(ACTION_DIFFUSERS)
    assert vllm_only <= set(vllm) and diffusers_only <= set(diffusers)
    shared = [h for h in vllm if h not in vllm_only]
    assert shared == [h for h in diffusers if h not in diffusers_only]
    assert shared[:2] == ["## Parameters", "## Quickstart"]


def test_parameters_are_the_twins_plus_the_servers() -> None:
    # papermill only warns about unknown names, so the names the tests and docs use are checked here.
    extra = {"BASE_URL", "POLICY_BASE_URL", "API_KEY"}
    assert notebooks.parameter_names(ACTION_VLLM) == notebooks.parameter_names(ACTION_DIFFUSERS) | extra
    assert set(SMOKE) | {"OUTPUT_DIR", "POLICY_MODEL", "ROLLOUT_CHUNKS"} <= notebooks.parameter_names(ACTION_DIFFUSERS)


def test_diffusers_notebook_writes_every_video_action_file_and_plot(action_diffusers_run: Path) -> None:
    manifest = check_action_run(notebooks.run_folder_from(action_diffusers_run), "smoke", 0, ROLLOUT_CHUNKS)
    assert manifest["info"]["device"] == "cpu"
    output = printed(action_diffusers_run)
    # "When a call is wrong": the cookbook's own checks and diffusers' CosmosActionCondition, each naming the field.
    assert "actions have 7 columns but domain_name='av' takes 9" in output
    assert "domain_name='tank' has no preset" in output
    assert "num_frames must be 61" in output
    assert "`raw_actions` width (7) does not match the expected action width (9)" in output


def test_vllm_notebook_against_the_real_server_writes_the_same_files(action_vllm_run: Path) -> None:
    check_action_run(notebooks.run_folder_from(action_vllm_run), "smoke", 0, ROLLOUT_CHUNKS)
    output = printed(action_vllm_run)
    assert "HTTP 400: Part exceeded maximum size of 1024KB." in output  # the 20,000-step action field
    # The room limits refuse the unknown embodiment at once (vLLM-Omni alone would fail the job with a 500); `act`
    # raises the answer's message.
    assert "HTTP 400: " in output and "domain_name='tank' is not an embodiment vLLM-Omni 0.30.0 knows" in output
    assert "left http://127.0.0.1:" in output and "local server stopped" not in output  # the session's servers


def _frames(run: Path, name: str) -> np.ndarray:
    return media.read_frames(run / f"{name}.mp4").astype(np.int16)


# Measured on the tiny checkpoints with the smoke preset: with the same seed, the two notebooks' forward-dynamics
# videos differ by under 0.1 levels of 255 (the server computes in bfloat16 and encodes its own H.264) and their
# predicted actions by about 1e-6, while changing only the seed moves the video by 18 to 25 levels and the actions
# by 0.7 (the policy's) to 6 (the tiny transformer's actions are unscaled noise). Agreement is required within a
# fortieth of the seed's effect on the frames and a thousandth on the actions: a backend that drew its noise in
# another order, or padded the canvas the other did not, is as far apart as another seed.
FRAME_FRACTION, ACTION_FRACTION = 1 / 40, 1 / 1000
# The arm's later chunks start from each backend's own decoded frame: measured apart by 2.9 to 3.8 levels (chunks 2
# to 5, recipe 4) against about 22 for a seed; a third of a seed's effect is the bound.
DRIFT_FRACTION = 1 / 3


def _seed_one(pipe: object, folder: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, np.ndarray]:
    """What the Diffusers notebook's own `act` makes with SEED=1 for the files the parity test reads, called here on
    the inputs the notebook gives it (the benchmark's task list, which the next test shows makes the notebook's
    files): videos written by the notebook's writer and decoded, actions as the notebook writes them."""
    monkeypatch.syspath_prepend(str(notebook_path(ACTION_DIFFUSERS).parents[4] / "support" / "benchmarks"))
    import action_tasks

    from tuning import notebook_calls
    from tuning.pipelines import load_pipeline

    tasks = {name: rest for name, *rest in action_tasks.tasks("smoke")}
    made: dict[str, np.ndarray] = {}

    def act(notebook_act: Any, task: str, name: str, given: np.ndarray | None = None) -> np.ndarray | None:
        s, picture, bundled = tasks[task]
        s = dataclasses.replace(s, seed=1)
        given = bundled if given is None else given
        video, predicted = notebook_act(s, s.prompt, action_tasks.fitted(s, picture), action=given)
        made[name] = media.read_frames(media.write_video(folder / f"{name}.mp4", video, s.fps)).astype(np.int16)
        return predicted

    world_model = notebook_calls.define(ACTION_DIFFUSERS, pipe=pipe)["act"]
    bundled = assets.assets_dir("action")
    act(world_model, "fd_av", "fd_av_left", actions.read(bundled / "trajectories" / "av_left.npy")[0])
    act(world_model, "fd_droid", "fd_droid_chunk0")
    umi = action_settings.settings_for("fd_umi", "smoke", seed=1)
    chunk = actions.UMI_NORMALIZATION.normalize(actions.read(bundled / "trajectories" / "umi_cup.npy")[0][:16])
    start = action_tasks.fitted(umi, media.load_image(bundled / "images" / "umi_cup_start.png"))
    video, _ = world_model(umi, umi.prompt, start, action=chunk)
    made["fd_umi_chunk0"] = media.read_frames(media.write_video(folder / "umi.mp4", video, umi.fps)).astype(np.int16)
    made["id_av_predicted"] = act(world_model, "id_av", "id_av")
    policy = load_pipeline("tiny-nosound", device="cpu")[0]  # the policy's checkpoint, as the notebook loads it
    made["policy_droid_actions"] = actions.DROID_NORMALIZATION.denormalize(
        act(notebook_calls.define(ACTION_DIFFUSERS, pipe=policy)["act"], "policy_droid", "policy_droid_lerobot")
    )
    return made


def test_the_two_notebooks_give_the_same_videos_and_actions(
    action_diffusers_run: Path, action_vllm_run: Path, tiny_pipe, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, theirs = notebooks.run_folder_from(action_diffusers_run), notebooks.run_folder_from(action_vllm_run)
    other_seed = _seed_one(tiny_pipe[0], tmp_path, monkeypatch)
    for video in ("fd_av_left", "fd_droid_chunk0", "fd_umi_chunk0", "policy_droid_lerobot"):
        seed_effect = mean_frame_difference(_frames(ours, video), other_seed[video])
        backends = mean_frame_difference(_frames(ours, video), _frames(theirs, video))
        assert backends < FRAME_FRACTION * seed_effect, (video, backends, seed_effect)
    # Later chunks of the arm's rollout start from each backend's own decoded last frame, so they drift apart: each
    # chunk stays well inside a seed's effect, and the drift is printed for docs/action.md.
    seed_effect = mean_frame_difference(_frames(ours, "fd_droid_chunk0"), other_seed["fd_droid_chunk0"])
    drift = [
        mean_frame_difference(_frames(ours, f"fd_droid_chunk{i}"), _frames(theirs, f"fd_droid_chunk{i}"))
        for i in range(ROLLOUT_CHUNKS)
    ]
    print(f"arm rollout, backends apart per chunk: {[round(d, 2) for d in drift]} (a seed: {seed_effect:.1f})")
    assert all(d < DRIFT_FRACTION * seed_effect for d in drift), (drift, seed_effect)
    for name in ("id_av_predicted", "policy_droid_actions"):
        mine, served = (actions.read(run / f"{name}.npy")[0] for run in (ours, theirs))
        seed_effect, backends = np.abs(mine - other_seed[name]).mean(), np.abs(mine - served).mean()
        assert backends < ACTION_FRACTION * seed_effect, (name, backends, seed_effect)


def test_the_benchmark_runs_the_notebooks_act_on_what_the_notebook_gives_it(
    action_diffusers_run: Path, tiny_pipe, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # support/benchmarks/action_tasks.py times the notebook's own `act`, on its own task list: what it hands `act`
    # must make the notebook's file for the same task.
    monkeypatch.syspath_prepend(str(notebook_path(ACTION_DIFFUSERS).parents[4] / "support" / "benchmarks"))
    import action_tasks

    from tuning import notebook_calls

    name, s, picture, chunk = next(t for t in action_tasks.tasks("smoke") if t[0] == "fd_droid")
    act = notebook_calls.define(ACTION_DIFFUSERS, pipe=tiny_pipe[0])["act"]
    video, _ = act(s, s.prompt, action_tasks.fitted(s, picture), action=chunk)
    ours = media.read_frames(media.write_video(tmp_path / "act.mp4", video, s.fps))
    np.testing.assert_array_equal(ours, _frames(notebooks.run_folder_from(action_diffusers_run), "fd_droid_chunk0"))


# The lesson cells (the quickstart and `act`) pasted into a fresh Python process without the cookbook, with only the
# plain values the set-up cell defines; `act` is then called once as a reader would, with a settings object of their
# own: the DROID policy on the smoke tier, a start picture in, a video and 16 actions of 10 numbers out.
POLICY_SETTINGS = """
import base64, json, types
s = types.SimpleNamespace(
    task="policy", prompt="Pick up the cube.", domain_name="droid_lerobot", action_width=10, chunk_size=16,
    num_frames=17, fps=15, resolution_tier=256, view_point="ego_view", num_inference_steps=2, guidance_scale=1.0,
    flow_shift=5.0, seed=0,
)
"""


@pytest.mark.slow
def test_the_diffusers_lesson_cells_run_without_the_cookbook(tmp_path: Path, _isolated_cache: Path) -> None:
    from checkpoints.random_weights import ensure_tiny_checkpoint
    from tests.lesson_cells import run_outside_the_cookbook

    then = (
        POLICY_SETTINGS
        + """
from PIL import Image
picture = Image.open("assets/images/droid_pick_start.png").convert("RGB")
video, predicted = act(s, s.prompt, picture)
print("RESULT " + json.dumps({"video": list(video.shape), "action": list(predicted.shape), "std": float(video.std())}))
"""
    )
    variables = {"MODEL": str(ensure_tiny_checkpoint()), "DEVICE": "cpu", "SAFETY_CHECKER": False}
    result = run_outside_the_cookbook(notebook_path(ACTION_DIFFUSERS), {**variables, "RUN_DIR": str(tmp_path)}, then)
    quickstart = media.probe(tmp_path / "quickstart.mp4")  # the literal call: 60 car steps, 61 frames at 10 fps
    assert (quickstart.codec, quickstart.num_frames, quickstart.fps, quickstart.has_audio) == ("h264", 61, 10, False)
    assert max(quickstart.width, quickstart.height) <= 512 and quickstart.width % 16 == 0, quickstart  # tier 256
    assert media.read_frames(tmp_path / "quickstart.mp4").std() > 1  # pictures, not a blank file
    assert result["video"][-4] == 17 and result["video"][-1] == 3 and result["std"] > 0, result  # frames, RGB
    assert result["action"] == [16, 10], result
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quickstart.mp4"]  # `act` writes nothing


@pytest.mark.slow
def test_the_vllm_lesson_cells_run_without_the_cookbook(tmp_path: Path, omni_server) -> None:
    from tests.lesson_cells import run_outside_the_cookbook

    then = (
        POLICY_SETTINGS
        + """
from pathlib import Path
reference = ("start.png", Path("assets/images/droid_pick_start.png").read_bytes(), "image/png")
video, predicted, job = act(s, s.prompt, reference)
shape = [len(predicted), len(predicted[0])]
print("RESULT " + json.dumps({"video": base64.b64encode(video).decode(), "action": shape, "status": job["status"]}))
"""
    )
    variables = {"BASE_URL": omni_server.base_url, "API_KEY": SERVER_KEY, "MODEL": "tiny", "RUN_DIR": str(tmp_path)}
    result = run_outside_the_cookbook(notebook_path(ACTION_VLLM), variables, then)
    quickstart = media.probe(tmp_path / "quickstart.mp4")  # the literal job: 60 car steps, 61 frames at 10 fps
    assert (quickstart.codec, quickstart.num_frames, quickstart.fps, quickstart.has_audio) == ("h264", 61, 10, False)
    assert max(quickstart.width, quickstart.height) <= 512 and quickstart.width % 16 == 0, quickstart  # tier 256
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quickstart.mp4"]  # `act` writes nothing
    call = tmp_path / "call.mp4"
    call.write_bytes(base64.b64decode(result["video"]))
    info = media.probe(call)
    assert (info.codec, info.num_frames, round(info.fps)) == ("h264", 17, 15), info
    assert result["action"] == [16, 10] and result["status"] == "completed", result
