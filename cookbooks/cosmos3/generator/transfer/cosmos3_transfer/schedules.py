"""The noise schedule vLLM-Omni runs, for the diffusers pipelines that do not ask for it.

`Cosmos3OmniPipeline(use_native_flow_schedule=True)` hands its scheduler evenly spaced noise levels from
1 - 1/1000 down to 0, which the flow shift then bends: vLLM-Omni 0.30.0's schedule. diffusers 0.42.1's modular
transfer step calls `scheduler.set_timesteps(steps)` without them, so UniPC falls back to its own grid, whose
levels differ slightly; with the same seed the two backends then make visibly different videos
(tests/test_transfer_notebooks.py measures it).

`NativeFlowUniPCMultistepScheduler` is built on first use, so that importing this module imports neither torch nor
diffusers.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def _native_flow_unipc() -> type:
    import numpy as np
    from diffusers import UniPCMultistepScheduler

    class NativeFlowUniPCMultistepScheduler(UniPCMultistepScheduler):
        """UniPC that, when given only a number of steps, denoises at the native flow levels (as
        `Cosmos3OmniPipeline(use_native_flow_schedule=True)` and vLLM-Omni do). Explicit `sigmas` are used as
        given."""

        def set_timesteps(self, num_inference_steps=None, device=None, sigmas=None, mu=None):
            if sigmas is None and num_inference_steps:
                top = 1.0 - 1.0 / self.config.num_train_timesteps
                sigmas = np.linspace(top, 0.0, num_inference_steps + 1)[:-1]
            return super().set_timesteps(num_inference_steps, device=device, sigmas=sigmas, mu=mu)

    return NativeFlowUniPCMultistepScheduler


def __getattr__(name: str) -> Any:
    if name == "NativeFlowUniPCMultistepScheduler":
        return _native_flow_unipc()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
