"""What the main notebooks' `SPEED` parameter turns on: diffusers' own public switches, one line each in the
notebook, and PyTorch's allocator setting that the memory switches need before CUDA starts. The cookbook's faster
patches, under the same names, are `tuning.speed`'s, taught by make_it_fast_with_diffusers.ipynb."""

from __future__ import annotations

import os

from helpers.errors import InvalidSettingError, allowed

# What each SPEED turns on, and what it is for.
PUBLIC_SPEEDS: dict[str, tuple[tuple[str, ...], str]] = {
    "none": ((), "diffusers as it comes: the reference output"),
    "fast": (("compile",), "the transformer's repeated layer compiled (compile_repeated_blocks): the same output"),
    "turbo": (("compile", "sea_cache"), "compiled, plus SeaCache step caching: faster again, the output changes"),
    "low_vram": (
        ("fp8_storage", "vae_tiling"),
        "float8 weight storage and tiled VAE decoding: Nano at 480p on a 24 GiB GPU; the output changes slightly",
    ),
    "min_vram": (
        ("fp8_storage", "group_offload", "vae_tiling"),
        "float8 weights streamed layer by layer from CPU memory (group offloading): far slower, for small GPUs",
    ),
}
ALLOCATOR_ENV = "PYTORCH_CUDA_ALLOC_CONF"
# Under a tight memory cap PyTorch's caching allocator loses gigabytes to fragmentation (measured at 720p: 21.2 GiB in
# use plus 2.6 GiB in unusable pieces at a 24 GiB cap); growable segments let freed memory be reused whole.
MEMORY_ALLOCATOR = "expandable_segments:True"


def configure_allocator(speed: str) -> str:
    """For the memory SPEEDs, PyTorch's expandable segments, set before CUDA starts (a user's own kept); says so."""
    import torch

    if "fp8_storage" not in public_switches(speed):
        return f"{ALLOCATOR_ENV}: PyTorch's default (SPEED={speed!r} needs nothing else)"
    if os.environ.get(ALLOCATOR_ENV):
        return f"{ALLOCATOR_ENV}={os.environ[ALLOCATOR_ENV]!r}: yours, kept"
    if torch.cuda.is_initialized():
        return f"{ALLOCATOR_ENV} not set: CUDA has already started in this kernel; restart it to use {MEMORY_ALLOCATOR}"
    os.environ[ALLOCATOR_ENV] = MEMORY_ALLOCATOR
    return f"{ALLOCATOR_ENV}={MEMORY_ALLOCATOR!r}, so that SPEED={speed!r} fits its memory"


def public_switches(speed: str) -> tuple[str, ...]:
    """The diffusers switches the main notebooks turn on for `speed`; an unknown value fails with the allowed ones."""
    if speed not in PUBLIC_SPEEDS:
        raise InvalidSettingError(f"SPEED={speed!r} is not allowed. Allowed values: {allowed(PUBLIC_SPEEDS)}.")
    return PUBLIC_SPEEDS[speed][0]
