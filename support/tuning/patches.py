"""The cookbook's own speed and memory switches for a loaded `Cosmos3OmniPipeline`, one function each.

What each `SPEED` value turns on is `helpers.speeds.SPEEDS`' `tuning` column, in the order they must be applied. The
tuning notebook turns each switch on in plain sight: diffusers' and PyTorch's public calls written out, and one
function here for each of the cookbook's own. `tuning.pipelines.apply` does the same by name (its docstring tables
every switch); tests/test_speed.py checks that each exact switch keeps the output.
"""

from __future__ import annotations

import collections
import functools
import warnings
from typing import TYPE_CHECKING, Any

from helpers.errors import InvalidSettingError
from tuning.attention import attend, generation_queries_keys_values, text_queries_keys_values

if TYPE_CHECKING:
    import torch
    from diffusers import Cosmos3OmniPipeline

# Recompilations allowed per compiled function once `compile` is on (PyTorch's default is 8).
RECOMPILE_LIMIT = 64
_TEXT_KV_HOOK = "cookbook_text_kv_cache"


def keep_compiled_code() -> str:
    """Where compiled code is kept for the next kernel: the cookbook's cache folder (`$TORCHINDUCTOR_CACHE_DIR` when
    set) holds PyTorch's compiled layers and FlashAttention-4's kernels (else compiled again in every process). Call
    it before the first compilation and before FlashAttention-4 is imported."""
    import os

    from checkpoints.random_weights import cache_root

    folder = os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache_root() / "torch-compile"))
    os.environ.setdefault("FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED", "1")
    os.environ.setdefault("FLASH_ATTENTION_CUTE_DSL_CACHE_DIR", os.path.join(folder, "flash-attention-4"))
    return folder


def device_of(pipe: Cosmos3OmniPipeline) -> torch.device:
    from diffusers.models.modeling_utils import get_parameter_device

    return get_parameter_device(pipe.transformer)


@functools.cache
def _compiled_generation_half():
    import torch

    return torch.compile(_generation_half, fullgraph=True)


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

    attn = layer.self_attn
    query, key, value = generation_queries_keys_values(attn, layer.input_layernorm_moe_gen(gen_seq), cos, sin)
    out = attend(attn, query, torch.cat([text_key, key]), torch.cat([text_value, value]), is_causal=False)
    residual = gen_seq + attn.to_add_out(out.flatten(-2, -1))
    return residual + layer.mlp_moe_gen(layer.post_attention_layernorm_moe_gen(residual))


def _text_half(layer: Any, und_seq: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """The text pathway of `Cosmos3VLTextMoTDecoderLayer.forward` (causal self-attention, then its feed-forward), and
    the text keys and values that the generation half reads."""
    attn = layer.self_attn
    query, key, key_for_generation, value = text_queries_keys_values(attn, layer.input_layernorm(und_seq), cos, sin)
    residual = und_seq + attn.to_out(attend(attn, query, key, value, is_causal=True).flatten(-2, -1))
    return residual + layer.mlp(layer.post_attention_layernorm(residual)), (key_for_generation, value)


def _text_kv_cache_hook(compiled: bool):
    from diffusers.hooks import ModelHook
    from diffusers.hooks.hooks import BaseState, StateManager

    class TextKVCacheHook(ModelHook):
        """Per decoder layer: record the text keys/values at step 0 of a context, then skip the text half."""

        _is_stateful = True
        # Per guidance pass, the times a layer's text keys/values went to new tensors: `cuda_graphs` records again.
        renewed: collections.Counter[str] = collections.Counter()

        def __init__(self) -> None:
            super().__init__()
            self.state_manager = StateManager(BaseState)  # how diffusers hands a hook the pipeline's `cache_context`
            self.key_values: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}  # per guidance pass
            self.generation_half = _compiled_generation_half() if compiled else _generation_half

        def new_forward(self, module, und_seq, gen_seq, rotary_emb):
            context = self.state_manager._context
            if context is None or context.step_index is None:
                # Called outside the pipeline's denoising loop: no step to key the cache on.
                return self.fn_ref.original_forward(und_seq, gen_seq, rotary_emb)
            if compiled and gen_seq._base is not None:
                # Layer 0 gets a slice of one buffer, the rest whole tensors: compiled code would guard on that and
                # compile the generation half twice per shape. A copy costs far less.
                gen_seq = gen_seq.clone()
            cos_und, sin_und, cos_gen, sin_gen = rotary_emb
            held = self.key_values.get(context.name)
            if context.step_index == 0 or held is None or held[1].shape[0] != und_seq.shape[0]:
                und_seq, new = _text_half(module, und_seq, cos_und, sin_und)
                if held is not None and [(t.shape, t.dtype) for t in held] == [(t.shape, t.dtype) for t in new]:
                    # Into the tensors already held, so that CUDA graphs recorded on them serve the new prompt.
                    for target, value in zip(held, new, strict=True):
                        target.copy_(value)
                else:
                    held = self.key_values[context.name] = new
                    self.renewed[context.name] += 1
            # Later steps pass the text stream through unchanged: only generation positions are read at the end.
            return und_seq, self.generation_half(module, gen_seq, *held, cos_gen, sin_gen)

        def reset_state(self, module):
            self.state_manager.reset()
            return module

    return TextKVCacheHook


