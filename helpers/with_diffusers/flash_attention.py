"""FlashAttention-4 (PyPI `flash-attn-4`) behind diffusers' attention dispatch, for Hopper and Blackwell GPUs.

On an H200 at 480p and 720p it runs at 650-690 TFLOP/s against 555-580 for PyTorch's fastest kernel
(tools/benchmarks/results/attention_h200.json), with the same bf16 attention. A custom op lets compiled layers call it
without a graph break; it fills diffusers' `flash_4_hub` backend, which would otherwise download the same kernel.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

# flash-attn-4 is published as pre-releases; its `cu13` extra brings the CUDA 13 build of its compiler's runtime.
INSTALL_CUDA13 = 'pip install --pre "flash-attn-4[cu13]"'
INSTALL_CUDA12 = "pip install --pre flash-attn-4"
# Compute capabilities (major) where the kernel is used: Hopper (measured here) and datacenter Blackwell.
ARCHS: tuple[int, ...] = (9, 10)
# Below this many query tokens PyTorch's SDPA is used instead: each FlashAttention-4 call costs about 0.1 ms of
# Python on the host, more than a small attention takes on the GPU (images, and the text's causal pass).
MIN_QUERY_TOKENS = 2048


def unavailable_reason(
    device: torch.device, dtype: torch.dtype | None = None, head_dim: int | None = None
) -> str | None:
    """None when FlashAttention-4 can run on `device` (for a model of `dtype` and `head_dim`); otherwise why not."""
    import torch

    if device.type != "cuda":
        return f"FlashAttention-4 needs a CUDA GPU; the model runs on {device.type}"
    major, minor = torch.cuda.get_device_capability(device)
    if major not in ARCHS:
        return (
            f"FlashAttention-4 is used on Hopper and Blackwell GPUs (compute capability 9.x/10.x), not {major}.{minor}"
        )
    if dtype is not None and dtype not in (torch.bfloat16, torch.float16):
        return f"FlashAttention-4 computes in bfloat16 or float16, and the model is {dtype}"
    if head_dim is not None and not (8 <= head_dim <= 128 and head_dim % 8 == 0):
        return f"FlashAttention-4 is used for head sizes 8 to 128 in steps of 8, and the model's is {head_dim}"
    if importlib.util.find_spec("flash_attn") is None or importlib.util.find_spec("flash_attn.cute") is None:
        install = INSTALL_CUDA13 if (torch.version.cuda or "").startswith("13") else INSTALL_CUDA12
        return f"the flash-attn-4 package is not installed; install it with `{install}`"
    return None


@functools.cache
def attention_op() -> Any:
    """The custom op `cosmos3_cookbook::flash_attention(q, k, v, causal, scale)`, registered on first use."""
    import torch

    # An explicit schema: this module's annotations are strings (`from __future__ import annotations`).
    schema = "(Tensor q, Tensor k, Tensor v, bool causal, float? scale) -> Tensor"

    @torch.library.custom_op("cosmos3_cookbook::flash_attention", mutates_args=(), schema=schema)
    def flash_attention(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float | None
    ) -> torch.Tensor:
        from flash_attn.cute import flash_attn_func

        # Layout (batch, sequence, heads, head_dim), as diffusers passes it; fewer key/value heads is grouped-query
        # attention, which the kernel does natively.
        out = flash_attn_func(q, k, v, softmax_scale=scale, causal=causal)
        return out[0] if isinstance(out, tuple) else out

    @flash_attention.register_fake
    def _(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float | None) -> torch.Tensor:
        return q.new_empty(q.shape[:-1] + v.shape[-1:])

    return flash_attention


def diffusers_backend() -> Any:
    """diffusers' `flash_4_hub` backend with the local kernel in its registry entry (so nothing is downloaded);
    returns its name. Attention over fewer than `MIN_QUERY_TOKENS` queries stays on PyTorch's SDPA."""
    from diffusers.models.attention_dispatch import _HUB_KERNELS_REGISTRY, AttentionBackendName, dispatch_attention_fn

    op = attention_op()

    def kernel(*, q, k, v, softmax_scale=None, causal=False):
        # The keywords the backend calls its kernel with. A plain closure over the op, so that compiled layers trace
        # straight to it rather than through `attention_op`'s cache; the length test is static under compilation.
        if q.shape[1] >= MIN_QUERY_TOKENS:
            return op(q, k, v, causal, softmax_scale)
        return dispatch_attention_fn(
            q, k, v, is_causal=causal, scale=softmax_scale, enable_gqa=True, backend=AttentionBackendName.NATIVE
        )

    _HUB_KERNELS_REGISTRY[AttentionBackendName.FLASH_4_HUB].kernel_fn = kernel
    return AttentionBackendName.FLASH_4_HUB


def use_for(pipe: Any) -> None:
    """Route every attention call of `pipe.transformer` through FlashAttention-4, set on each processor directly
    (`set_attention_backend` would insist on the `kernels` package, which only the Hub download needs)."""
    backend = diffusers_backend()
    for module in pipe.transformer.modules():
        processor = getattr(module, "processor", None)
        if processor is not None and hasattr(processor, "_attention_backend"):
            processor._attention_backend = backend
