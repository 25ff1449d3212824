"""`SPEED`, one vocabulary for every notebook: what each value promises, and what it turns on in each notebook.

A value means one thing everywhere (its promise, and whether the output stays the same); how a notebook keeps that
promise depends on what the notebook may use:
- the main Diffusers notebooks of each family (`audiovisual`, `action`, `transfer`, `dataset`, `post_training`):
  diffusers' own public switches, one line each in the notebook;
- the tuning notebook (`tuning`, make_it_fast_with_diffusers.ipynb): the cookbook's own switches as well, applied by
  the `tuning` package (`tuning.speed` names each one);
- a vLLM-Omni server a notebook starts (`server`): `vllm serve` flags. A family's vLLM-Omni notebook takes the
  values its Diffusers twin takes.
Where a value does not apply (None), that notebook refuses it in its set-up cell and names the values it takes.
Switches that need a GPU say on a CPU that they are skipped, and the notebook goes on. docs/performance.md measures
each value.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from helpers.errors import InvalidSettingError, allowed

NOTEBOOKS: tuple[str, ...] = ("audiovisual", "action", "transfer", "dataset", "post_training", "tuning")


@dataclass(frozen=True)
class Speed:
    """One value of `SPEED`: its promise, whether the output stays the same, and per notebook what it turns on (None:
    refused there)."""

    name: str
    promise: str
    exact: bool  # the same output as `none` up to numerical noise
    audiovisual: tuple[str, ...] | None
    action: tuple[str, ...] | None
    transfer: tuple[str, ...] | None
    dataset: tuple[str, ...] | None
    post_training: tuple[str, ...] | None
    tuning: tuple[str, ...] | None
    server: tuple[str, ...] | None

    def switches(self, notebook: str) -> tuple[str, ...] | None:
        return getattr(self, notebook)


# The cookbook's exact switches, which `fast` adds in the tuning notebook.
_EXACT_PATCHES = ("text_kv_cache", "zero_encode_cache", "first_frame_2d")
SPEEDS: dict[str, Speed] = {
    s.name: s
    for s in (
        Speed(
            "none",
            "diffusers as it comes: the reference output, and the reference time",
            exact=True,
            audiovisual=(),
            action=(),
            transfer=(),
            dataset=(),
            post_training=(),
            tuning=(),
            server=("--enforce-eager",),
        ),
        Speed(
            "fast",
            "the fastest route this notebook has that keeps the output, up to numerical noise",
            exact=True,
            audiovisual=("compile",),
            action=("compile",),
            transfer=("compile",),
            dataset=("compile",),
            post_training=None,  # compiling a training step (LoRA, autograd, each caption length) is not measured
            tuning=("compile", *_EXACT_PATCHES, "flash_attention", "cuda_graphs"),
            server=(),  # vLLM-Omni compiles unless told --enforce-eager
        ),
        Speed(
            "turbo",
            "fast plus SeaCache, which skips layer work on steps where little changes: quicker again, the output "
            "changes",
            exact=False,
            audiovisual=("compile", "sea_cache"),
            action=None,  # not measured on action tasks
            transfer=None,
            dataset=("compile", "sea_cache"),
            post_training=None,  # a step cache is for sampling; a training step runs the whole model
            tuning=("compile", *_EXACT_PATCHES, "flash_attention", "sea_cache"),
            server=("--cache-backend", "sea_cache"),
        ),
        Speed(
            "fp8",
            "FP8 matrix products on the generation pathway, attention in bf16 (FlashAttention-3), as NVIDIA's own "
            "FP8 runs it (Hopper GPUs): faster for long videos, the output changes a little",
            exact=False,
            audiovisual=None,  # the published FP8 route there is MODEL="...@fp8"
            action=None,
            transfer=None,
            dataset=None,
            post_training=None,
            tuning=("fp8_linears", "compile", *_EXACT_PATCHES, "flash_attention_3", "cuda_graphs"),
            server=None,
        ),
        Speed(
            "fp8_turbo",
            "fp8 plus SeaCache as NVIDIA's inference command sets it (threshold 0.35, no cap on steps skipped in a "
            "row): NVIDIA's fastest published configuration, the output changes",
            exact=False,
            audiovisual=None,
            action=None,
            transfer=None,
            dataset=None,
            post_training=None,
            tuning=("fp8_linears", "compile", *_EXACT_PATCHES, "flash_attention_3", "nvidia_sea_cache"),
            server=None,
        ),
        Speed(
            "fp8_attention",
            "fp8 with the attention in FP8 too (FlashAttention-3's FP8 kernel): quicker than fp8, the output changes "
            "more (about a third of a seed's effect on random weights)",
            exact=False,
            audiovisual=None,
            action=None,
            transfer=None,
            dataset=None,
            post_training=None,
            tuning=("fp8_linears", "compile", *_EXACT_PATCHES, "fp8_attention", "cuda_graphs"),
            server=None,
        ),
        Speed(
            "low_vram",
            "less GPU memory: float8 weight storage and a tiled VAE decode (Nano at 480p on 24 GiB with diffusers' "
            "switches; 16 GiB with the tuning notebook's, which keep the text tower in CPU memory); about as fast, "
            "the output changes slightly",
            exact=False,
            audiovisual=("fp8_storage", "vae_tiling"),
            action=None,
            transfer=None,
            dataset=None,  # a dataset is made for throughput; memory is the audiovisual notebooks' lesson
            post_training=None,
            tuning=("fp8_storage", "text_tower_offload", "text_kv_cache", "zero_encode_cache", "vae_tiling"),
            server=("--quantization", "fp8", "--vae-use-tiling"),
        ),
        Speed(
            "min_vram",
            "the least GPU memory: float8 weights streamed layer by layer from CPU memory (Nano at 256p on 8 GiB); "
            "far slower, the output changes slightly",
            exact=False,
            audiovisual=("fp8_storage", "group_offload", "vae_tiling"),
            action=None,
            transfer=None,
            dataset=None,
            post_training=None,
            tuning=("fp8_storage", "group_offload", "vae_tiling"),
            server=("--quantization", "fp8", "--enable-layerwise-offload", "--vae-use-tiling"),
        ),
    )
}
# Server flags that need a GPU: a server on a CPU starts without them, and says so.
GPU_ONLY_FLAGS: tuple[str, ...] = ("--quantization", "--enable-layerwise-offload")


def offered(notebook: str, served: bool = False) -> tuple[str, ...]:
    """The values a notebook takes: `notebook` names the family (or "tuning"); `served` is its vLLM-Omni twin, which
    takes the values that both its Diffusers twin and a server take."""
    if notebook not in NOTEBOOKS:
        raise ValueError(f"no notebook {notebook!r}: {NOTEBOOKS}")
    return tuple(
        name for name, s in SPEEDS.items() if s.switches(notebook) is not None and (not served or s.server is not None)
    )


def switches(speed: str, notebook: str = "audiovisual") -> tuple[str, ...]:
    """What `speed` turns on in `notebook`; a value it does not take fails with the ones it does."""
    if speed not in offered(notebook):
        raise InvalidSettingError(
            f"SPEED={speed!r} is not one of this notebook's speeds. Allowed: {allowed(offered(notebook))}."
            + _elsewhere(speed)
        )
    return SPEEDS[speed].switches(notebook)  # type: ignore[return-value]


def server_flags(speed: str, notebook: str = "audiovisual", *, gpu: bool = True) -> tuple[str, ...]:
    """The `vllm serve` flags that give a server the effect of `speed` (refused where `notebook`'s Diffusers twin
    does not take it); on a CPU the GPU-only ones are left out."""
    if speed not in offered(notebook, served=True):
        raise InvalidSettingError(
            f"SPEED={speed!r} is not one of this notebook's speeds. Allowed: "
            f"{allowed(offered(notebook, served=True))}." + _elsewhere(speed)
        )
    flags = SPEEDS[speed].server or ()
    return flags if gpu else without_gpu_only(flags)


def without_gpu_only(flags: tuple[str, ...]) -> tuple[str, ...]:
    """`flags` less those that need a GPU (with their values)."""
    kept: list[str] = []
    skip = False
    for flag in flags:
        if skip and not flag.startswith("--"):
            continue
        skip = flag in GPU_ONLY_FLAGS
        if not skip:
            kept.append(flag)
    return tuple(kept)


def _elsewhere(speed: str) -> str:
    if speed not in SPEEDS:
        return ""
    where = [n for n in NOTEBOOKS if SPEEDS[speed].switches(n) is not None]
    return f" {speed!r} is offered by the {', '.join(where)} notebook{'s' if len(where) > 1 else ''}."


def meaning(speed: str) -> str:
    """What `speed` promises, in every notebook."""
    return SPEEDS[speed].promise


def table() -> list[dict[str, str]]:
    """The one table, a row per value: what it turns on in each notebook (for docs and the notebooks)."""

    def cell(switched: tuple[str, ...] | None) -> str:
        if switched is None:
            return "refused"
        return ", ".join(switched) or "nothing"

    return [
        {
            "SPEED": s.name,
            "output": "same" if s.exact else "changes",
            **{n: cell(s.switches(n)) for n in NOTEBOOKS},
            "server": cell(s.server) if s.server is None else " ".join(s.server) or "(vLLM-Omni's defaults)",
        }
        for s in SPEEDS.values()
    ]


ALLOCATOR_ENV = "PYTORCH_CUDA_ALLOC_CONF"
# Under a tight memory cap PyTorch's caching allocator loses gigabytes to fragmentation (measured at 720p: 21.2 GiB in
# use plus 2.6 GiB in unusable pieces at a 24 GiB cap); growable segments let freed memory be reused whole.
MEMORY_ALLOCATOR = "expandable_segments:True"


def configure_allocator(speed: str) -> str:
    """For the memory values (those that store weights in float8), PyTorch's expandable segments, set before CUDA
    starts (a user's own kept); says so."""
    import torch

    if "fp8_storage" not in (SPEEDS[speed].audiovisual or SPEEDS[speed].tuning or ()):
        return f"{ALLOCATOR_ENV}: PyTorch's default (SPEED={speed!r} needs nothing else)"
    if os.environ.get(ALLOCATOR_ENV):
        return f"{ALLOCATOR_ENV}={os.environ[ALLOCATOR_ENV]!r}: yours, kept"
    if torch.cuda.is_initialized():
        return f"{ALLOCATOR_ENV} not set: CUDA has already started in this kernel; restart it to use {MEMORY_ALLOCATOR}"
    os.environ[ALLOCATOR_ENV] = MEMORY_ALLOCATOR
    return f"{ALLOCATOR_ENV}={MEMORY_ALLOCATOR!r}, so that SPEED={speed!r} fits its memory"
