"""The audiovisual Diffusers notebook's own call, for tests that generate in this process: `generate` runs its
tagged `call` cell on a pipeline (`tuning.pipelines.notebook_call`), so a test makes the notebook's `pipe(...)`, not
a copy of it."""

from __future__ import annotations

from typing import Any

from tuning.pipelines import notebook_call


def generate(pipe: Any, s: Any, prompt: str, negative_prompt: str = "", **inputs: Any) -> Any:
    """The notebook's `generate(s, prompt, negative_prompt, **inputs)` on `pipe`, with sound when `s` asks for it (as
    the notebook's sound section passes `enable_sound=True`)."""
    if s.enable_sound:
        inputs.setdefault("enable_sound", True)
    return notebook_call(pipe)(s, prompt, negative_prompt, **inputs)
