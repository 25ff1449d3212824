"""The Diffusers route on several processes (`tuning.several_gpus`), on the CPU over gloo with the
tiny checkpoint.

The parallel runs are real: torchrun starts the processes, each loads the tiny checkpoint with `from_pretrained`, and
they talk over torch.distributed. Their frames and sound are compared with one process making the notebook's call.

Tolerance: everything runs in float32 on the CPU. Splitting the work changes only which rows each matrix product and
attention call sees; measured, the parallel frames and sound equal a one-thread process's bit for bit. torchrun gives
each process one thread and this process has more, which blocks the CPU's matrix products differently: 8e-7 on
frames, 2e-7 on sound (and about 1e-6 with compiled layers). 1e-5 on frames in [0, 1] allows for that and is still
400 times finer than one 8-bit level.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from cosmos3_audiovisual import diffusers_pipe, modes
from helpers import audiovisual_settings, media, prompts, runs
from helpers.errors import InvalidSettingError
from tests import calls
from tuning.several_gpus import launch, layout
from tuning.several_gpus.request import Request
from tuning.several_gpus.split_decode import row_split

REPO = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).with_name("parallel_worker.py")
TOLERANCE = 1e-5
MODES = ("t2v", "t2v_sound")
STEPS = 3  # as tests/parallel_worker.py: step 0 records the text cache, steps 1 and 2 replay it


# --- the layout, the command and the advice: no processes --------------------------------------------------------


@pytest.mark.parametrize(
    ("gpus", "cfg", "context", "want"),
    [
        (1, None, None, (1, 1)),
        (2, None, None, (2, 1)),
        (4, None, None, (2, 2)),
        (8, None, None, (2, 4)),
        (3, None, None, (1, 3)),
        (4, 1, None, (1, 4)),
        (4, None, 4, (1, 4)),
    ],
)
def test_gpus_are_shared_out_cfg_first_then_context(gpus, cfg, context, want):
    degrees = layout.degrees_for(gpus, cfg, context)
    assert (degrees.cfg, degrees.context) == want and degrees.world_size == gpus


@pytest.mark.parametrize(
    ("gpus", "cfg", "context", "message"),
    [(0, None, None, "GPUS=0"), (2, 4, None, "cfg=4.*two passes"), (4, 2, 4, "cfg=2 x context=4 is 8.*GPUS=4")],
)
def test_impossible_degrees_say_what_to_use(gpus, cfg, context, message):
    with pytest.raises(InvalidSettingError, match=message):
        layout.degrees_for(gpus, cfg, context)


def test_the_torchrun_command_is_an_argument_list_the_runner_reads_back():
    request = Request(model="nano-random", gpus=4, preset="published", speed="fast", tiers="720")
    command = launch.torchrun_command(request)
    assert command[: command.index("-m")] == [*launch.torchrun(), "--standalone", "--nproc-per-node", "4"]
    flags = command[command.index("tuning.several_gpus") + 1 :]
    assert flags == [
        "--model",
        "nano-random",
        "--gpus",
        "4",
        "--modes",
        "t2v",
        "--preset",
        "published",
        "--tiers",
        "720",
        "--speed",
        "fast",
        "--seed",
        "0",
        "--output-dir",
        "outputs",
    ]
    assert Request.parse(flags) == request


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"speed": "turbo"}, "SPEED='turbo' does not run on several GPUs"),
        ({"decode": "tiles"}, "decode='tiles'"),
        ({"tiers": "1080"}, "TIER=1080 is not a resolution tier"),
        ({"tiers": "480p"}, "TIER='480p': give tiers as numbers"),
        ({"modes": "t2v,x"}, "Unknown mode 'x'"),
    ],
)
def test_a_bad_request_fails_before_any_process_starts(change, message):
    with pytest.raises(InvalidSettingError, match=message):
        launch.torchrun_command(Request(gpus=2, **change))


def test_a_machine_without_enough_gpus_gets_advice_not_an_exception(monkeypatch: pytest.MonkeyPatch):
    import torch

    tiny = launch.gpu_shortfall(Request(model="tiny", gpus=2, device="cpu"))
    assert "no CUDA GPU" in tiny and "over gloo" in tiny  # the notebook prints this; the command still runs here
    on_cpu = launch.gpu_shortfall(Request(model="nvidia/Cosmos3-Nano", gpus=2, device="cpu"))
    assert "GPUS=2" in on_cpu and "no CUDA GPU" in on_cpu and "MODEL='tiny'" in on_cpu
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    one_gpu = launch.gpu_shortfall(Request(gpus=4, device="cuda"))
    assert "GPUS=4" in one_gpu and "has 1 (NVIDIA H200)" in one_gpu and "GPUS=1" in one_gpu
    assert launch.gpu_shortfall(Request(gpus=1, device="cuda")) is None


def test_rows_are_shared_out_evenly_and_too_few_rows_are_refused():
    assert row_split(45, 2) == [23, 22] and row_split(45, 4) == [12, 11, 11, 11] and row_split(6, 4) == [2, 2, 1, 1]
    with pytest.raises(InvalidSettingError, match="3 latent rows cannot be split across 4 ranks"):
        row_split(3, 4)


# --- one process: the reference -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reference(tiny_pipe):
    """The notebook's call in this process, for each mode: `pipelines.generate`, as the runner makes it."""
    pipe, _ = tiny_pipe
    outputs = {}
    for mode in MODES:
        s = audiovisual_settings.settings_for(mode, "smoke", num_inference_steps=STEPS, seed=0)
        outputs[mode] = calls.generate(pipe, s, prompts.prompt_text(s), prompts.negative_prompt())
    return outputs


