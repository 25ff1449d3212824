"""Turn `GenerationSettings` into the keyword arguments of `Cosmos3OmniPipeline.__call__`."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any

from helpers import speed
from helpers.errors import SoundNotSupportedError
from helpers.presets import GenerationSettings

if TYPE_CHECKING:
    from diffusers import Cosmos3OmniPipeline


def has_sound(pipe: Cosmos3OmniPipeline) -> bool:
    return getattr(pipe, "sound_tokenizer", None) is not None and bool(
        getattr(pipe.transformer.config, "sound_gen", False)
    )


def sample_rate(pipe: Cosmos3OmniPipeline) -> int | None:
    tokenizer = getattr(pipe, "sound_tokenizer", None)
    return int(tokenizer.config.sampling_rate) if tokenizer is not None else None


def check_sound(pipe: Cosmos3OmniPipeline, settings: GenerationSettings) -> None:
    """Fail before generating, rather than writing a silent file, when sound is asked of a silent checkpoint."""
    if settings.enable_sound and not has_sound(pipe):
        raise SoundNotSupportedError(
            f"Mode {settings.mode!r} asks for sound, but this checkpoint has no sound tokenizer "
            "(model_index.json lists no sound_tokenizer, or the transformer was built without sound_gen). "
            "Use a sound-capable checkpoint, or drop the sound modes from MODES."
        )


def set_flow_shift(pipe: Cosmos3OmniPipeline, flow_shift: float) -> None:
    """The scheduler carries the flow shift (10 for video, 3 for images); the call has no argument for it."""
    from diffusers import UniPCMultistepScheduler

    if float(pipe.scheduler.config.get("flow_shift", 1.0)) != flow_shift:
        pipe.scheduler = UniPCMultistepScheduler.from_config(pipe.scheduler.config, flow_shift=flow_shift)


def generator_for(seed: int):
    """A CPU generator: the same seed gives the same noise on every device and in every backend."""
    import torch

    return torch.Generator("cpu").manual_seed(seed)


def pipe_kwargs(
    pipe: Cosmos3OmniPipeline,
    settings: GenerationSettings,
    *,
    structured_prompt: bool = True,
    safety_check: bool = True,
) -> dict[str, Any]:
    """Keyword arguments for `pipe(prompt=..., ...)` that realise `settings` exactly.

    Structured JSON prompts already carry resolution, duration and fps, so the pipeline's own text templates
    are turned off for them (as NVIDIA does); plain-text prompts keep them.
    """
    check_sound(pipe, settings)
    set_flow_shift(pipe, settings.flow_shift)
    # The preset's speed/memory switches; a no-op once they are on, so every generation can call it.
    speed.apply(pipe, settings)
    return {
        "num_frames": settings.num_frames,
        "height": settings.height,
        "width": settings.width,
        "fps": float(settings.fps),
        "num_inference_steps": settings.num_inference_steps,
        "guidance_scale": settings.guidance_scale,
        "enable_sound": settings.enable_sound,
        "generator": generator_for(settings.seed),
        "output_type": "np",
        "add_resolution_template": not structured_prompt,
        "add_duration_template": not structured_prompt,
        "enable_safety_check": safety_check,
    }


def free_memory() -> dict[str, float]:
    """Collect garbage and return cached accelerator memory; reports what is still allocated (GiB)."""
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        return {
            "allocated_gib": torch.cuda.memory_allocated() / 2**30,
            "reserved_gib": torch.cuda.memory_reserved() / 2**30,
        }
    return {"allocated_gib": 0.0, "reserved_gib": 0.0}
