"""FlashAttention-4 behind diffusers' attention dispatch, on CPU: where the kernel is refused, how the pipeline's
attention calls are routed to it, and that the routed pipeline gives the same output. The kernel itself needs a
Hopper/Blackwell GPU: tests/test_gpu.py compares it with PyTorch's attention there, and
tools/benchmarks/attention_kernels.py times it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from diffusers.models.attention_dispatch import AttentionBackendName, dispatch_attention_fn

from helpers import presets
from helpers.with_diffusers import flash_attention, pipelines, speed
from helpers.with_diffusers.pipelines import load_pipeline


def test_cpu_is_refused_with_a_reason():
    reason = flash_attention.unavailable_reason(torch.device("cpu"), torch.float32, 16)
    assert reason is not None and "CUDA GPU" in reason


class _Attention(torch.nn.Module):
    """The call Cosmos 3's attention processor makes, with the backend the switch installs."""

    def __init__(self) -> None:
        super().__init__()
        self.backend = flash_attention.diffusers_backend()

    def forward(self, q, k, v):
        return dispatch_attention_fn(q, k, v, is_causal=False, enable_gqa=True, backend=self.backend)


def _qkv(queries: int, keys: int):
    return torch.randn(1, queries, 4, 16), torch.randn(1, keys, 2, 16), torch.randn(1, keys, 2, 16)


def test_long_attention_traces_to_the_kernel_op_in_one_graph():
    # strict export is Dynamo's full-graph tracing, as `compile` runs the layers, without executing the kernel.
    graph = torch.export.export(_Attention(), _qkv(flash_attention.MIN_QUERY_TOKENS, 80), strict=True).graph
    targets = [str(node.target) for node in graph.nodes if node.op == "call_function"]
    assert targets == ["cosmos3_cookbook.flash_attention.default"]


@pytest.mark.parametrize("causal", [False, True])
def test_short_attention_stays_on_pytorch_and_matches_the_default_backend(causal: bool):
    q, k, v = _qkv(64, 64 if causal else 80)
    backend = flash_attention.diffusers_backend()
    got = dispatch_attention_fn(q, k, v, is_causal=causal, enable_gqa=True, backend=backend)
    want = dispatch_attention_fn(q, k, v, is_causal=causal, enable_gqa=True, backend=AttentionBackendName.NATIVE)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    graph = torch.export.export(_Attention(), (q, k, v), strict=True).graph
    assert "cosmos3_cookbook" not in str(graph)


def test_use_for_routes_every_layer_and_the_pipeline_output_is_unchanged():
    def generate(pipe):
        s = presets.settings_for("t2v", "smoke", width=64, height=64, num_frames=9, num_inference_steps=2, seed=5)
        # Short prompts: the tiny checkpoint's byte-level tokenizer makes a token of every byte of the JSON ones.
        return pipelines.generate(pipe, "A red ball rolls across a wooden floor.", s, negative_prompt="blurry").video

    reference = load_pipeline("tiny", device="cpu")[0]
    routed = load_pipeline("tiny", device="cpu")[0]
    flash_attention.use_for(routed)
    backends = {layer.self_attn.processor._attention_backend for layer in routed.transformer.layers}
    assert backends == {AttentionBackendName.FLASH_4_HUB}
    # A small output keeps every sequence under MIN_QUERY_TOKENS: each call takes the PyTorch path of the routed
    # backend (the kernel needs a GPU), so the output must be the default backend's, bit for bit.
    np.testing.assert_array_equal(generate(routed), generate(reference))


def test_the_switch_is_skipped_on_cpu_without_a_warning(recwarn: pytest.WarningsRecorder):
    pipe = load_pipeline("tiny", device="cpu")[0]
    assert "CUDA GPU" in speed.use_flash_attention(pipe)
    assert pipelines.apply(pipe, ["flash_attention"]) == ()
    assert pipelines.skipped(pipe) == ("flash_attention",)
    assert pipelines.apply(pipe, ["flash_attention", "vae_tiling"]) == ("vae_tiling",)  # skipped counts for the order
    assert not [w for w in recwarn if "flash_attention" in str(w.message)]
    processor = pipe.transformer.layers[0].self_attn.processor
    assert processor._attention_backend != AttentionBackendName.FLASH_4_HUB
