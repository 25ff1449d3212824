"""Named speed and memory switches for a loaded `Cosmos3OmniPipeline`.

A preset lists switch names in `GenerationSettings.speedups`; `apply(pipe, settings)` turns them on. Applying the same
names again does nothing, so it is safe to call before every generation (`helpers.pipeline.pipe_kwargs` does).

| switch | what it does | output |
|---|---|---|
| `fp8_storage` | transformer weights stored in float8, computed in the model dtype (layerwise casting) | changes |
| `compile` | `torch.compile(fullgraph=True)` of each repeated decoder layer (regional compilation) | same up to noise |
| `text_kv_cache` | the text tower's per-layer keys and values, once per prompt, not per step | same up to noise |
| `zero_encode_cache` | the VAE encoding of the blank video that text-to-video encodes, once per size | same |
| `vae_autotune` | cuDNN benchmark mode (fastest convolution algorithms) during the VAE decode | same up to noise |
| `flash_attention` | FlashAttention-4 kernels on Hopper/Blackwell GPUs (helpers.flash_attention) | same up to noise |
| `sea_cache` | diffusers' SeaCache: reuses the decoder-stack residual on steps where little changes | changes |
| `group_offload` | keeps transformer layers in CPU memory and streams them to the GPU one at a time | same |
| `vae_tiling` | decodes the video in overlapping tiles | changes slightly |

Why `text_kv_cache` is exact: in every Cosmos 3 decoder layer the text ("understanding") tokens attend only to
each other, causally, and never to the generated tokens; nothing on their path depends on the timestep. So the text
keys and values that the generated tokens attend to are the same at every denoising step for a given prompt. The
cache records them at step 0 of each `cache_context` ("cond" and "uncond" are separate) and from step 1 on runs only
the generation half of each layer. tests/test_speed.py checks the output against the uncached pipeline.

Why `zero_encode_cache` is exact: without a conditioning image or video, `prepare_latents` VAE-encodes an all-zero
video of the output's size (seconds at 720p) only to get the latent shape; its values are multiplied by a zero mask.
The encoding of zeros depends only on the size, dtype, device and the VAE, so it is computed once per such key and
reused; inputs with any non-zero value (real conditioning) are encoded as before.

`flash_attention` depends on the machine: where FlashAttention-4 cannot run (CPU, other GPUs, package missing) the
switch is skipped, PyTorch's attention stays, and `applied()` does not list it; on a CUDA GPU a warning says why.
So a preset that includes it works everywhere and is fastest where the kernel exists.
"""

from __future__ import annotations

import functools
import warnings
from typing import TYPE_CHECKING, Any

from helpers.errors import InvalidSettingError
from helpers.presets import GenerationSettings

if TYPE_CHECKING:
    import torch
    from diffusers import Cosmos3OmniPipeline

# The order switches are applied in. Hooks registered later wrap earlier ones, so this order keeps each switch
# working with the others: compilation sees plain layers, the text cache calls the (compiled) layer, and group
# offloading, outermost, moves a layer's weights to the GPU before anything inside it runs.
SWITCHES: tuple[str, ...] = (
    "fp8_storage",
    "compile",
    "text_kv_cache",
    "zero_encode_cache",
    "vae_autotune",
    "flash_attention",
    "sea_cache",
    "group_offload",
    "vae_tiling",
)
# Switches that decide how much of the model sits on the accelerator.
MEMORY_SWITCHES: frozenset[str] = frozenset({"fp8_storage", "group_offload"})
# Switches whose output matches the baseline's up to numerical noise.
EXACT_SWITCHES: frozenset[str] = frozenset(
    {"compile", "text_kv_cache", "zero_encode_cache", "vae_autotune", "flash_attention", "group_offload"}
)
# Recompilations allowed per compiled function once `compile` is on (PyTorch's default is 8).
RECOMPILE_LIMIT = 64
_APPLIED_ATTR = "_cookbook_speedups"
_SKIPPED_ATTR = "_cookbook_skipped_speedups"
_TEXT_KV_HOOK = "cookbook_text_kv_cache"


