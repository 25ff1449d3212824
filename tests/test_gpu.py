"""GPU runner: the notebooks end to end on CUDA in bf16, and the real Nano architecture through the notebook's code
path. Skipped without CUDA; `bash scripts/test_gpu.sh` runs them (and fails when no GPU is visible)."""

from __future__ import annotations

import numpy as np
import pytest

import random_checkpoints
from cookbook_tools import notebooks, pipelines
from helpers import environment, presets, prompts, runs
from helpers.with_diffusers import speed
from tests.notebook_checks import check_run, error_outputs

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
ALL_MODES = list(presets.MODES)


@pytest.mark.notebook
@pytest.mark.parametrize("name", notebooks.available())
def test_notebook_runs_every_mode_on_cuda(name: str, tmp_path):
    wanted = {"MODEL": "tiny", "PRESET": "smoke", "SEED": 3, "OUTPUT_DIR": str(tmp_path / "media"), "DEVICE": "cuda"}
    # Each notebook takes the parameters that apply to it (the vLLM-Omni one has no DEVICE of its own, say).
    parameters = {k: v for k, v in wanted.items() if k in notebooks.parameter_names(name)}
    executed = notebooks.execute(name, tmp_path / "out.ipynb", parameters)
    assert error_outputs(executed) == []
    manifest = check_run(notebooks.run_folder_from(executed), ALL_MODES, "smoke", 3)
    if "device" in manifest["info"]:
        assert manifest["info"]["device"].startswith("cuda") and manifest["info"]["dtype"] == "bfloat16"
        # The cleanup cell let go of the pipeline: less than 1 GiB is still allocated in that kernel.
        assert notebooks.published(executed)["allocated_gib"] < 1.0


@pytest.fixture(scope="module")
def nano():
    """Cosmos 3 Nano's architecture (15 B parameters) with random weights, built on the GPU in bf16."""
    pipe = random_checkpoints.build_nano_pipeline("cuda")
    yield pipe
    del pipe
    environment.free_memory()


def test_nano_random_weights_through_the_notebook_code_path(nano, tmp_path):
    s = presets.settings_for("t2v", "draft", num_inference_steps=3, seed=11)  # 256p, 93 frames
    run = runs.Run.create(tmp_path, backend="diffusers", model="nano-random", sample_rate=None)

    def generate():
        return pipelines.generate(nano, prompts.prompt_text(s), s, negative_prompt=prompts.negative_prompt())

    with run.generation(s) as gen:
        output = generate()
        gen.save(output)
    check_run(run.path, ["t2v"], "draft", 11)
    assert np.isfinite(output.video).all()
    # The exact text K/V cache on the real architecture: same frames as the plain pipeline, up to bf16 noise.
    speed.cache_text_keys_values(nano)
    cached = generate()
    assert np.abs(cached.video - output.video).max() < 1e-2


def test_flash_attention_kernel_matches_pytorch_attention():
    from diffusers.models.attention_dispatch import AttentionBackendName, dispatch_attention_fn

    from helpers.with_diffusers import flash_attention

    reason = flash_attention.unavailable_reason(torch.device("cuda"), torch.bfloat16, 128)
    if reason is not None:
        pytest.skip(reason)
    backend = flash_attention.diffusers_backend()
    # Nano's head layout (32 query heads, 8 key/value heads, head_dim 128) at a length that takes the kernel.
    q = torch.randn(1, flash_attention.MIN_QUERY_TOKENS + 512, 32, 128, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(1, q.shape[1] + 300, 8, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    for causal in (False, True):
        kk, vv = (k[:, : q.shape[1]], v[:, : q.shape[1]]) if causal else (k, v)
        got = dispatch_attention_fn(q, kk, vv, is_causal=causal, enable_gqa=True, backend=backend)
        want = dispatch_attention_fn(q, kk, vv, is_causal=causal, enable_gqa=True, backend=AttentionBackendName.NATIVE)
        torch.testing.assert_close(got, want, rtol=0, atol=4e-3)
