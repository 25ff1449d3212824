"""What the Diffusers notebook needs around its `pipe(...)` calls: checks of the loaded pipeline (sound, its audio
rate) and the decoding of latents, for looking at the denoising as it goes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from helpers.audiovisual_settings import AudiovisualSettings
from helpers.errors import SoundNotSupportedError

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


def check_sound(pipe: Cosmos3OmniPipeline, settings: AudiovisualSettings | Iterable[AudiovisualSettings]) -> None:
    """Fail before generating, rather than writing a silent file, when sound is asked of a silent checkpoint."""
    for s in [settings] if isinstance(settings, AudiovisualSettings) else settings:
        if s.enable_sound and not has_sound(pipe):
            raise SoundNotSupportedError(
                f"Mode {s.mode!r} asks for sound, but this checkpoint has no sound tokenizer "
                "(model_index.json lists no sound_tokenizer, or the transformer was built without sound_gen). "
                "Use a sound-capable checkpoint, or drop the sound modes from MODES."
            )


def decode_latents(pipe: Cosmos3OmniPipeline, latents: Any) -> Any:
    """Video latents, as the pipeline denoises them, decoded to frames [T, H, W, 3] in 0..1 as it decodes its own.

    Given the scheduler's estimate of the clean latents at a step (`pipe.scheduler.model_outputs[-1]`), this is the
    model's current guess of the finished video; at the last step it is the output itself.
    """
    import torch

    vae = pipe.vae
    latents = latents.reshape(1, *latents.shape[-4:]).to(vae.dtype)  # the scheduler keeps them with extra batch dims
    # The VAE's published normalisation, read from its config as the pipeline reads it.
    mean = torch.tensor(vae.config.latents_mean, dtype=vae.dtype, device=latents.device).view(1, -1, 1, 1, 1)
    std = torch.tensor(vae.config.latents_std, dtype=vae.dtype, device=latents.device).view(1, -1, 1, 1, 1)
    with torch.no_grad():
        decoded = vae.decode(latents * std + mean).sample
    return pipe.video_processor.postprocess_video(decoded.float(), output_type="np")[0]