def check(names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The names in application order; raises `InvalidSettingError` for an unknown one."""
    unknown = [n for n in names if n not in SWITCHES]
    if unknown:
        raise InvalidSettingError(
            f"Unknown speed switch(es) {unknown}. Allowed switches: {', '.join(repr(s) for s in SWITCHES)}."
        )
    return tuple(s for s in SWITCHES if s in names)


def applied(pipe: Cosmos3OmniPipeline) -> tuple[str, ...]:
    """The switches already on this pipeline, in application order."""
    return tuple(getattr(pipe.transformer, _APPLIED_ATTR, ()))


def skipped(pipe: Cosmos3OmniPipeline) -> tuple[str, ...]:
    """Switches asked for that cannot act on this machine (see `flash_attention`), in application order."""
    return tuple(getattr(pipe.transformer, _SKIPPED_ATTR, ()))


def apply(
    pipe: Cosmos3OmniPipeline,
    settings: GenerationSettings | tuple[str, ...] | list[str],
    *,
    device: torch.device | None = None,
) -> tuple[str, ...]:
    """Turn on the switches named by `settings.speedups` (or a list of names); returns all switches now on.

    `device` is where the model computes; it defaults to where the transformer's weights are. Loading passes the
    accelerator while the weights are still in CPU memory, so that memory switches act before they move.

    Switches stay on once applied (compiled layers and float8 weights cannot be undone): a later call may add
    switches that come after every applied one in `SWITCHES`, and otherwise raises, asking for a fresh pipeline.
    """
    names = check(settings.speedups if isinstance(settings, GenerationSettings) else tuple(settings))
    done, passed = applied(pipe), skipped(pipe)
    new = [n for n in names if n not in done and n not in passed]
    last = max((SWITCHES.index(n) for n in (*done, *passed)), default=-1)
    if new and SWITCHES.index(new[0]) < last:
        raise InvalidSettingError(
            f"Cannot add {new[0]!r} to a pipeline that already has {list(done)}: switches must be applied in the "
            f"order {list(SWITCHES)}. Load the pipeline again (helpers.loading.load_pipeline) and apply them together."
        )
    target = device or _device(pipe)
    for name in new:
        if _APPLY[name](pipe, names, target) is False:
            passed = (*passed, name)
            setattr(pipe.transformer, _SKIPPED_ATTR, passed)
        else:
            done = (*done, name)
            setattr(pipe.transformer, _APPLIED_ATTR, done)
    return done


def _device(pipe: Cosmos3OmniPipeline) -> torch.device:
    from diffusers.models.modeling_utils import get_parameter_device

    return get_parameter_device(pipe.transformer)


def _fp8_storage(pipe: Cosmos3OmniPipeline, names: tuple[str, ...], device: torch.device) -> None:
    import torch

    pipe.transformer.enable_layerwise_casting(storage_dtype=torch.float8_e4m3fn, compute_dtype=pipe.transformer.dtype)


def _layers(pipe: Cosmos3OmniPipeline) -> list[torch.nn.Module]:
    return list(pipe.transformer.layers)


def _compile(pipe: Cosmos3OmniPipeline, names: tuple[str, ...], device: torch.device) -> None:
    import torch

    # Regional compilation, like `compile_repeated_blocks(fullgraph=True)`, but of each layer's `forward` rather
    # than its `__call__`: hooks that other switches add around a layer (the text cache, group offloading) then stay
    # outside the compiled graph instead of being traced into it.
    for layer in _layers(pipe):
        layer.forward = torch.compile(layer.forward, fullgraph=True)
    # Each new output size, prompt length or attention kernel can cost a recompilation of the shared layer code
    # (automatic dynamic shapes do not cover every guard). At PyTorch's default limit of 8 a session that tries a
    # few modes and tiers fails with "recompile limit exceeded" under fullgraph, so allow a session's worth.
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)


@functools.cache
def _compiled_generation_half():
    import torch

    return torch.compile(_generation_half, fullgraph=True)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    from diffusers.models.transformers.transformer_cosmos3 import _rotate_half

    # The same expression as Cosmos3AttnProcessor, so cached and recomputed keys agree bit for bit.
    return x * cos.unsqueeze(1) + _rotate_half(x) * sin.unsqueeze(1)


def _text_keys_values(layer: Any, und_seq: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """The text keys (rotated, as the generation tokens see them) and values of one decoder layer."""
    attn = layer.self_attn
    und = layer.input_layernorm(und_seq)
    key = attn.norm_k(attn.to_k(und).view(-1, attn.num_key_value_heads, attn.head_dim))
    if attn.k_norm_und_for_gen is not None:
        key = attn.k_norm_und_for_gen(key)
    value = attn.to_v(und).view(-1, attn.num_key_value_heads, attn.head_dim)
    return _rope(key, cos, sin), value


def _generation_half(
    layer: Any,
    gen_seq: torch.Tensor,
    text_key: torch.Tensor,
    text_value: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
) -> torch.Tensor:
    """The generation pathway of `Cosmos3VLTextMoTDecoderLayer.forward`, given the text keys and values."""
    import torch
    from diffusers.models.attention_dispatch import dispatch_attention_fn

    attn = layer.self_attn
    gen = layer.input_layernorm_moe_gen(gen_seq)
    query = attn.norm_added_q(attn.add_q_proj(gen).view(-1, attn.num_attention_heads, attn.head_dim))
    key = attn.norm_added_k(attn.add_k_proj(gen).view(-1, attn.num_key_value_heads, attn.head_dim))
    value = attn.add_v_proj(gen).view(-1, attn.num_key_value_heads, attn.head_dim)
    out = dispatch_attention_fn(
        _rope(query, cos, sin).unsqueeze(0),
        torch.cat([text_key, _rope(key, cos, sin)], dim=0).unsqueeze(0),
        torch.cat([text_value, value], dim=0).unsqueeze(0),
        is_causal=False,
        enable_gqa=True,
        backend=attn.processor._attention_backend,
        parallel_config=attn.processor._parallel_config,
    )
    residual = gen_seq + attn.to_add_out(out.squeeze(0).flatten(-2, -1))
    return residual + layer.mlp_moe_gen(layer.post_attention_layernorm_moe_gen(residual))


def _text_kv_cache_hook(compiled: bool):
    from diffusers.hooks import ModelHook
    from diffusers.hooks.hooks import BaseState, StateManager

    class TextKVState(BaseState):
        def __init__(self) -> None:
            self.key_value: tuple[torch.Tensor, torch.Tensor] | None = None

        def reset(self) -> None:
            self.key_value = None

    class TextKVCacheHook(ModelHook):
        """Per decoder layer: record the text keys/values at step 0 of a context, then skip the text half."""

        _is_stateful = True

        def __init__(self) -> None:
            super().__init__()
            self.state_manager = StateManager(TextKVState)
            self.generation_half = _compiled_generation_half() if compiled else _generation_half

        def new_forward(self, module, und_seq, gen_seq, rotary_emb):
            context = self.state_manager._context
            if context is None or context.step_index is None:
                # Called outside the pipeline's denoising loop: no step to key the cache on.
                return self.fn_ref.original_forward(und_seq, gen_seq, rotary_emb)
            state = self.state_manager.get_state()
            cos_und, sin_und, cos_gen, sin_gen = rotary_emb
            if context.step_index == 0 or state.key_value is None or state.key_value[1].shape[0] != und_seq.shape[0]:
                state.key_value = _text_keys_values(module, und_seq, cos_und, sin_und)
                return self.fn_ref.original_forward(und_seq, gen_seq, rotary_emb)
            # The text stream is returned unchanged: only generation positions are read after the last layer.
            return und_seq, self.generation_half(module, gen_seq, *state.key_value, cos_gen, sin_gen)

        def reset_state(self, module):
            self.state_manager.reset()
            return module

    return TextKVCacheHook


def _text_kv_cache(pipe: Cosmos3OmniPipeline, names: tuple[str, ...], device: torch.device) -> None:
    from diffusers.hooks import HookRegistry
    from diffusers.models.transformers.transformer_cosmos3 import Cosmos3AttnProcessor

    for layer in _layers(pipe):
        if type(layer.self_attn.processor) is not Cosmos3AttnProcessor:
            raise InvalidSettingError(
                f"text_kv_cache needs the default Cosmos3AttnProcessor, but a layer uses "
                f"{type(layer.self_attn.processor).__name__} (context parallelism?). Drop 'text_kv_cache'."
            )
    hook_cls = _text_kv_cache_hook(compiled="compile" in names)
    for layer in _layers(pipe):
        HookRegistry.check_if_exists_or_initialize(layer).register_hook(hook_cls(), _TEXT_KV_HOOK)
    # `cache_context` finds stateful hooks through a cached list of child registries; refresh it.
    HookRegistry.check_if_exists_or_initialize(pipe.transformer).invalidate_child_registries_cache()


def _zero_encode_cache(pipe: Cosmos3OmniPipeline, names: tuple[str, ...], device: torch.device) -> None:
    encode = pipe._encode_video
    cache: dict[tuple[Any, ...], torch.Tensor] = {}

    @functools.wraps(encode)
    def encode_once_per_size(x: torch.Tensor) -> torch.Tensor:
        if x.any():
            return encode(x)
        # Tiling and the VAE's dtype change the encoding; `id(pipe.vae)` covers a swapped VAE.
        key = (tuple(x.shape), x.dtype, x.device, id(pipe.vae), pipe.vae.dtype, pipe.vae.use_tiling)
        if key not in cache:
            cache[key] = encode(x)
        # A copy, so that nothing downstream can change the cached tensor in place.
        return cache[key].clone()

    # An instance attribute: only this pipeline's `prepare_latents` sees the cache.
    pipe._encode_video = encode_once_per_size


def _vae_autotune(pipe: Cosmos3OmniPipeline, names: tuple[str, ...], device: torch.device) -> None:
    import torch

    decode = pipe.vae.decode

    @functools.wraps(decode)
    def autotuned_decode(*args: Any, **kwargs: Any) -> Any:
        # Scoped to the decode: benchmark mode tries each algorithm once per new input shape, which pays off for the
        # VAE's many same-shaped 3D convolutions; elsewhere (and under a memory cap) the default heuristics stay.
        before = torch.backends.cudnn.benchmark
        torch.backends.cudnn.benchmark = True
        try:
            return decode(*args, **kwargs)
        finally:
            torch.backends.cudnn.benchmark = before

    pipe.vae.decode = autotuned_decode


def _flash_attention(pipe: Cosmos3OmniPipeline, names: tuple[str, ...], device: torch.device) -> bool:
    from helpers import flash_attention

    transformer = pipe.transformer
    reason = flash_attention.unavailable_reason(device, transformer.dtype, transformer.config.head_dim)
    if reason is not None:
        if device.type == "cuda":
            warnings.warn(f"Speed switch 'flash_attention' skipped: {reason}.", stacklevel=3)
        return False
    flash_attention.use_for(pipe)
    return True


def _sea_cache(pipe: Cosmos3OmniPipeline, names: tuple[str, ...], device: torch.device) -> None:
    from diffusers import SeaCacheConfig

    pipe.transformer.enable_cache(SeaCacheConfig())


def _group_offload(pipe: Cosmos3OmniPipeline, names: tuple[str, ...], device: torch.device) -> None:
    import torch

    # One layer at a time, prefetched on a side stream so copies overlap compute (CUDA only).
    pipe.transformer.enable_group_offload(
        onload_device=device,
        offload_device=torch.device("cpu"),
        offload_type="block_level",
        num_blocks_per_group=1,
        use_stream=device.type == "cuda",
    )


def _vae_tiling(pipe: Cosmos3OmniPipeline, names: tuple[str, ...], device: torch.device) -> None:
    pipe.vae.enable_tiling()


_APPLY = {
    "fp8_storage": _fp8_storage,
    "compile": _compile,
    "text_kv_cache": _text_kv_cache,
    "zero_encode_cache": _zero_encode_cache,
    "vae_autotune": _vae_autotune,
    "flash_attention": _flash_attention,
    "sea_cache": _sea_cache,
    "group_offload": _group_offload,
    "vae_tiling": _vae_tiling,
}


def needs_early_apply(names: tuple[str, ...] | list[str]) -> bool:
    """True when the switches change where weights live, so they must be applied before the model is moved."""
    return any(n in MEMORY_SWITCHES for n in names)
