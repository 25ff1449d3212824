"""FlashAttention-3 in bf16 (PyPI `fa3-fwd`, the forward-only build vLLM-Omni depends on) as Cosmos 3's attention
kernel on Hopper GPUs: the `flash_attention_3` switch.

It is the attention NVIDIA's own inference path runs on Hopper (bf16 FlashAttention-3, beside its FP8 linears). On
one H200 at 720p's shapes it runs at about 700 TFLOP/s, against 650 for FlashAttention-4 and 620 for PyTorch's cuDNN
kernel (docs/performance.md). The output is bf16 attention's, up to numerical noise. The same package's FP8 kernel is
`tuning.fp8`'s `fp8_attention`.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import TYPE_CHECKING, Any

from tuning.flash_attention import LargeCallsProcessor, register_attention_op

if TYPE_CHECKING:
    import torch

INSTALL = 'pip install "fa3-fwd==0.0.3"'


def unavailable_reason(device: torch.device) -> str | None:
    """None when FlashAttention-3 can run on `device` (Hopper only, with fa3-fwd installed); otherwise why not."""
    import torch

    if device.type != "cuda":
        return f"FlashAttention-3 needs a CUDA GPU; the model runs on {device.type}"
    major, minor = torch.cuda.get_device_capability(device)
    if major != 9:
        return f"FlashAttention-3 runs on Hopper GPUs (compute capability 9.x), not {major}.{minor}"
    if importlib.util.find_spec("fa3_fwd_interface") is None:
        return f"the fa3-fwd package is not installed; install it with `{INSTALL}`"
    return None


def _flash_attention_3(q: Any, k: Any, v: Any, causal: bool, scale: float | None) -> Any:
    from fa3_fwd_interface import flash_attn_func

    # [batch, tokens, heads, head_dim]; fewer key/value heads is grouped-query attention, native to the kernel.
    out = flash_attn_func(q, k, v, softmax_scale=scale, causal=causal)
    return out[0] if isinstance(out, tuple) else out


@functools.cache
def attention_op() -> Any:
    """The custom op `cosmos3_cookbook::flash_attention_3(q, k, v, causal, scale)`, registered on first use."""
    return register_attention_op("flash_attention_3", _flash_attention_3)


class FlashAttention3Processor(LargeCallsProcessor):
    """Cosmos 3's attention processor with bf16 FlashAttention-3 for the calls of `MIN_QUERY_TOKENS` queries or more,
    set per layer through diffusers' public `set_processor` (`use_for`); smaller calls stay on PyTorch's SDPA."""

    def __init__(self) -> None:
        self.kernel = attention_op()


def use_for(pipe: Any) -> None:
    """`flash_attention_3` for every attention layer of `pipe.transformer`, and of nothing else."""
    for layer in pipe.transformer.layers:
        layer.self_attn.set_processor(FlashAttention3Processor())
