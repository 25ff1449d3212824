"""FP8 compute for Cosmos 3's generation pathway on Hopper GPUs: the matrix products through torchao, the attention
through FlashAttention-3's FP8 kernel (PyPI `fa3-fwd`, the wheel vLLM-Omni depends on).

Only the generation pathway is touched: the projections and feed-forward of the generation tokens
(`GENERATION_LINEARS`) and their non-causal attention over text and video. The text tower stays in bf16, as the
published FP8 schedule keeps it at high precision (`mixed_precision_reasoner_policy="high_precision"`), and so do
the small attention calls (images, the text's causal pass). Both switches change the output: how much is measured
against a change of seed (support/benchmarks/fp8_benchmark.py, docs/performance.md).

- `fp8_linears`: torchao's `Float8DynamicActivationFloat8WeightConfig(granularity=PerRow())`, weights quantised once
  with a scale per output row, activations per token at every call. Eager, the activation quantisation is a kernel of
  its own and the products get slower; compiled, it fuses into the product and the matrix products run at 1.7 to 1.9
  times bf16's rate on an H200.
- `fp8_attention`: each call's queries, keys and values quantised to float8 e4m3 with one scale per key-value head
  (from the tensor's largest magnitude), the softmax kept in float32 by the kernel, the output in bf16.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import TYPE_CHECKING, Any

from tuning import flash_attention_3
from tuning.flash_attention import LargeCallsProcessor, register_attention_op

if TYPE_CHECKING:
    import torch

INSTALL_TORCHAO = 'pip install "torchao==0.18.0"'
# The generation pathway's linear layers, by their name inside a decoder layer.
GENERATION_LINEARS = frozenset(
    {
        "self_attn.add_q_proj",
        "self_attn.add_k_proj",
        "self_attn.add_v_proj",
        "self_attn.to_add_out",
        "mlp_moe_gen.gate_proj",
        "mlp_moe_gen.up_proj",
        "mlp_moe_gen.down_proj",
    }
)
# float8 e4m3's largest finite value.
E4M3_MAX = 448.0


def _capability(device: torch.device) -> tuple[int, int] | None:
    import torch

    return torch.cuda.get_device_capability(device) if device.type == "cuda" else None


def linears_unavailable_reason(device: torch.device) -> str | None:
    """None when torchao's FP8 matrix products can run on `device` (Ada, Hopper or newer); otherwise why not."""
    capability = _capability(device)
    if capability is None:
        return f"FP8 matrix products need a CUDA GPU; the model runs on {device.type}"
    if capability < (8, 9):
        return f"FP8 matrix products need compute capability 8.9 or newer, not {capability[0]}.{capability[1]}"
    if importlib.util.find_spec("torchao") is None:
        return f"the torchao package is not installed; install it with `{INSTALL_TORCHAO}`"
    return None


def attention_unavailable_reason(device: torch.device) -> str | None:
    """None when FlashAttention-3's FP8 kernel can run on `device` (Hopper only); otherwise why not."""
    return flash_attention_3.unavailable_reason(device)


def _is_generation_linear(module: Any, name: str) -> bool:
    import torch

    # "layers.7.mlp_moe_gen.up_proj" -> "mlp_moe_gen.up_proj"
    parts = name.split(".")
    return isinstance(module, torch.nn.Linear) and parts[0] == "layers" and ".".join(parts[2:]) in GENERATION_LINEARS


def quantize_generation_linears(pipe: Any) -> int:
    """`fp8_linears`: the generation pathway's linear layers as torchao FP8 layers (in place; there is no way back).
    Returns how many were quantised."""
    from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow, quantize_

    names = [n for n, m in pipe.transformer.named_modules() if _is_generation_linear(m, n)]
    quantize_(
        pipe.transformer,
        Float8DynamicActivationFloat8WeightConfig(granularity=PerRow()),
        filter_fn=_is_generation_linear,
    )
    return len(names)


def _per_head_fp8(x: torch.Tensor, kv_heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`x` ([batch, tokens, heads, dim]) in float8 e4m3 with one scale per batch and key-value head (query heads
    that share a key-value head share its scale, as the kernel's descale takes them), and those scales."""
    import torch

    batch, tokens, heads, dim = x.shape
    grouped = x.view(batch, tokens, kv_heads, heads // kv_heads, dim)
    scale = grouped.abs().amax(dim=(1, 3, 4)).float().clamp(min=1e-6) / E4M3_MAX  # [batch, kv_heads]
    quantized = (grouped / scale[:, None, :, None, None]).to(torch.float8_e4m3fn)
    return quantized.view(batch, tokens, heads, dim), scale


def _fp8_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float | None):
    from fa3_fwd_interface import flash_attn_func

    kv_heads = k.shape[2]
    q8, q_scale = _per_head_fp8(q, kv_heads)
    k8, k_scale = _per_head_fp8(k, kv_heads)
    v8, v_scale = _per_head_fp8(v, kv_heads)
    out = flash_attn_func(
        q8, k8, v8, softmax_scale=scale, causal=causal, q_descale=q_scale, k_descale=k_scale, v_descale=v_scale
    )
    out = out[0] if isinstance(out, tuple) else out
    return out.to(q.dtype)


@functools.cache
def attention_op() -> Any:
    """The custom op `cosmos3_cookbook::fp8_attention(q, k, v, causal, scale)`, registered on first use."""
    return register_attention_op("fp8_attention", _fp8_attention)


class FP8AttentionProcessor(LargeCallsProcessor):
    """Cosmos 3's attention processor with FlashAttention-3's FP8 kernel for the large non-causal calls (the
    generation tokens over text and video), set per layer through diffusers' public `set_processor` (`use_for`).
    Calls over fewer than `MIN_QUERY_TOKENS` queries and the text's causal pass stay on PyTorch's SDPA in bf16."""

    causal_calls = False

    def __init__(self) -> None:
        self.kernel = attention_op()


def use_for(pipe: Any) -> None:
    """`fp8_attention` for every attention layer of `pipe.transformer`, and of nothing else."""
    for layer in pipe.transformer.layers:
        layer.self_attn.set_processor(FP8AttentionProcessor())
