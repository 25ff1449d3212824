"""`CpuOmniPlatform`: vLLM's `CpuPlatform` with the calls vLLM-Omni's diffusion worker makes on a device.

Memory is host memory: the "device" peak a request reports is the worker process's peak resident set (Linux's
VmHWM, reset before each request through /proc/self/clear_refs), so `X-Peak-Memory-MB` means something on a CPU.
What a CPU cannot do (another attention backend, autoregressive stages, CUDA graphs) raises at once, naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psutil
import torch
from vllm.platforms.cpu import CpuPlatform
from vllm_omni.platforms.interface import OmniPlatform, OmniPlatformEnum

ATTENTION_BACKEND = "vllm_omni_cpu.attention.CpuSDPABackend"
SDPA_NAMES = ("TORCH_SDPA", "SDPA")


class CpuPlatformError(NotImplementedError):
    """Something vLLM-Omni asked of the device that this CPU platform does not do."""

    def __init__(self, what: str, fix: str = "run this on a CUDA GPU with vLLM-Omni's own build"):
        super().__init__(f"The cookbook's CPU platform for vLLM-Omni does not support {what}; {fix}.")


def _status_kib(field: str) -> int:
    """A `VmXXX:` line of /proc/self/status in KiB (0 where /proc is not there)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class CpuOmniPlatform(OmniPlatform, CpuPlatform):
    _omni_enum = OmniPlatformEnum.OOT

    # -- the device --------------------------------------------------------------------------------------------
    @classmethod
    def get_torch_device(cls, local_rank: int | None = None) -> torch.device:
        return torch.device("cpu")

    @classmethod
    def get_device_count(cls) -> int:
        return 1

    @classmethod
    def get_device_version(cls) -> str | None:
        return None

    @classmethod
    def set_device(cls, device: torch.device) -> None:
        if device.type != "cpu":
            raise CpuPlatformError(f"placing the model on {device}", "leave the device to the platform")

    @classmethod
    def synchronize(cls) -> None:
        return None  # CPU kernels have finished when they return

    @classmethod
    def empty_cache(cls) -> None:
        return None  # no caching allocator to empty

    @classmethod
    def record_device_event(cls) -> None:
        return None

    @classmethod
    def supports_torch_inductor(cls) -> bool:
        return False  # compiling on a small CPU costs more than the tiny model's whole run

    @classmethod
    def supports_float64(cls) -> bool:
        return True

    # -- memory: the host's ------------------------------------------------------------------------------------
    @classmethod
    def get_free_memory(cls, device: torch.device | None = None) -> int:
        return int(psutil.virtual_memory().available)

    @classmethod
    def get_device_memory(cls, device: torch.device | None = None) -> tuple[int, int]:
        memory = psutil.virtual_memory()
        return int(memory.available), int(memory.total)

    @classmethod
    def get_device_total_memory(cls, device_id: int = 0) -> int:
        return int(psutil.virtual_memory().total)

    @classmethod
    def memory_reserved(cls, device: torch.device | int | None = None) -> int:
        return _status_kib("VmRSS") * 1024

    @classmethod
    def reset_peak_memory_stats(cls, device: torch.device | int | None = None) -> None:
        try:  # "5" resets the peak resident set (VmHWM) to the current one
            Path("/proc/self/clear_refs").write_text("5")
        except OSError:
            pass

    @classmethod
    def max_memory_reserved(cls, device: torch.device | int | None = None) -> int:
        return _status_kib("VmHWM") * 1024

    @classmethod
    def max_memory_allocated(cls, device: torch.device | int | None = None) -> int:
        return cls.max_memory_reserved(device)

    @classmethod
    def get_current_memory_usage(cls, device: torch.types.Device | None = None) -> float:
        return float(cls.memory_reserved(device))

    # -- what vLLM-Omni runs on it -----------------------------------------------------------------------------
    @classmethod
    def get_diffusion_attn_backend_cls(
        cls, selected_backend: str | None, head_size: int, allow_trtllm_default: bool = False
    ) -> str:
        if selected_backend is not None and selected_backend.upper() not in SDPA_NAMES:
            raise CpuPlatformError(
                f"the {selected_backend} attention backend", "leave the backend unset or choose TORCH_SDPA"
            )
        return ATTENTION_BACKEND

    @classmethod
    def get_default_stage_config_path(cls) -> str:
        return "vllm_omni/deploy"

    @classmethod
    def get_omni_ar_worker_cls(cls) -> str:
        raise CpuPlatformError("autoregressive stages (this platform serves diffusion-only models such as Cosmos 3)")

    @classmethod
    def get_omni_generation_worker_cls(cls) -> str:
        raise CpuPlatformError("multi-stage generation workers (this platform serves diffusion-only models)")

    @classmethod
    def get_graph_wrapper_cls(cls) -> type:
        raise CpuPlatformError("CUDA graphs", "start the server with --enforce-eager")

    def __getattr__(self, key: str) -> Any:
        # vLLM's Platform answers an unknown attribute with None after a warning; a CPU platform that silently
        # returns None for a device call would fail later and far away, so name what is missing now.
        if key.startswith("__") and key.endswith("__"):
            raise AttributeError(key)
        value = getattr(torch.cpu, key, None)
        if value is not None:
            return value
        raise AttributeError(
            f"The cookbook's CPU platform for vLLM-Omni has no {key!r}: vLLM-Omni asked the device for something a "
            "CPU does not provide. Run this on a CUDA GPU with vLLM-Omni's own build."
        )
