"""The GPU runner: every notebook on CUDA, each by papermill and by nbmake, at two sizes: the tiny checkpoint at
`smoke` and Cosmos 3 Nano's real architecture with random weights (`MODEL="nano-random"`) at `draft` with
`SPEED="fast"`. The main pair runs every mode and its quickstart (at the published 480p size with nano-random); the
tuning notebook times the cookbook's patches (compilation, the text K/V cache, FlashAttention-4 on Hopper/Blackwell,
CUDA graphs for images) against the reference. Every output file is checked as on CPU, the cleanup must give the GPU
memory back, and each run's time and memory go into the junit report and, with `$COSMOS3_GPU_RESULTS`, a JSON-lines
file.

On a machine without CUDA these tests skip, as in CPU CI. `scripts/test_gpu.sh` sets `COSMOS3_GPU_RUNNER=1`, and then
a missing GPU, or a missing FlashAttention-4 on a GPU that should run it, fails instead of skipping.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from cookbook_tools import notebooks
from helpers import audiovisual_settings
from tests import calls
from tests.action_checks import ROLLOUT_CHUNKS, check_action_run
from tests.dataset_checks import check_file
from tests.notebook_checks import (
    QUICKSTART_PUBLISHED,
    QUICKSTART_TINY,
    check_run,
    check_tuning_run,
    error_outputs,
    printed,
    run_nbmake,
)
from tests.offered import offered
from tests.post_training_checks import check_post_training_run
from tests.transfer_checks import check_transfer_run

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu
RUNNER = os.environ.get("COSMOS3_GPU_RUNNER") == "1"
DIFFUSERS = "run_with_diffusers.ipynb"
SIZES = {
    "tiny": {"MODEL": "tiny", "PRESET": "smoke", "SPEED": "none"},
    "nano": {"MODEL": "nano-random", "PRESET": "draft", "SPEED": "fast"},
}
# The main pair runs every mode (the tour's defaults run three); the tuning notebook its own defaults.
# On CUDA the Diffusers quickstarts run at the published size whatever the checkpoint (their smoke size is for a CPU);
# a server's answers to the tiny checkpoint's name stay small.
QUICKSTART = {"tiny": QUICKSTART_TINY, "nano": QUICKSTART_PUBLISHED}
TUNING_MODES = ["t2v", "t2i"]
SEED = 3


def _unavailable(reason: str) -> None:
    if RUNNER:
        pytest.fail(f"The GPU runner cannot run this test: {reason}.")
    pytest.skip(reason)


def _require_cuda() -> None:
    if not torch.cuda.is_available():
        _unavailable("needs a CUDA device")


def _run_nbmake(name: str, parameters: dict[str, object], folder: Path) -> Path:
    return run_nbmake(name, parameters, folder, timeout_s=1800)


def _record(facts: dict, manifest: dict, record_property) -> None:
    """A run's time and memory, with each output's seconds, into the junit report and `$COSMOS3_GPU_RESULTS`."""
    facts["seconds_per_output"] = {o["mode"]: o["seconds"] for o in manifest["outputs"] if o["seconds"] is not None}
    for key, value in facts.items():
        record_property(key, value)
    if os.environ.get("COSMOS3_GPU_RESULTS"):
        with open(os.environ["COSMOS3_GPU_RESULTS"], "a") as out:
            out.write(json.dumps(facts) + "\n")


@pytest.mark.notebook
@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("runner", ["papermill", "nbmake"])
@pytest.mark.parametrize("name", [*notebooks.PAIR, notebooks.TUNING])
def test_notebook_on_cuda(name: str, runner: str, size: str, tmp_path: Path, record_property) -> None:
    _require_cuda()
    wanted = {**SIZES[size], "SEED": SEED, "OUTPUT_DIR": str(tmp_path / "media"), "DEVICE": "cuda", "PROGRESS": False}
    if name in notebooks.PAIR:
        wanted["MODES"] = "all"
    else:
        wanted["SPEED"] = "fast"  # the tuning notebook times the cookbook's switches, at both sizes
    parameters = {k: v for k, v in wanted.items() if k in notebooks.parameter_names(name)}
    started = time.perf_counter()
    if runner == "papermill":
        executed = notebooks.execute(name, tmp_path / name, parameters, timeout_s=3600)
    else:
        executed = _run_nbmake(name, parameters, tmp_path)
    wall = time.perf_counter() - started
    assert error_outputs(executed) == []
    run_dir = notebooks.run_folder_from(executed)
    info = notebooks.run_info(executed)
    preset = SIZES[size]["PRESET"]
    if name == notebooks.TUNING:
        manifest = check_tuning_run(run_dir, info["timings"], TUNING_MODES, preset, SEED, wanted["SPEED"])
    else:
        manifest = check_run(
            run_dir,
            list(audiovisual_settings.MODES),
            preset,
            SEED,
            shifts=name == DIFFUSERS,
            quickstart=QUICKSTART_PUBLISHED if name == DIFFUSERS else QUICKSTART[size],
            long_chunks=3,  # the notebooks' default LONG_CHUNKS
        )
    facts = {"notebook": name, "runner": runner, "size": size, "wall_s": round(wall, 1)}
    if name == notebooks.TUNING:
        facts["timings"] = info["timings"]
    elif name == DIFFUSERS:
        assert manifest["info"]["device"].startswith("cuda") and manifest["info"]["dtype"] == "bfloat16"
        # The cleanup cell let go of the pipeline: less than 1 GiB is still allocated in that kernel.
        freed = info["memory_after_cleanup"]
        assert info["pipeline_released"] is True and freed["allocated_gib"] < 1.0, info
        facts["peak_gib"] = max(o.get("peak_memory_gib") or 0 for o in manifest["outputs"])  # the quickstart has none
        facts["allocated_after_cleanup_gib"] = freed["allocated_gib"]
    else:
        facts["server_peak_gib"] = round(
            max(o["server_peak_mb"] for o in manifest["outputs"] if "server_peak_mb" in o) / 1024, 2
        )
    _record(facts, manifest, record_property)


def _check_family_run(name: str, run_dir: Path, preset: str, size: str) -> dict:
    """An action or transfer run checked as on CPU, with its quickstart's literal numbers."""
    small = size == "tiny" and not name.endswith("run_with_diffusers.ipynb")
    if name in notebooks.ACTION_PAIR:
        return check_action_run(run_dir, preset, SEED, ROLLOUT_CHUNKS, 256 if small else 480)
    return check_transfer_run(run_dir, preset, SEED, (320, 192, 9) if small else (832, 480, 121))