def cache_text_keys_values(pipe: Cosmos3OmniPipeline, *, compiled: bool = False) -> None:
    """`text_kv_cache`: each layer's text keys and values computed once per prompt, not at every step. Exact: the text
    tokens attend only to each other, causally, and nothing on their path depends on the timestep, so the keys and
    values the generated tokens see are the same at every step; recorded at step 0 of each guidance pass. They stay on
    their layer (Nano, the cookbook's prompts: about 0.3 GiB), and a next prompt of the same length is written into
    the same tensors, where `cuda_graphs` reads them. `compiled=True` when the layers are compiled: the generation
    half, at every step, is then compiled too; the text half (step 0) is not (once per guidance pass, it is not worth
    each new process's tracing and loading)."""
    from diffusers.hooks import HookRegistry
    from diffusers.models.transformers.transformer_cosmos3 import Cosmos3AttnProcessor

    for layer in pipe.transformer.layers:
        processor = layer.self_attn.processor
        # The cache runs the layer's two halves itself; it knows the default processor's attention, and any
        # processor that brings its own `attend` (FlashAttention-4, context parallelism).
        if type(processor) is not Cosmos3AttnProcessor and not hasattr(processor, "attend"):
            raise InvalidSettingError(
                f"text_kv_cache needs the default Cosmos3AttnProcessor, but a layer uses "
                f"{type(processor).__name__}. Drop 'text_kv_cache'."
            )
    hook_cls = _text_kv_cache_hook(compiled)
    for layer in pipe.transformer.layers:
        HookRegistry.check_if_exists_or_initialize(layer).register_hook(hook_cls(), _TEXT_KV_HOOK)
    # `cache_context` finds stateful hooks through a cached list of child registries; refresh it.
    HookRegistry.check_if_exists_or_initialize(pipe.transformer).invalidate_child_registries_cache()


