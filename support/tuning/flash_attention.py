"""FlashAttention-4 (PyPI `flash-attn-4`) as Cosmos 3's attention kernel, for Hopper and Blackwell GPUs.

On an H200 at 480p and 720p it runs at 650-690 TFLOP/s against 555-580 for PyTorch's fastest kernel
(support/benchmarks/results/attention_h200.json), with the same bf16 attention. A custom op lets compiled layers call it
without a graph break; an attention processor of the pipeline's own calls it.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import TYPE_CHECKING, Any

from tuning.attention import OwnKernelAttnProcessor

if TYPE_CHECKING:
    import torch

# flash-attn-4 is published as pre-releases (an exact pin admits one); its `cu13` extra brings the CUDA 13 build of its
# compiler's runtime. The version is support/locks/gpu.txt's, which scripts/setup.sh installs on a GPU machine.
INSTALL_CUDA13 = 'pip install "flash-attn-4[cu13]==4.0.0b36"'
INSTALL_CUDA12 = 'pip install "flash-attn-4==4.0.0b36"'
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


def register_attention_op(name: str, run: Any) -> Any:
    """The custom op `cosmos3_cookbook::<name>(q, k, v, causal, scale)` over `[batch, tokens, heads, head_dim]`,
    computed by `run(q, k, v, causal, scale)`: compiled layers call it without a graph break, and its fake gives the
    output's shape without running it."""
    import torch

    # An explicit schema: the modules that call this have string annotations (`from __future__ import annotations`).
    schema = "(Tensor q, Tensor k, Tensor v, bool causal, float? scale) -> Tensor"
    op = torch.library.custom_op(f"cosmos3_cookbook::{name}", mutates_args=(), schema=schema)(run)

    @op.register_fake
    def _(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float | None) -> torch.Tensor:
        return q.new_empty(q.shape[:-1] + v.shape[-1:])

    return op


def _flash_attention_4(q: Any, k: Any, v: Any, causal: bool, scale: float | None) -> Any:
    from flash_attn.cute import flash_attn_func

    # Layout (batch, sequence, heads, head_dim), as diffusers passes it; fewer key/value heads is grouped-query
    # attention, which the kernel does natively.
    out = flash_attn_func(q, k, v, softmax_scale=scale, causal=causal)
    return out[0] if isinstance(out, tuple) else out


@functools.cache
def attention_op() -> Any:
    """The custom op `cosmos3_cookbook::flash_attention(q, k, v, causal, scale)`, registered on first use."""
    return register_attention_op("flash_attention", _flash_attention_4)


class LargeCallsProcessor(OwnKernelAttnProcessor):
    """Cosmos 3's attention processor that sends the large calls to `self.kernel(q, k, v, causal, scale)`, a custom
    op over `[batch, tokens, heads, head_dim]`, and the rest to PyTorch's SDPA: calls over fewer than
    `MIN_QUERY_TOKENS` queries, and the causal ones where `causal_calls` is False."""

    kernel: Any
    causal_calls = True

    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, is_causal: bool) -> torch.Tensor:
        from diffusers.models.attention_dispatch import AttentionBackendName, dispatch_attention_fn

        query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
        # The length test is static under compilation: a compiled layer traces straight to one path.
        if query.shape[1] >= MIN_QUERY_TOKENS and (self.causal_calls or not is_causal):
            out = self.kernel(query, key, value, is_causal, None)
        else:
            out = dispatch_attention_fn(
                query, key, value, is_causal=is_causal, enable_gqa=True, backend=AttentionBackendName.NATIVE
            )
        return out.squeeze(0)


class FlashAttention4Processor(LargeCallsProcessor):
    """Cosmos 3's attention processor with FlashAttention-4 as its kernel. Set on each layer of one pipeline through
    diffusers' public `set_processor` (`use_for`): other pipelines in the process, diffusers' kernel registry and its
    active backend stay as they were. Attention over fewer than `MIN_QUERY_TOKENS` queries stays on PyTorch's SDPA."""

    def __init__(self) -> None:
        # Held, not looked up per call: compiled layers then trace straight to the op, not through its cache.
        self.kernel = attention_op()


def use_for(pipe: Any) -> None:
    """FlashAttention-4 for every attention layer of `pipe.transformer`, and of nothing else. diffusers' own switch,
    `set_attention_backend("flash_4_hub")`, downloads the kernel from the Hugging Face Hub (with the `kernels`
    package) and makes it the active backend of the whole process."""
    for layer in pipe.transformer.layers:
        layer.self_attn.set_processor(FlashAttention4Processor())
