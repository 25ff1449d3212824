"""What `SPEED` turns on in each family's main notebooks, in one table: diffusers' own public switches, one line
each in the notebook, and PyTorch's allocator setting that the memory switches need before CUDA starts.

The action and transfer families offer the two speeds measured on their tasks (docs/action.md,
docs/transfer.md). The cookbook's own faster patches are `tuning.speed`'s, under the tuning notebook's own `SPEED`.
"""

from __future__ import annotations

import os

from helpers.errors import InvalidSettingError, allowed

# What each SPEED turns on, and what it is for, in each family.
_COMPILED = "the transformer's repeated layer compiled (compile_repeated_blocks): the same output up to numerical noise"
SPEEDS: dict[str, dict[str, tuple[tuple[str, ...], str]]] = {
    "audiovisual": {
        "none": ((), "diffusers as it comes: the reference output"),
        "fast": (("compile",), _COMPILED),
        "turbo": (("compile", "sea_cache"), "compiled, plus SeaCache step caching: faster again, the output changes"),
        "low_vram": (
            ("fp8_storage", "vae_tiling"),
            "float8 weight storage and tiled VAE decoding: Nano at 480p on a 24 GiB GPU; the output changes slightly",
        ),
        "min_vram": (
            ("fp8_storage", "group_offload", "vae_tiling"),
            "float8 weights streamed layer by layer from CPU memory (group offloading): far slower, for small GPUs",
        ),
    },
    "action": {
        "none": ((), "diffusers as it comes (a server: --enforce-eager)"),
        "fast": (("compile",), _COMPILED),
    },
}
SPEEDS["transfer"] = SPEEDS["action"]
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


def public_switches(speed: str, family: str = "audiovisual") -> tuple[str, ...]:
    """The diffusers switches `family`'s main notebooks turn on for `speed`; an unknown value fails with the allowed
    ones."""
    if speed not in SPEEDS[family]:
        raise InvalidSettingError(
            f"SPEED={speed!r} is not one of the {family} notebooks' speeds. Allowed: {allowed(SPEEDS[family])}."
        )
    return SPEEDS[family][speed][0]


def meaning(speed: str, family: str = "audiovisual") -> str:
    """What `speed` does in `family`'s notebooks, in a sentence."""
    public_switches(speed, family)
    return SPEEDS[family][speed][1]