def replay_steps_as_cuda_graphs(pipe: Cosmos3OmniPipeline) -> str | None:
    """`cuda_graphs`: an image has so few tokens that the host's kernel launches, not the GPU, set its step time; each
    guidance pass (the whole transformer call) replays a CUDA graph instead, one for step 0 (which writes the text
    keys of `text_kv_cache`) and one for the steps that read them, per pass and size, kept for the next prompt of the
    same length. Also takes out two of each step's waits for the GPU: the velocity mask's check that some position is
    noisy (with none, its product is zero anyway) and UniPC's copies of its CPU-held sigmas (moved to the GPU).
    Exact. Videos (`MIN_QUERY_TOKENS` generated tokens or more) keep the GPU busy and run as before. Returns None, or
    why it cannot act."""
    import torch
    from diffusers.hooks import HookRegistry
    from torch.utils import _pytree as pytree

    from tuning.flash_attention import MIN_QUERY_TOKENS

    kv_hook = HookRegistry.check_if_exists_or_initialize(pipe.transformer.layers[0]).get_hook(_TEXT_KV_HOOK)
    if kv_hook is None:
        raise InvalidSettingError("cuda_graphs needs text_kv_cache: apply 'text_kv_cache' first.")
    if device_of(pipe).type != "cuda":
        return f"cuda_graphs needs a CUDA GPU; the model runs on {device_of(pipe).type}"
    transformer, forward, mask = pipe.transformer, pipe.transformer.forward, pipe._mask_velocity_predictions
    graphs: dict[tuple[str, bool], tuple[Any, ...]] = {}  # (what it was recorded for, graph, its inputs, outputs)
    stream = torch.cuda.Stream(device_of(pipe))

    def replay_or_run(*args: Any, **inputs: Any) -> Any:
        context = kv_hook.state_manager._context
        # Context parallelism (`tuning.several_gpus`) talks to other GPUs mid-call: not recorded.
        if args or context is None or context.step_index is None or transformer._cp_shard_fn is not None:
            return forward(*args, **inputs)
        if inputs["sequence_length"] - inputs["und_len"] >= MIN_QUERY_TOKENS:
            return forward(**inputs)
        if context.step_index == 0 and isinstance(getattr(pipe.scheduler, "sigmas", None), torch.Tensor):
            pipe.scheduler.sigmas = pipe.scheduler.sigmas.to(inputs["input_ids"].device)  # set anew for each call
        leaves, spec = pytree.tree_flatten(inputs)
        sizes = [(x.shape, x.dtype) if isinstance(x, torch.Tensor) else x for x in leaves]
        name = (context.name, context.step_index == 0)  # step 0 runs the text tower, the others skip it
        if graphs.get(name, (None,))[0] != (spec, kv_hook.renewed[context.name], sizes):
            graphs.pop(name, None)  # its memory back before recording anew
            static = [x.clone() if isinstance(x, torch.Tensor) else x for x in leaves]
            # Once outside the graph first, on the capture stream: compilation and library set-up cannot be recorded.
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                forward(**pytree.tree_unflatten(static, spec))
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
                outputs = forward(**pytree.tree_unflatten(static, spec))
            # Keyed after the warm-up, which may have put the text keys in new tensors: the graph reads those.
            graphs[name] = ((spec, kv_hook.renewed[context.name], sizes), graph, static, outputs, {})
        _, graph, static, outputs, copied = graphs[name]
        for i, (target, value) in enumerate(zip(static, leaves, strict=True)):
            if isinstance(target, torch.Tensor):
                # Most inputs are the call's packed prompt, the same tensor at every step: copied again only when
                # changed. The tensor is held with its stamp, so that its id cannot pass to a new tensor.
                stamp = None if value.is_inference() else (id(value), value._version)
                if stamp is None or copied.get(i, (None,))[0] != stamp:
                    target.copy_(value)
                    copied[i] = (stamp, value)
        graph.replay()
        return outputs

    def velocity_without_waiting(preds_vision, preds_sound, vision_condition_mask, **others):
        if preds_sound is not None or others.get("preds_action") is not None:
            return mask(preds_vision, preds_sound, vision_condition_mask=vision_condition_mask, **others)
        pred = preds_vision[0]
        return pred * (1.0 - vision_condition_mask[0]).to(dtype=pred.dtype, device=pred.device), None, None

    transformer.forward, pipe._mask_velocity_predictions = replay_or_run, velocity_without_waiting
    return None


# Per decoder layer, the text tower's weights: its attention projections and feed-forward (46% of Nano's weights).
# Edge's feed-forward is Nemotron's squared ReLU, which has no gate: `text_tower_modules` takes what a layer has.
TEXT_TOWER = (
    "self_attn.to_q",
    "self_attn.to_k",
    "self_attn.to_v",
    "self_attn.to_out",
    "mlp.gate_proj",
    "mlp.up_proj",
    "mlp.down_proj",
)


