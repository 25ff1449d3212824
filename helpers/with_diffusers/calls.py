"""The `pipe(...)` call of the Diffusers notebook, for code that runs it without a notebook cell.

The notebook writes the call out; the generation form, the local vLLM-Omni stand-in server and the benchmarks call
`generate`, which makes exactly the same call, so every route gives the same frames for the same settings and seed
(tests/test_vllm_notebook.py compares the two notebooks' files).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from helpers.errors import SoundNotSupportedError
from helpers.presets import GenerationSettings

if TYPE_CHECKING:
    from diffusers import Cosmos3OmniPipeline


def has_sound(pipe: Cosmos3OmniPipeline) -> bool:
    return getattr(pipe, "sound_tokenizer", None) is not None and bool(
        getattr(pipe.transformer.config, "sound_gen", False)
    )


def sample_rate(pipe: Cosmos3OmniPipeline) -> int | None:
    """The audio rate of the checkpoint's sound tokenizer (48 kHz on real checkpoints), or None without one."""
    tokenizer = getattr(pipe, "sound_tokenizer", None)
    return int(tokenizer.config.sampling_rate) if tokenizer is not None else None


def check_sound(pipe: Cosmos3OmniPipeline, settings: GenerationSettings | Iterable[GenerationSettings]) -> None:
    """Fail before generating, rather than writing a silent file, when sound is asked of a silent checkpoint."""
    for s in [settings] if isinstance(settings, GenerationSettings) else settings:
        if s.enable_sound and not has_sound(pipe):
            raise SoundNotSupportedError(
                f"Mode {s.mode!r} asks for sound, but this checkpoint has no sound tokenizer "
                "(model_index.json lists no sound_tokenizer, or the transformer was built without sound_gen). "
                "Use a sound-capable checkpoint, or drop the sound modes from MODES."
            )


def scheduler_for(pipe: Cosmos3OmniPipeline, flow_shift: float) -> Any:
    """The pipeline's scheduler with `flow_shift` (the call has no argument for it): itself when it already has it."""
    from diffusers import UniPCMultistepScheduler

    if float(pipe.scheduler.config.get("flow_shift", 1.0)) == flow_shift:
        return pipe.scheduler
    return UniPCMultistepScheduler.from_config(pipe.scheduler.config, flow_shift=flow_shift)


def generate(
    pipe: Cosmos3OmniPipeline,
    prompt: str,
    settings: GenerationSettings,
    *,
    negative_prompt: str = "",
    image: Any = None,
    video: Any = None,
    resolution_template: bool | None = None,
    duration_template: bool | None = None,
    safety_check: bool = True,
    generator: Any = None,
    on_step_end: Callable[..., dict[str, Any]] | None = None,
    output_type: str = "np",
) -> Any:
    """`pipe(...)` for `settings`, as the notebook calls it.

    The pipeline's resolution and duration sentences (`*_template`) default to off for a structured JSON prompt,
    which already carries resolution, duration and fps (as NVIDIA and vLLM-Omni do), and on for plain text.
    `generator` defaults to a fresh CPU generator seeded with `settings.seed`. `output_type="latent"` skips the
    VAE decode (the ranks of a parallel run that do not write files).
    """
    import torch

    from helpers import prompts

    plain = not prompts.is_structured(prompt)
    check_sound(pipe, settings)
    pipe.scheduler = scheduler_for(pipe, settings.flow_shift)
    conditioning = {"image": image} if image is not None else {"video": video} if video is not None else {}
    return pipe(
        prompt=prompt,
        negative_prompt=negative_prompt,
        **conditioning,
        num_frames=settings.num_frames,
        height=settings.height,
        width=settings.width,
        fps=settings.fps,
        num_inference_steps=settings.num_inference_steps,
        guidance_scale=settings.guidance_scale,
        enable_sound=settings.enable_sound,
        generator=generator or torch.Generator("cpu").manual_seed(settings.seed),
        output_type=output_type,
        add_resolution_template=plain if resolution_template is None else resolution_template,
        add_duration_template=plain if duration_template is None else duration_template,
        enable_safety_check=safety_check,
        callback_on_step_end=on_step_end,
    )
