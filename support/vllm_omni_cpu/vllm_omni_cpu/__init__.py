"""A CPU platform for vLLM-Omni, registered on its `vllm_omni.platform_plugins` entry point.

vLLM-Omni 0.30 ships platforms for CUDA, ROCm, NPU, XPU and MUSA only; on a machine with none of them it falls back
to a platform that cannot place a model anywhere. This plugin is the smallest platform that runs its diffusion
engine on the CPU: vLLM's own `CpuPlatform` for the device, host-memory accounting for the memory calls, and an
attention backend that runs PyTorch's scaled-dot-product attention. It is the cookbook's, not vLLM-Omni's: it serves
the offline tiny checkpoint to notebooks, tests and workshops, not real weights at speed.
"""

from __future__ import annotations

import os

# Set to 0 to keep the plugin installed but inactive (vLLM-Omni then picks its own platform, or none).
ENABLE_ENV = "COSMOS3_VLLM_OMNI_CPU"
PLATFORM = "vllm_omni_cpu.platform.CpuOmniPlatform"


def activate() -> str | None:
    """The entry point vLLM-Omni calls: this platform's class path, unless a GPU platform should serve instead."""
    if os.environ.get(ENABLE_ENV, "1") == "0":
        return None
    try:
        import torch
    except ImportError:
        return None
    if torch.cuda.is_available():
        return None  # vLLM-Omni's own CUDA platform takes the GPU; two active platforms would be refused
    return PLATFORM
