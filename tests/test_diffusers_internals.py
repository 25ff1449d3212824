"""The private parts of diffusers that the tuning package (the cookbook's own speed patches, FlashAttention-4 and the
several-GPU runner) relies on are still there: the one list of them. The main notebooks and what they import use none.

pyproject.toml pins diffusers below 0.43 because of them. When a new diffusers release renames one, this test says
which name is gone and which cookbook feature needs it, instead of a generation failing somewhere deep.
"""

from __future__ import annotations

import importlib
import inspect

import diffusers
import pytest

# (module, attribute, what needs it)
MODULE_NAMES = [
    ("diffusers.models.transformers.transformer_cosmos3", "_rotate_half", "text_kv_cache (patches.py)"),
    ("diffusers.models.transformers.transformer_cosmos3", "Cosmos3AttnProcessor", "text_kv_cache (patches.py)"),
    ("diffusers.hooks.hooks", "BaseState", "text_kv_cache (patches.py)"),
    ("diffusers.hooks.hooks", "StateManager", "text_kv_cache (patches.py)"),
    ("diffusers.models.modeling_utils", "get_parameter_device", "speed.device_of"),
    ("diffusers.models.autoencoders.autoencoder_kl_wan", "WanCausalConv3d", "split VAE decode (several_gpus)"),
    ("diffusers.models.autoencoders.autoencoder_kl_wan", "WanAttentionBlock", "split VAE decode (several_gpus)"),
    ("diffusers.models.autoencoders.vae", "DecoderOutput", "split VAE decode (several_gpus)"),
]
# Attributes of one decoder layer (and its attention) that the text K/V cache reads.
LAYER_NAMES = (
    "input_layernorm",
    "input_layernorm_moe_gen",
    "post_attention_layernorm",
    "post_attention_layernorm_moe_gen",
    "mlp",
    "mlp_moe_gen",
)
ATTENTION_NAMES = (
    "to_k",
    "to_v",
    "norm_k",
    "k_norm_und_for_gen",
    "add_q_proj",
    "add_k_proj",
    "add_v_proj",
    "norm_added_q",
    "norm_added_k",
    "to_add_out",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "processor",
    "to_q",
    "norm_q",
    "to_out",  # and context parallelism's processor (several_gpus)
)


def _gone(name: str, needed_by: str) -> str:
    return (
        f"diffusers {diffusers.__version__} has no {name}, which the cookbook's {needed_by} uses. Install a diffusers "
        "the project supports (pyproject.toml: >=0.42.1,<0.43), or update that module to the new diffusers."
    )


@pytest.mark.parametrize(("module", "name", "needed_by"), MODULE_NAMES, ids=lambda v: str(v))
def test_module_level_names_exist(module: str, name: str, needed_by: str) -> None:
    assert hasattr(importlib.import_module(module), name), _gone(f"{module}.{name}", needed_by)


def test_dispatch_takes_what_the_text_cache_gives() -> None:
    from diffusers.models.attention_dispatch import dispatch_attention_fn

    assert "parallel_config" in inspect.signature(dispatch_attention_fn).parameters, _gone(
        "dispatch_attention_fn(parallel_config=...)", "text_kv_cache"
    )


def test_the_pipeline_and_its_layers_have_what_the_switches_use(tiny_pipe) -> None:
    from diffusers.hooks import HookRegistry

    pipe, _ = tiny_pipe
    assert callable(getattr(pipe.transformer, "_run_decoder_stack", None)), _gone(
        "Cosmos3OmniTransformer._run_decoder_stack", "count_decoder_passes (the step cache's count, patches.py)"
    )
    assert callable(getattr(pipe, "_encode_video", None)), _gone(
        "Cosmos3OmniPipeline._encode_video", "zero_encode_cache"
    )
    mask = list(inspect.signature(pipe._mask_velocity_predictions).parameters)
    assert mask[:3] == ["preds_vision", "preds_sound", "vision_condition_mask"] and "preds_action" in mask, _gone(
        "Cosmos3OmniPipeline._mask_velocity_predictions(preds_vision, preds_sound, vision_condition_mask, ...)",
        "cuda_graphs",
    )
    assert hasattr(HookRegistry, "invalidate_child_registries_cache"), _gone(
        "HookRegistry.invalidate_child_registries_cache", "text_kv_cache"
    )
    layer = pipe.transformer.layers[0]
    for name in LAYER_NAMES:
        assert hasattr(layer, name), _gone(f"decoder layer .{name}", "text_kv_cache")
    for name in ATTENTION_NAMES:
        assert hasattr(layer.self_attn, name), _gone(f"decoder attention .{name}", "text_kv_cache")
    for name in ("_attention_backend", "_parallel_config"):
        assert hasattr(layer.self_attn.processor, name), _gone(f"attention processor .{name}", "speed.attention_of")
    assert callable(getattr(layer.self_attn, "set_processor", None)), _gone(
        "the attention module's set_processor", "flash_attention and context parallelism"
    )


def test_the_parallel_runner_finds_its_seams(tiny_pipe) -> None:
    from diffusers.models.autoencoders.autoencoder_kl_wan import WanCausalConv3d

    pipe, _ = tiny_pipe
    forward = inspect.getsource(type(pipe.transformer).forward)
    for seam in ("_cp_shard_fn", "_cp_gather_fn"):
        assert seam in forward, _gone(f"the transformer's {seam} seam", "context parallelism (several_gpus)")
    call = inspect.getsource(type(pipe).__call__)
    for used in ("self.tokenize_prompt(", "self.transformer.cache_context(", '"cond"', '"uncond"'):
        assert used in call, _gone(f"{used!r} in Cosmos3OmniPipeline.__call__", "CFG parallelism (several_gpus)")
    for name in ("do_classifier_free_guidance", "num_timesteps"):
        assert isinstance(getattr(type(pipe), name, None), property), _gone(name, "the parallel runner")
    conv = next(m for m in pipe.vae.decoder.modules() if isinstance(m, WanCausalConv3d))
    assert len(conv._padding) == 6, _gone("WanCausalConv3d._padding", "split VAE decode (several_gpus)")
    assert list(inspect.signature(type(conv).forward).parameters) == ["self", "x", "cache_x"], _gone(
        "WanCausalConv3d.forward(x, cache_x)", "first_frame_2d"
    )