@pytest.mark.notebook
@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("runner", ["papermill", "nbmake"])
@pytest.mark.parametrize("name", [*notebooks.ACTION_PAIR, *notebooks.TRANSFER_PAIR])
def test_action_and_transfer_notebooks_on_cuda(
    name: str, runner: str, size: str, tmp_path: Path, record_property
) -> None:
    """An action notebook (the quickstart at the published tier 480 with nano-random, the car, the arm's three-chunk
    rollout, inverse dynamics and the policy, on MODEL itself at nano size: the same action heads) or a transfer one
    (NVIDIA's call at 832x480, edge, blur, depth, segmentation, two controls and two chunks), every file checked as
    on CPU; compiled at nano size (`SPEED="fast"`)."""
    _require_cuda()
    preset = SIZES[size]["PRESET"]
    parameters = {"MODEL": SIZES[size]["MODEL"], "PRESET": preset, "SPEED": SIZES[size]["SPEED"], "SEED": SEED}
    parameters |= {"DEVICE": "cuda", "PROGRESS": False, "OUTPUT_DIR": str(tmp_path / "media")}
    started = time.perf_counter()
    if runner == "papermill":
        executed = notebooks.execute(name, tmp_path / Path(name).name, parameters, timeout_s=3600)
    else:
        executed = _run_nbmake(name, parameters, tmp_path)
    wall = time.perf_counter() - started
    assert error_outputs(executed) == []
    manifest = _check_family_run(name, notebooks.run_folder_from(executed), preset, size)
    facts = {"notebook": name, "runner": runner, "size": size, "wall_s": round(wall, 1)}
    if name.endswith("run_with_diffusers.ipynb"):
        assert manifest["info"]["device"].startswith("cuda") and manifest["info"]["dtype"] == "bfloat16"
        facts["peak_gib"] = round(max(o.get("peak_memory_gib") or 0 for o in manifest["outputs"]), 2)
    else:
        facts["server_peak_gib"] = round(max(o.get("peak_memory_mb") or 0 for o in manifest["outputs"]) / 1024, 2)
    _record(facts, manifest, record_property)