def text_tower_modules(layer: torch.nn.Module) -> list[torch.nn.Module]:
    """The text tower's weight-holding modules of one decoder layer, as this checkpoint builds them."""
    found = []
    for name in TEXT_TOWER:
        try:
            found.append(layer.get_submodule(name))
        except AttributeError:
            continue
    return found


def keep_text_tower_in_cpu_memory(pipe: Cosmos3OmniPipeline, device: torch.device) -> None:
    """`text_tower_offload`: the text tower's weights stay in (pinned) CPU memory and are copied to `device` for each
    call. With `text_kv_cache` the text tower runs only at step 0 of each guidance pass, so a generation copies them
    twice, not at every step (as `group_offload` does). Call it before `pipe.to(device)`: the weights it holds are not
    the modules' parameters any more, so the move leaves them where they are. Exact."""
    from diffusers.hooks import HookRegistry, ModelHook

    class WeightsOnCall(ModelHook):
        def __init__(self, module: torch.nn.Module) -> None:
            super().__init__()
            self.held = {}
            for name, param in module.named_parameters(recurse=False):
                weight = param.data.to("cpu")
                self.held[name] = weight.pin_memory() if device.type == "cuda" else weight
                param.data = param.data.new_empty(0)

        def pre_forward(self, module, *args, **kwargs):
            for name, weight in self.held.items():
                getattr(module, name).data = weight.to(device, non_blocking=True)
            return args, kwargs

        def post_forward(self, module, output):
            for name in self.held:
                getattr(module, name).data = getattr(module, name).data.new_empty(0)
            return output

    for layer in pipe.transformer.layers:
        for module in text_tower_modules(layer):
            HookRegistry.check_if_exists_or_initialize(module).register_hook(WeightsOnCall(module), "text_tower")


def cache_blank_video_encoding(pipe: Cosmos3OmniPipeline) -> None:
    """`zero_encode_cache`: text-to-video VAE-encodes an all-zero video only for its latent shape (the values are
    masked out); that encoding is made once per size and kept. Inputs with any non-zero value are encoded as before."""
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


def decode_first_frame_in_2d(pipe: Cosmos3OmniPipeline) -> None:
    """`first_frame_2d`: the VAE's causal convolutions pad a clip's first latent frame (all of an image) in time with
    zero frames, so only each kernel's last time slice meets data; that frame goes through a 2-D convolution with that
    slice instead (a third of the work of a 3x3x3 kernel). Later frames, which see earlier ones, run as before. The
    same output up to numerical noise."""
    from diffusers.models.autoencoders.autoencoder_kl_wan import WanCausalConv3d

    for conv in pipe.vae.modules():
        causal = isinstance(conv, WanCausalConv3d) and conv._padding[4] == conv.kernel_size[0] - 1 > 0
        if causal and conv.stride[0] == conv.dilation[0] == 1:
            conv.forward = functools.partial(_first_frame_in_2d, conv, conv.forward)


def _first_frame_in_2d(conv: Any, forward: Any, x: torch.Tensor, cache_x: torch.Tensor | None = None) -> torch.Tensor:
    import torch.nn.functional as F

    if cache_x is not None or x.shape[2] != 1:
        return forward(x, cache_x)
    frame = F.pad(x[:, :, 0], conv._padding[:4])  # the spatial padding the 3-D path applies
    weight = conv.weight[:, :, -1]
    return F.conv2d(frame, weight, conv.bias, conv.stride[1:], 0, conv.dilation[1:], conv.groups).unsqueeze(2)


def use_fp8_linears(pipe: Cosmos3OmniPipeline, device: torch.device | None = None) -> str | None:
    """`fp8_linears`: the generation pathway's matrix products in FP8 through torchao (returns None); where they
    cannot run, bf16 stays and the reason is returned (warned on a CUDA GPU). Apply before compiling."""
    from tuning import fp8

    reason = fp8.linears_unavailable_reason(device or device_of(pipe))
    if reason is not None:
        if (device or device_of(pipe)).type == "cuda":
            warnings.warn(f"Speed switch 'fp8_linears' skipped: {reason}.", stacklevel=2)
        return reason
    fp8.quantize_generation_linears(pipe)
    return None


