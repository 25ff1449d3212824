"""What this machine offers: library versions, the accelerator and its memory."""

from __future__ import annotations

import gc
import platform
from importlib import metadata
from typing import Any

PACKAGES = ("torch", "diffusers", "transformers", "av", "httpx", "openai")


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def accelerator() -> dict[str, Any]:
    import torch

    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        free, total = torch.cuda.mem_get_info()
        return {
            "device": "cuda",
            "name": props.name,
            "count": torch.cuda.device_count(),
            "memory_total_gib": round(total / 2**30, 1),
            "memory_free_gib": round(free / 2**30, 1),
            "cuda": torch.version.cuda,
        }
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return {"device": "mps", "name": "Apple GPU"}
    return {"device": "cpu", "name": platform.processor() or platform.machine(), "threads": torch.get_num_threads()}


def report() -> dict[str, Any]:
    """Versions and device in one dict, printed by the notebooks' environment check."""
    return {**versions(), **{f"accel_{k}": v for k, v in accelerator().items()}}


def peak_memory_gib(reset: bool = False) -> float:
    """Peak accelerator memory allocated since the last reset (0 on a CPU)."""
    import torch

    if not torch.cuda.is_available():
        return 0.0
    peak = torch.cuda.max_memory_allocated() / 2**30
    if reset:
        torch.cuda.reset_peak_memory_stats()
    return peak


def memory_in_use_gib() -> float:
    """Accelerator memory allocated by tensors right now (0 on a CPU)."""
    import torch

    return torch.cuda.memory_allocated() / 2**30 if torch.cuda.is_available() else 0.0


def free_memory() -> dict[str, float]:
    """Collect garbage and return cached accelerator memory; reports what is still allocated and reserved (GiB)."""
    import torch

    gc.collect()
    if not torch.cuda.is_available():
        return {"allocated_gib": 0.0, "reserved_gib": 0.0}
    torch.cuda.empty_cache()
    return {
        "allocated_gib": round(torch.cuda.memory_allocated() / 2**30, 3),
        "reserved_gib": round(torch.cuda.memory_reserved() / 2**30, 3),
    }