def _torchrun(processes: int, *args: str) -> None:
    command = [*launch.torchrun(), "--standalone", "--nproc-per-node", str(processes), *args]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env={**os.environ}, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.fixture(scope="module")
def parallel_outputs(tmp_path_factory: pytest.TempPathFactory, _isolated_cache):
    """Rank 0's outputs of tests/parallel_worker.py on 2 processes (CFG 2, context 2) and 4 (CFG 2 x context 2)."""
    out = tmp_path_factory.mktemp("parallel")
    _torchrun(2, str(WORKER), str(out))
    _torchrun(4, str(WORKER), str(out))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("degrees", ["2x1", "1x2", "2x2"])
def test_parallel_processes_make_the_frames_and_sound_of_one(parallel_outputs, reference, degrees, mode):
    got = np.load(parallel_outputs / f"{degrees}-{mode}.npz")
    want = reference[mode]
    assert got["video"].shape == want.video.shape
    np.testing.assert_allclose(got["video"], want.video, rtol=0, atol=TOLERANCE)
    if want.sound is not None:
        np.testing.assert_allclose(got["sound"], want.sound.float().numpy(), rtol=0, atol=TOLERANCE)
    assert float(got["deviation"]) == 0.0  # every rank ended with rank 0's latents, bit for bit


# --- the runner end to end: what it writes is what the notebook writes ---------------------------------------------


def _notebook_run(pipe, checkpoint, output_dir: Path) -> tuple[runs.Run, dict[str, np.ndarray]]:
    """The Diffusers notebook's cells for these modes at the smoke preset, SPEED="none", and the 8-bit frames each
    video file was encoded from."""
    run = runs.Run.create(output_dir, backend="diffusers", model="tiny")
    run.sample_rate = diffusers_pipe.sample_rate(pipe)
    run.note(**checkpoint.info(), speed="none", switches=[])
    frames = {}
    for mode, s in modes.settings_for_modes(",".join(MODES), "smoke", seed=0).items():
        with run.generation(s) as gen:
            output = calls.generate(pipe, s, prompts.prompt_text(s), prompts.negative_prompt())
            gen.save(output)
        frames[f"{mode}.mp4"] = media.to_uint8_frames(output.video)
    return run, frames


def per_frame_mean(diff: np.ndarray) -> np.ndarray:
    return diff.reshape(diff.shape[0], -1).mean(axis=1)


