"""FlashAttention-4 as one pipeline's attention kernel, on CPU: where the kernel is refused, how the pipeline's
attention calls are routed to it, that nothing shared by other pipelines changes, and that the routed pipeline gives
the same output. The kernel itself needs a Hopper/Blackwell GPU: tests/test_gpu.py compares it with PyTorch's
attention there, and support/benchmarks/attention_kernels.py times it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from diffusers.models.attention_dispatch import (
    _HUB_KERNELS_REGISTRY,
    AttentionBackendName,
    _AttentionBackendRegistry,
    dispatch_attention_fn,
)

from helpers import audiovisual_settings
from tests import calls
from tuning import flash_attention, patches, pipelines
from tuning.pipelines import load_pipeline


def test_cpu_is_refused_with_a_reason():
    reason = flash_attention.unavailable_reason(torch.device("cpu"), torch.float32, 16)
    assert reason is not None and "CUDA GPU" in reason


class _Attention(torch.nn.Module):
    """The call the text cache and the processor make: `attend` over `[tokens, heads, head_dim]`."""

    def __init__(self) -> None:
        super().__init__()
        self.processor = flash_attention.FlashAttention4Processor()

    def forward(self, q, k, v):
        return self.processor.attend(q, k, v, is_causal=False)


def _qkv(queries: int, keys: int):
    return torch.randn(queries, 4, 16), torch.randn(keys, 2, 16), torch.randn(keys, 2, 16)


def test_long_attention_traces_to_the_kernel_op_in_one_graph():
    # strict export is Dynamo's full-graph tracing, as `compile` runs the layers, without executing the kernel.
    graph = torch.export.export(_Attention(), _qkv(flash_attention.MIN_QUERY_TOKENS, 80), strict=True).graph
    targets = [str(node.target) for node in graph.nodes if node.op == "call_function"]
    assert "cosmos3_cookbook.flash_attention.default" in targets
    assert not [t for t in targets if "attention" in t and "cosmos3_cookbook" not in t]


@pytest.mark.parametrize("causal", [False, True])
def test_short_attention_stays_on_pytorch_and_matches_the_default_backend(causal: bool):
    q, k, v = _qkv(64, 64 if causal else 80)
    got = flash_attention.FlashAttention4Processor().attend(q, k, v, is_causal=causal)
    want = dispatch_attention_fn(
        q[None], k[None], v[None], is_causal=causal, enable_gqa=True, backend=AttentionBackendName.NATIVE
    )[0]
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    graph = torch.export.export(_Attention(), (q, k, v), strict=True).graph
    assert "cosmos3_cookbook" not in str(graph)


def _video(pipe) -> np.ndarray:
    s = audiovisual_settings.settings_for(
        "t2v", "smoke", width=64, height=64, num_frames=9, num_inference_steps=2, seed=5
    )
    # Short prompts: the tiny checkpoint's byte-level tokenizer makes a token of every byte of the JSON ones.
    return calls.generate(pipe, s, "A red ball rolls across a wooden floor.", "blurry").video


def test_use_for_routes_one_pipeline_only_and_its_output_is_unchanged():
    kernel_before = _HUB_KERNELS_REGISTRY[AttentionBackendName.FLASH_4_HUB].kernel_fn
    active_before = _AttentionBackendRegistry._active_backend
    reference = load_pipeline("tiny", device="cpu")[0]
    routed = load_pipeline("tiny", device="cpu")[0]
    flash_attention.use_for(routed)
    processors = {type(layer.self_attn.processor) for layer in routed.transformer.layers}
    assert processors == {flash_attention.FlashAttention4Processor}
    # Nothing another pipeline in the process reads has changed.
    assert {type(layer.self_attn.processor).__name__ for layer in reference.transformer.layers} == {
        "Cosmos3AttnProcessor"
    }
    assert _HUB_KERNELS_REGISTRY[AttentionBackendName.FLASH_4_HUB].kernel_fn is kernel_before
    assert _AttentionBackendRegistry._active_backend == active_before
    # A small output keeps every sequence under MIN_QUERY_TOKENS: each call takes the processor's PyTorch path (the
    # kernel needs a GPU), so the output must be the default processor's, bit for bit.
    np.testing.assert_array_equal(_video(routed), _video(reference))


def test_the_text_cache_runs_through_the_routed_processor():
    reference = load_pipeline("tiny", device="cpu")[0]
    routed = load_pipeline("tiny", device="cpu")[0]
    patches.cache_text_keys_values(routed)
    flash_attention.use_for(routed)
    calls = []
    attend = flash_attention.FlashAttention4Processor.attend

    def counted(self, *args, **kwargs):
        calls.append(kwargs["is_causal"])
        return attend(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(flash_attention.FlashAttention4Processor, "attend", counted)
        video = _video(routed)
    assert True in calls and False in calls
    np.testing.assert_allclose(video, _video(reference), rtol=0, atol=1e-5)


def test_the_switch_is_skipped_on_cpu_without_a_warning(recwarn: pytest.WarningsRecorder):
    pipe = load_pipeline("tiny", device="cpu")[0]
    assert "CUDA GPU" in patches.use_flash_attention(pipe)
    assert pipelines.apply(pipe, ["flash_attention"]) == ()
    assert pipelines.skipped(pipe) == ("flash_attention",)
    assert pipelines.apply(pipe, ["flash_attention", "vae_tiling"]) == ("vae_tiling",)  # skipped counts for the order
    assert not [w for w in recwarn if "flash_attention" in str(w.message)]
    assert type(pipe.transformer.layers[0].self_attn.processor).__name__ == "Cosmos3AttnProcessor"
