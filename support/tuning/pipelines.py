"""Cosmos 3 pipelines for code without a notebook: benchmarks, the several-GPU runner and tests.

`load_pipeline` is the Diffusers notebooks' load cells in one call, `notebook_call` the audiovisual notebook's own
`generate` (its tagged `call` cell, run on a pipeline: the call is written once, in the notebook), and `apply` turns
the switches of `tuning.patches` and diffusers' own on by name, as make_it_fast_with_diffusers.ipynb's cells do one
by one; what each switch does and to the output is `helpers.speeds.SWITCHES`, in the order they are applied. Applying
the same names again does nothing; `applied` and `skipped` say what is on and what this machine cannot run
(`cuda_graphs` is skipped off CUDA, `flash_attention` where FlashAttention-4 cannot run and `flash_attention_3` and
`fp8_attention` off Hopper, and PyTorch's attention stays; `fp8_linears` where FP8 matrix products cannot run, and
bf16 stays). `EXCLUSIVE` lists the switches that cannot be on together, and why.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from checkpoints import Checkpoint, resolve
from helpers import speeds
from helpers.errors import InvalidSettingError
from tuning import notebook_calls, patches

if TYPE_CHECKING:
    import torch
    from diffusers import Cosmos3OmniPipeline

# The switches in the order they are applied, those that decide how much of the model sits on the accelerator, and
# those whose output matches the baseline's up to numerical noise: all from the one table, `helpers.speeds`.
SWITCHES: tuple[str, ...] = tuple(speeds.SWITCHES)
MEMORY_SWITCHES: frozenset[str] = speeds.MEMORY_SWITCHES
EXACT_SWITCHES: frozenset[str] = speeds.EXACT_SWITCHES
# SeaCache as NVIDIA's inference command sets it (NVIDIA/cosmos-framework's CLI turns it on by default): a larger
# budget than diffusers' default of 0.25, and no cap on steps reused in a row (diffusers caps them at 2).
NVIDIA_SEA_CACHE = {"threshold": 0.35, "max_consecutive_cached": 0}
# Switches that cannot be on together, and why: no `SPEED` value holds such a pair (tests/test_speeds.py).
_STEP_CACHE_AND_GRAPHS = (
    "SeaCache decides on the CPU at every step whether to skip the decoder stack, which a recorded CUDA graph cannot "
    "do; the graphs act on images only, so a SPEED with a step cache leaves them out."
)
_ONE_ATTENTION = "each sets the attention processor of every layer."
EXCLUSIVE: tuple[tuple[frozenset[str], str], ...] = (
    (frozenset({"cuda_graphs", "sea_cache"}), _STEP_CACHE_AND_GRAPHS),
    (frozenset({"cuda_graphs", "nvidia_sea_cache"}), _STEP_CACHE_AND_GRAPHS),
    (frozenset({"sea_cache", "nvidia_sea_cache"}), "both set the transformer's one step cache."),
    (
        frozenset({"fp8_storage", "compile"}),
        "diffusers' layerwise casting makes new parameters inside each forward, which torch.compile(fullgraph=True) "
        "cannot trace.",
    ),
    (
        frozenset({"fp8_storage", "fp8_linears"}),
        "both replace the transformer's weights with float8 ones, one for memory and one for speed.",
    ),
    (frozenset({"flash_attention", "flash_attention_3"}), _ONE_ATTENTION),
    (frozenset({"flash_attention", "fp8_attention"}), _ONE_ATTENTION),
    (frozenset({"flash_attention_3", "fp8_attention"}), _ONE_ATTENTION),
)
_APPLIED_ATTR = "_cookbook_speedups"
_SKIPPED_ATTR = "_cookbook_skipped_speedups"


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
    pipe: Cosmos3OmniPipeline, names: tuple[str, ...] | list[str], device: torch.device | None = None
) -> tuple[str, ...]:
    """Turn on the named switches; returns all switches now on.

    `device` is where the model computes; it defaults to where the transformer's weights are. Loading passes the
    accelerator while the weights are still in CPU memory, so that memory switches act before they move.

    Switches stay on once applied (compiled layers and float8 weights cannot be undone): a later call may add
    switches that come after every applied one in `SWITCHES`, and otherwise raises, asking for a fresh pipeline.
    """
    names = check(names)
    done, passed = applied(pipe), skipped(pipe)
    every = {*names, *done, *passed}
    for pair, why in EXCLUSIVE:
        if pair <= every:
            first, second = sorted(pair, key=SWITCHES.index)
            raise InvalidSettingError(f"{first!r} and {second!r} cannot be combined: {why} Drop one of them.")
    if {"compile", "group_offload"} <= every and "text_kv_cache" not in every:
        raise InvalidSettingError(
            "'compile' and 'group_offload' need 'text_kv_cache' as well: without it, compile_repeated_blocks compiles "
            "each whole layer call, and group offloading's hooks in it cannot be traced. Add 'text_kv_cache' or drop "
            "one of them."
        )
    new = [n for n in names if n not in done and n not in passed]
    last = max((SWITCHES.index(n) for n in (*done, *passed)), default=-1)
    if new and SWITCHES.index(new[0]) < last:
        raise InvalidSettingError(
            f"Cannot add {new[0]!r} to a pipeline that already has {list(done)}: switches must be applied in the "
            f"order {list(SWITCHES)}. Load the pipeline again and apply them together."
        )
    target = device or patches.device_of(pipe)
    for name in new:
        if _APPLY[name](pipe, names, target) is False:
            passed = (*passed, name)
            setattr(pipe.transformer, _SKIPPED_ATTR, passed)
        else:
            done = (*done, name)
            setattr(pipe.transformer, _APPLIED_ATTR, done)
    return done


def _fp8_storage(pipe: Cosmos3OmniPipeline) -> None:
    import torch

    pipe.transformer.enable_layerwise_casting(storage_dtype=torch.float8_e4m3fn, compute_dtype=pipe.transformer.dtype)


def _compile(pipe: Cosmos3OmniPipeline, names: tuple[str, ...]) -> None:
    import torch

    patches.keep_compiled_code()
    # Each new output size, prompt length or attention kernel can cost a recompilation of the shared layer code
    # (automatic dynamic shapes do not cover every guard). At PyTorch's default limit of 8 a session that tries a
    # few modes and tiers fails with "recompile limit exceeded" under fullgraph, so allow a session's worth.
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, patches.RECOMPILE_LIMIT)
    if "text_kv_cache" in names:
        # The text cache runs each layer's two halves itself and compiles the one it runs at every step. Compiled
        # whole, a layer would trace the cache's bookkeeping into its graphs: on the tiny checkpoint 12 graphs and
        # about 100 s of compiling for a first video, against 2 graphs and 13 s (docs/performance.md).
        return
    pipe.transformer.compile_repeated_blocks(fullgraph=True)


def _group_offload(pipe: Cosmos3OmniPipeline, device: torch.device) -> None:
    import torch

    # One layer at a time, prefetched on a side stream so copies overlap compute (CUDA only).
    pipe.transformer.enable_group_offload(
        onload_device=device,
        offload_device=torch.device("cpu"),
        offload_type="block_level",
        num_blocks_per_group=1,
        use_stream=device.type == "cuda",
    )


def _sea_cache(pipe: Cosmos3OmniPipeline, **settings: float) -> None:
    from diffusers import SeaCacheConfig

    patches.count_decoder_passes(pipe)  # before the cache, which then calls the counted stack on the passes it computes
    pipe.transformer.enable_cache(SeaCacheConfig(**settings))


# What `apply` runs for each switch (a False result means skipped on this machine).
_APPLY = {
    "fp8_storage": lambda pipe, names, device: _fp8_storage(pipe),
    "text_tower_offload": lambda pipe, names, device: patches.keep_text_tower_in_cpu_memory(pipe, device),
    "compile": lambda pipe, names, device: _compile(pipe, names),
    "text_kv_cache": lambda pipe, names, device: patches.cache_text_keys_values(pipe, compiled="compile" in names),
    "cuda_graphs": lambda pipe, names, device: patches.replay_steps_as_cuda_graphs(pipe) is None,
    "zero_encode_cache": lambda pipe, names, device: patches.cache_blank_video_encoding(pipe),
    "first_frame_2d": lambda pipe, names, device: patches.decode_first_frame_in_2d(pipe),
    "flash_attention": lambda pipe, names, device: patches.use_flash_attention(pipe, device) is None,
    "fp8_linears": lambda pipe, names, device: patches.use_fp8_linears(pipe, device) is None,
    "flash_attention_3": lambda pipe, names, device: patches.use_flash_attention_3(pipe, device) is None,
    "fp8_attention": lambda pipe, names, device: patches.use_fp8_attention(pipe, device) is None,
    "sea_cache": lambda pipe, names, device: _sea_cache(pipe),
    "nvidia_sea_cache": lambda pipe, names, device: _sea_cache(pipe, **NVIDIA_SEA_CACHE),
    "group_offload": lambda pipe, names, device: _group_offload(pipe, device),
    "vae_tiling": lambda pipe, names, device: pipe.vae.enable_tiling(),
}


def load_pipeline(
    model: str = "nvidia/Cosmos3-Nano",
    *,
    device: str = "auto",
    guardrails: str | bool | None = "auto",
    speed: str = "none",
) -> tuple[Cosmos3OmniPipeline, Checkpoint]:
    """The tuning notebook's load cells: `from_pretrained`, the memory switches of SPEED `speed`, the move to the
    device, the rest."""
    from diffusers import Cosmos3OmniPipeline
    from diffusers.utils import logging as diffusers_logging

    checkpoint = resolve(model, device=device, guardrails=guardrails)
    names = speeds.switches(speed, "tuning")
    was_on = diffusers_logging.is_progress_bar_enabled()
    diffusers_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*weight_norm.*", category=FutureWarning)
            pipe = Cosmos3OmniPipeline.from_pretrained(
                checkpoint.path,
                dtype=checkpoint.dtype,
                enable_safety_checker=checkpoint.guardrails,
                use_native_flow_schedule=True,  # vLLM-Omni's schedule, to the step (the notebook says why)
            )
    finally:
        if was_on:
            diffusers_logging.enable_progress_bar()
    apply(pipe, [n for n in names if n in MEMORY_SWITCHES], checkpoint.device)
    pipe.to(checkpoint.device)
    apply(pipe, names, checkpoint.device)
    pipe.set_progress_bar_config(disable=True)
    return pipe, checkpoint


def notebook_call(pipe: Cosmos3OmniPipeline) -> Callable[..., Any]:
    """run_with_diffusers.ipynb's own `generate(s, prompt, negative_prompt="", output_type="np", **inputs)` on `pipe`:
    its tagged `call` cell, run here, so that code without the notebook makes the notebook's `pipe(...)` call and
    not a copy of it."""
    return notebook_calls.define("run_with_diffusers.ipynb", pipe=pipe)["generate"]
