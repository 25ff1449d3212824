"""`SPEED`, one vocabulary for every notebook: what each value promises, and what it turns on in each notebook.

A value means one thing everywhere (its promise, and whether the output stays the same); how a notebook keeps that
promise depends on what the notebook may use:
- the main Diffusers notebooks of each family (`audiovisual`, `action`, `transfer`, `dataset`, `post_training`):
  diffusers' own public switches, one line each in the notebook;
- the tuning notebook (`tuning`, make_it_fast_with_diffusers.ipynb): the cookbook's own switches as well, applied by
  the `tuning` package (`tuning.patches` holds them, `tuning.pipelines.apply` turns them on by name);
- a vLLM-Omni server a notebook starts (`server`): `vllm serve` flags. A family's vLLM-Omni notebook takes the
  values its Diffusers twin takes.
Where a value does not apply (None), that notebook refuses it in its set-up cell and names the values it takes.
Switches that need a GPU say on a CPU that they are skipped, and the notebook goes on. docs/performance.md measures
each value.

This is the one table of what `SPEED` means: `SWITCHES` says what each switch does, and every subset the code uses
is derived from the two tables (`EXACT_SWITCHES`, `MEMORY_SWITCHES`, `exact_values`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from helpers.errors import InvalidSettingError, allowed

NOTEBOOKS: tuple[str, ...] = ("audiovisual", "action", "transfer", "dataset", "post_training", "tuning")


@dataclass(frozen=True)
class Switch:
    """One switch a value turns on: what it does to the output, what it does, and whether it decides how much of the
    model sits on the accelerator (`memory`: applied before the weights move there)."""

    name: str
    output: str  # "same", "same up to noise", "changes slightly" or "changes"
    does: str
    memory: bool = False

    @property
    def exact(self) -> bool:
        """The output matches the reference's up to numerical noise."""
        return self.output.startswith("same")


# Every switch, in the order they are applied: hooks registered later wrap earlier ones, so compilation comes before
# the text cache (which then compiles its own per-step half), and group offloading, outermost, moves a layer's
# weights to the GPU before anything inside it runs.
SWITCHES: dict[str, Switch] = {
    s.name: s
    for s in (
        Switch("fp8_storage", "changes", "transformer weights stored in float8, computed in bf16", memory=True),
        Switch(
            "text_tower_offload", "same", "the text tower's weights in CPU memory, on the GPU at step 0", memory=True
        ),
        Switch("fp8_linears", "changes", "the generation pathway's matrix products in FP8 (torchao)"),
        Switch("compile", "same up to noise", "compile_repeated_blocks(fullgraph=True), or text_kv_cache's half"),
        Switch("text_kv_cache", "same up to noise", "the text tower's keys and values, once per prompt"),
        Switch("zero_encode_cache", "same", "the VAE encoding of text-to-video's blank video, once per size"),
        Switch("first_frame_2d", "same up to noise", "the VAE's convolutions in 2-D for a clip's first frame"),
        Switch("flash_attention", "same up to noise", "FlashAttention-4 on Hopper and Blackwell GPUs"),
        Switch("flash_attention_3", "same up to noise", "bf16 FlashAttention-3 on Hopper GPUs, as NVIDIA's FP8 runs"),
        Switch("fp8_attention", "changes", "FlashAttention-3's FP8 kernel for the generation tokens (Hopper)"),
        Switch("cuda_graphs", "same", "an image's transformer call replayed as a CUDA graph (CUDA only)"),
        Switch("sea_cache", "changes", "diffusers' SeaCache: the decoder's residual reused where little changes"),
        Switch("nvidia_sea_cache", "changes", "SeaCache as NVIDIA's inference command sets it (0.35, no cap)"),
        Switch("group_offload", "same", "transformer layers streamed from CPU memory one at a time", memory=True),
        Switch("vae_tiling", "changes slightly", "the video decoded in overlapping tiles"),
    )
}
EXACT_SWITCHES: frozenset[str] = frozenset(name for name, s in SWITCHES.items() if s.exact)
MEMORY_SWITCHES: frozenset[str] = frozenset(name for name, s in SWITCHES.items() if s.memory)