def use_fp8_attention(pipe: Cosmos3OmniPipeline, device: torch.device | None = None) -> str | None:
    """`fp8_attention`: FlashAttention-3's FP8 kernel for the generation tokens' attention (returns None); where it
    cannot run, PyTorch's attention stays and the reason is returned (warned on a CUDA GPU)."""
    from tuning import fp8

    device = device or device_of(pipe)
    return _kernel_or_why_not(
        "fp8_attention", device, fp8.attention_unavailable_reason(device), lambda: fp8.use_for(pipe)
    )


def use_flash_attention_3(pipe: Cosmos3OmniPipeline, device: torch.device | None = None) -> str | None:
    """`flash_attention_3`: bf16 FlashAttention-3 for every large attention call (returns None); where it cannot run,
    PyTorch's attention stays and the reason is returned (warned on a CUDA GPU)."""
    from tuning import flash_attention_3

    device = device or device_of(pipe)
    reason = flash_attention_3.unavailable_reason(device)
    return _kernel_or_why_not("flash_attention_3", device, reason, lambda: flash_attention_3.use_for(pipe))


class DecoderPasses:
    """A pipeline's transformer calls (one per guidance pass of each step: 70 for 35 steps with guidance) and how many
    of them ran the decoder stack; a step cache answers the others from a residual it keeps. `reset` before a
    generation, read after it: printed, it is "computed of calls"."""

    def __init__(self) -> None:
        self.calls = 0
        self.computed = 0

    def reset(self) -> None:
        self.calls = self.computed = 0

    def __str__(self) -> str:
        return f"{self.computed} of {self.calls}"


_PASSES_ATTR = "_cookbook_decoder_passes"


def count_decoder_passes(pipe: Cosmos3OmniPipeline) -> DecoderPasses:
    """Counts the passes of `pipe`'s transformer and those that computed its decoder stack (the same counter on a
    second call). Call it before turning a step cache on: SeaCache keeps the decoder stack it finds and calls it only
    on the passes it computes, so the count sits inside the cache."""
    transformer = pipe.transformer
    if (passes := getattr(transformer, _PASSES_ATTR, None)) is not None:
        return passes
    if transformer.is_cache_enabled:
        raise InvalidSettingError(
            "count_decoder_passes comes before the step cache: call it, then pipe.transformer.enable_cache(...)."
        )
    passes = DecoderPasses()
    run_decoder_stack = transformer._run_decoder_stack

    def counted(*args: Any, **kwargs: Any) -> Any:
        passes.computed += 1
        return run_decoder_stack(*args, **kwargs)

    def called(module: Any, args: Any) -> None:
        passes.calls += 1

    transformer._run_decoder_stack = counted
    transformer.register_forward_pre_hook(called)
    setattr(transformer, _PASSES_ATTR, passes)
    return passes


def use_flash_attention(pipe: Cosmos3OmniPipeline, device: torch.device | None = None) -> str | None:
    """`flash_attention`: FlashAttention-4 for every attention call (returns None); where it cannot run, PyTorch's
    attention stays and the reason is returned (and, on a CUDA GPU, where it is worth installing, warned)."""
    from tuning import flash_attention

    device = device or device_of(pipe)
    transformer = pipe.transformer
    reason = flash_attention.unavailable_reason(device, transformer.dtype, transformer.config.head_dim)

    def use() -> None:
        keep_compiled_code()  # before the kernel's compiler is imported: its kernels are kept too
        flash_attention.use_for(pipe)

    return _kernel_or_why_not("flash_attention", device, reason, use)


def _kernel_or_why_not(switch: str, device: torch.device, reason: str | None, use: Any) -> str | None:
    """`use()` the switch's kernel, or, where `reason` says why it cannot run, leave PyTorch's and return the reason
    (warned on a CUDA GPU, where the kernel is worth installing)."""
    if reason is not None:
        if device.type == "cuda":
            warnings.warn(f"Speed switch {switch!r} skipped: {reason}.", stacklevel=3)
        return reason
    use()
    return None