@pytest.mark.notebook
@pytest.mark.parametrize("name", [*notebooks.DATASET_PAIR, notebooks.POST_TRAINING_PAIR[0]])
def test_dataset_and_post_training_notebooks_on_cuda(name: str, tmp_path: Path, record_property) -> None:
    """The dataset pair (the bundled spec, a vLLM-Omni server of the notebook's own on the GPU) and the post-training
    Diffusers notebook (bf16, gradient checkpointing, the adapter saved and reloaded) at tiny on CUDA, every file
    checked as on CPU."""
    _require_cuda()
    media_dir = tmp_path / "media"
    wanted = {"MODEL": "tiny", "PRESET": "smoke", "SPEED": "none", "SEED": SEED, "DEVICE": "cuda", "PROGRESS": False}
    parameters = {
        k: v for k, v in {**wanted, "OUTPUT_DIR": str(media_dir)}.items() if k in notebooks.parameter_names(name)
    }
    started = time.perf_counter()
    executed = notebooks.execute(name, tmp_path / Path(name).name, parameters, timeout_s=1800)
    facts = {"notebook": name, "runner": "papermill", "size": "tiny", "wall_s": round(time.perf_counter() - started, 1)}
    assert error_outputs(executed) == []
    if name in notebooks.DATASET_PAIR:
        (folder,) = [p for p in media_dir.iterdir() if p.is_dir()]
        rows = [
            json.loads(line)
            for kind in ("videos", "images")
            for line in (folder / kind / "metadata.jsonl").read_text().splitlines()
        ]
        for row in rows:
            check_file(folder / ("videos" if row["file_name"].endswith(".mp4") else "images") / row["file_name"], row)
        manifest = json.loads((folder / "manifest.json").read_text())
    else:
        (run_dir,) = media_dir.glob("diffusers-*")
        check_post_training_run(run_dir, "smoke")
        manifest = json.loads((run_dir / "manifest.json").read_text())
        info = manifest["info"]
        assert info["device"].startswith("cuda") and info["loss_after"] < info["loss_before"], info
        facts["training_peak_gib"] = info["training_peak_gib"]
    _record(facts, manifest, record_property)


# Each Diffusers notebook's SPEED values (its parameters comment, the one table's column), at tiny on CUDA.
_DIFFUSERS_SPEEDS = [
    (name, speed)
    for name in (DIFFUSERS, notebooks.TUNING, notebooks.ACTION_PAIR[0], notebooks.TRANSFER_PAIR[0])
    for speed in offered(name)["SPEED"]
]


@pytest.mark.notebook
@pytest.mark.parametrize(("name", "speed"), _DIFFUSERS_SPEEDS)
def test_every_speed_of_each_diffusers_notebook_runs_on_cuda(name: str, speed: str, tmp_path: Path) -> None:
    """The values CPU CI runs on the CPU, on a GPU, where their GPU switches act: the FP8 values' on Hopper."""
    from tuning import fp8

    _require_cuda()
    if speed.startswith("fp8") and (reason := fp8.attention_unavailable_reason(torch.device("cuda"))):
        _unavailable(reason)
    parameters = {"MODEL": "tiny", "PRESET": "smoke", "SPEED": speed, "SEED": SEED, "DEVICE": "cuda"}
    parameters |= {"PROGRESS": False, "OUTPUT_DIR": str(tmp_path / "media")}
    if name in (DIFFUSERS, notebooks.TUNING):
        parameters["MODES"] = "t2v"
    executed = notebooks.execute(name, tmp_path / Path(name).name, parameters, timeout_s=1800)
    assert error_outputs(executed) == []
    info = notebooks.run_info(executed)
    assert info["speed"] == speed and info["device"].startswith("cuda")
    if name == notebooks.TUNING:
        check_tuning_run(notebooks.run_folder_from(executed), info["timings"], ["t2v"], "smoke", SEED, speed)
        out = printed(executed)
        if speed.startswith("fp8"):  # on Hopper the FP8 switches and FlashAttention-3 act
            kernel = "FlashAttention-3 FP8" if speed == "fp8_attention" else "bf16 FlashAttention-3 in use"
            assert "products in FP8" in out and kernel in out, out
        if speed.endswith("turbo"):  # the step cache says how many passes it computed
            assert "of 4" in str(info["timings"][0]["decoder passes"]), info["timings"]