@dataclass(frozen=True)
class Speed:
    """One value of `SPEED`: its promise, and per notebook what it turns on (None: refused there)."""

    name: str
    promise: str
    audiovisual: tuple[str, ...] | None
    action: tuple[str, ...] | None
    transfer: tuple[str, ...] | None
    dataset: tuple[str, ...] | None
    post_training: tuple[str, ...] | None
    tuning: tuple[str, ...] | None
    server: tuple[str, ...] | None

    def switches(self, notebook: str) -> tuple[str, ...] | None:
        return getattr(self, notebook)

    @property
    def exact(self) -> bool:
        """The same output as `none` up to numerical noise: every switch it turns on, in every notebook, is exact."""
        return all(SWITCHES[name].exact for notebook in NOTEBOOKS for name in self.switches(notebook) or ())


# The cookbook's own caches, which every fast value of the tuning notebook turns on.
_CACHES = ("text_kv_cache", "zero_encode_cache", "first_frame_2d")
SPEEDS: dict[str, Speed] = {
    s.name: s
    for s in (
        Speed(
            "none",
            "diffusers as it comes: the reference output, and the reference time",
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
            audiovisual=("compile",),
            action=("compile",),
            transfer=("compile",),
            dataset=("compile",),
            post_training=None,  # compiling a training step (LoRA, autograd, each caption length) is not measured
            tuning=("compile", *_CACHES, "flash_attention", "cuda_graphs"),
            server=(),  # vLLM-Omni compiles unless told --enforce-eager
        ),
        Speed(
            "turbo",
            "fast plus SeaCache, which skips layer work on steps where little changes: quicker again, the output "
            "changes",
            audiovisual=("compile", "sea_cache"),
            action=None,  # not measured on action tasks
            transfer=None,
            dataset=("compile", "sea_cache"),
            post_training=None,  # a step cache is for sampling; a training step runs the whole model
            tuning=("compile", *_CACHES, "flash_attention", "sea_cache"),
            server=("--cache-backend", "sea_cache"),
        ),
        Speed(
            "fp8",
            "FP8 matrix products on the generation pathway, attention in bf16 (FlashAttention-3), as NVIDIA's own "
            "FP8 runs it (Hopper GPUs): faster for long videos, the output changes a little",
            audiovisual=None,  # the published FP8 route there is MODEL="...@fp8"
            action=None,
            transfer=None,
            dataset=None,
            post_training=None,
            tuning=("fp8_linears", "compile", *_CACHES, "flash_attention_3", "cuda_graphs"),
            server=None,
        ),
        Speed(
            "fp8_turbo",
            "fp8 plus SeaCache as NVIDIA's inference command sets it (threshold 0.35, no cap on steps skipped in a "
            "row): NVIDIA's fastest published configuration, the output changes",
            audiovisual=None,
            action=None,
            transfer=None,
            dataset=None,
            post_training=None,
            tuning=("fp8_linears", "compile", *_CACHES, "flash_attention_3", "nvidia_sea_cache"),
            server=None,
        ),
        Speed(
            "fp8_attention",
            "fp8 with the attention in FP8 too (FlashAttention-3's FP8 kernel): quicker than fp8, the output changes "
            "more (about a third of a seed's effect on random weights)",
            audiovisual=None,
            action=None,
            transfer=None,
            dataset=None,
            post_training=None,
            tuning=("fp8_linears", "compile", *_CACHES, "fp8_attention", "cuda_graphs"),
            server=None,
        ),
        Speed(
            "low_vram",
            "less GPU memory: float8 weight storage and a tiled VAE decode (Nano at 480p on 24 GiB with diffusers' "
            "switches; 16 GiB with the tuning notebook's, which keep the text tower in CPU memory); about as fast, "
            "the output changes slightly",
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


def exact_values() -> tuple[str, ...]:
    """The values whose output is the reference's up to numerical noise (several GPUs run only these)."""
    return tuple(name for name, s in SPEEDS.items() if s.exact)


def memory_values() -> tuple[str, ...]:
    """The values that decide how much of the model sits on the accelerator (a memory switch in any notebook)."""
    return tuple(
        name for name, s in SPEEDS.items() if any(set(s.switches(n) or ()) & MEMORY_SWITCHES for n in NOTEBOOKS)
    )


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
