"""Attention for vLLM-Omni's diffusion models on the CPU: its own SDPA backend, dispatched for a CPU.

vLLM-Omni's `AttentionImpl.forward` picks a method per platform (CUDA, ROCm, NPU, XPU, MUSA) and raises for any
other. The computation on a CPU is the one its SDPA backend runs on CUDA, so only the dispatch is added here.
"""

from __future__ import annotations

import torch
from vllm_omni.diffusion.attention.backends.abstract import AttentionMetadata
from vllm_omni.diffusion.attention.backends.sdpa import SDPABackend, SDPAImpl


class CpuSDPAImpl(SDPAImpl):
    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attn_metadata: AttentionMetadata | None = None,
    ) -> torch.Tensor:
        return self.forward_cuda(query, key, value, attn_metadata)  # plain SDPA: nothing in it is CUDA's own


class CpuSDPABackend(SDPABackend):
    @staticmethod
    def get_name() -> str:
        return "CPU_SDPA"

    @staticmethod
    def get_impl_cls() -> type[CpuSDPAImpl]:
        return CpuSDPAImpl