def test_flash_attention_kernel_matches_pytorch_attention() -> None:
    from diffusers.models.attention_dispatch import AttentionBackendName, dispatch_attention_fn

    from tuning import flash_attention

    _require_cuda()
    if torch.cuda.get_device_capability()[0] not in flash_attention.ARCHS:
        pytest.skip("FlashAttention-4 is for Hopper and Blackwell GPUs; PyTorch's attention stays on this one")
    reason = flash_attention.unavailable_reason(torch.device("cuda"), torch.bfloat16, 128)
    if reason is not None:
        _unavailable(reason)  # a Hopper/Blackwell GPU without the kernel: the runner must install it
    processor = flash_attention.FlashAttention4Processor()
    # Nano's head layout (32 query heads, 8 key/value heads, head_dim 128) at a length that takes the kernel.
    q = torch.randn(flash_attention.MIN_QUERY_TOKENS + 512, 32, 128, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(q.shape[0] + 300, 8, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    for causal in (False, True):
        kk, vv = (k[: q.shape[0]], v[: q.shape[0]]) if causal else (k, v)
        got = processor.attend(q, kk, vv, is_causal=causal)
        want = dispatch_attention_fn(
            q[None], kk[None], vv[None], is_causal=causal, enable_gqa=True, backend=AttentionBackendName.NATIVE
        )[0]
        torch.testing.assert_close(got, want, rtol=0, atol=4e-3)


def test_cuda_graphs_give_the_image_that_launching_each_kernel_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bit for bit, for the prompt they were recorded with, for another prompt of the same length (its text keys are
    written into the tensors the graphs read) and for a longer one (recorded again)."""
    import numpy as np

    from helpers import prompts
    from tuning import pipelines

    _require_cuda()
    pipe = pipelines.load_pipeline("tiny", device="cuda")[0]
    pipelines.apply(pipe, ["compile", "text_kv_cache"])
    s = audiovisual_settings.settings_for("t2i", "smoke", num_inference_steps=4, seed=SEED)
    prompt = prompts.prompt_text(s)
    same_length = prompt.swapcase()
    longer = prompt.replace('"description": "', '"description": "In overcast light, ', 1)  # still structured JSON
    tokens = [len(pipe.text_tokenizer(text).input_ids) for text in (prompt, same_length, longer)]
    assert tokens[0] == tokens[1] < tokens[2]  # the tiny checkpoint's tokenizer: one token per byte

    def image(text: str) -> np.ndarray:
        out = calls.generate(pipe, s, text, prompts.negative_prompt())
        return np.asarray(out.video)

    want = {text: image(text) for text in (prompt, same_length, longer)}
    assert not np.array_equal(want[prompt], want[same_length])
    replays, recordings = [], []
    replay, capture_begin = torch.cuda.CUDAGraph.replay, torch.cuda.CUDAGraph.capture_begin
    monkeypatch.setattr(torch.cuda.CUDAGraph, "replay", lambda graph: replays.append(1) or replay(graph))
    monkeypatch.setattr(
        torch.cuda.CUDAGraph,
        "capture_begin",
        lambda graph, *a, **k: recordings.append(1) or capture_begin(graph, *a, **k),
    )
    pipelines.apply(pipe, ["cuda_graphs"])
    for generation, text in enumerate((prompt, same_length, prompt, longer), start=1):
        np.testing.assert_array_equal(image(text), want[text])
        assert len(replays) == generation * s.num_inference_steps * 2  # every step of both guidance passes
        # Per guidance pass: step 0 (writes the text keys) and the later steps (read them). The longer prompt records
        # its pass's two again; the negative prompt's pass keeps its graphs.
        assert len(recordings) == (4 if generation < 4 else 6)