@pytest.mark.slow
def test_the_runner_writes_the_files_and_manifest_the_notebook_writes(tiny_pipe, tmp_path, _isolated_cache):
    pipe, checkpoint = tiny_pipe
    request = Request(
        model="tiny",
        gpus=2,
        modes=",".join(MODES),
        preset="smoke",
        speed="none",
        output_dir=str(tmp_path / "parallel"),
        device="cpu",
    )
    lines: list[str] = []
    run_dir = launch.run_parallel(request, echo=lines.append)
    notebook, encoded_from = _notebook_run(pipe, checkpoint, tmp_path / "notebook")

    assert any(line == f"run folder: {run_dir}" for line in lines)
    got, want = (json.loads((path / runs.MANIFEST_NAME).read_text()) for path in (run_dir, notebook.path))
    parallel_info = {
        "gpus": 0,
        "processes": 2,
        "cfg_degree": 2,
        "context_degree": 1,
        "process_group": "gloo",
        "vae_decode": "split",
    }
    assert got["info"] == {**want["info"], **parallel_info}
    assert got["backend"] == want["backend"] == "diffusers" and got["model"] == want["model"]
    assert len(got["outputs"]) == len(want["outputs"]) == 3  # t2v.mp4, t2v_sound.mp4, t2v_sound.wav
    for g, w in zip(got["outputs"], want["outputs"], strict=True):
        assert g.pop("ranks_latent_deviation") == 0.0
        # The times, and the files' hashes: the frames agree up to float noise, judged below, not byte for byte.
        timing = ("seconds", "peak_memory_gib", "sha256")
        assert {k: v for k, v in g.items() if k not in timing} == {k: v for k, v in w.items() if k not in timing}
        ours, theirs = run_dir / g["path"], notebook.path / w["path"]
        assert dataclasses.replace(media.probe(ours), path="") == dataclasses.replace(media.probe(theirs), path="")
        # Both files are written from frames equal up to float noise (the test above), which can tip a value to the
        # next 8-bit level now and then, and a lossy encoder answers such a step with other choices for its whole
        # block: how far the decoded pictures move depends on the machine's arithmetic, not on the runner. The
        # scale to judge them by is the encoder's own error on the same frames, measured here: the random-weight
        # frames are noise, which H.264 codes coarsely (about 21 levels of 255 on average, against about 33 between
        # two seeds). Each decoded frame must agree with the notebook's far more closely than the encoder agrees
        # with its input, so a wrong frame fails however few pixels the float noise tipped elsewhere. The WAV's
        # 16-bit sound agrees to within a step; AAC is judged as the video is, its own error the scale.
        if g["kind"] == "video":
            ours_frames, theirs_frames = (media.read_frames(p).astype(int) for p in (ours, theirs))
            codec = per_frame_mean(np.abs(theirs_frames - encoded_from[w["path"]].astype(int)))
            diff = per_frame_mean(np.abs(ours_frames - theirs_frames))
            assert (diff < 0.1 * codec).all(), (diff.round(3), codec.round(3))
        if g["has_audio"] and g["path"].endswith(".wav"):
            np.testing.assert_allclose(media.read_audio(ours)[0], media.read_audio(theirs)[0], rtol=0, atol=2 / 2**15)
        elif g["has_audio"]:
            wav = media.read_audio(theirs.with_suffix(".wav"))[0]
            coded = media.read_audio(theirs)[0]
            codec = np.abs(coded[:, : wav.shape[1]] - wav)
            diff = np.abs(media.read_audio(ours)[0] - coded)
            assert diff.max() <= codec.max() and diff.mean() <= 0.1 * codec.mean(), (diff.max(), diff.mean(), codec)


@pytest.mark.slow
def test_a_failed_run_raises_with_the_end_of_its_output(tmp_path, _isolated_cache):
    request = Request(
        model=str(tmp_path / "no-such-checkpoint"),
        gpus=2,
        preset="smoke",
        speed="none",
        output_dir=str(tmp_path),
        device="cpu",
    )
    cause = "rank 0: ModelUnavailableError: MODEL=.*no-such-checkpoint' is written as a path, and there is no folder"
    with pytest.raises(launch.ParallelRunError, match=f"(?s)exited with 1.*{cause}"):
        launch.run_parallel(request, echo=lambda line: None)


def test_the_runner_refuses_to_start_outside_torchrun(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(InvalidSettingError, match="started by torchrun"):
        layout.join(layout.Degrees(2, 1), "cpu")
