"""The two video-conditioned modes added to the pair: fl2v keeps the first and the last latent frame clean, v2v_sound
continues a clip with sound (tests/test_vllm_notebook.py sends both to the real vLLM-Omni server).

With random weights the VAE does not reproduce its input (on the tiny checkpoint the reconstructions of the two
bundled frames differ by less than 30 levels everywhere), so what can be proved is at the latent level: the clean
latent frames are exactly the encodings of the two images, whatever the seed, and the frames between are generated.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from cosmos3_audiovisual import diffusers_pipe, modes
from generation_form import backends
from helpers import audiovisual_settings, media
from tests import calls

# The size these checks were written for: 17 frames, so that fl2v's last latent frame is the fifth.
SMALL = {"width": 160, "height": 96, "num_frames": 17}


def _final_latents(pipe, settings, video) -> torch.Tensor:
    seen: list[torch.Tensor] = []

    def keep(_pipe, _step, _t, tensors):
        seen.append(tensors["latents"].clone())
        return tensors

    calls.generate(
        pipe,
        settings,
        "a ball rolls",
        video=video,
        condition_frame_indexes_vision=settings.condition_frame_indexes,
        callback_on_step_end=keep,
    )
    return seen[-1]


@pytest.mark.slow
def test_fl2v_keeps_the_encodings_of_the_first_and_the_last_image_whatever_the_seed(tiny_pipe) -> None:
    pipe, _ = tiny_pipe
    runs = [
        audiovisual_settings.settings_for("fl2v", "smoke", seed=seed, num_inference_steps=2, **SMALL) for seed in (1, 2)
    ]
    frames = backends.first_and_last_frames(backends.build_request("fl2v", runs[0]))
    first_latent, last_latent = runs[0].condition_frame_indexes
    assert (first_latent, last_latent) == (0, (17 - 1) // 4)
    a, b = (_final_latents(pipe, s, frames) for s in runs)
    # Both ends are the VAE encoding of the clip the pipeline builds: the first image, then the last one repeated.
    clip = pipe.video_processor.preprocess_video([frames[0]] + [frames[1]] * 16, height=96, width=160)
    encoded = pipe._encode_video(clip)
    for index in (first_latent, last_latent):
        torch.testing.assert_close(a[:, :, index], encoded[:, :, index], rtol=0, atol=1e-5)
        torch.testing.assert_close(b[:, :, index], a[:, :, index], rtol=0, atol=1e-6)
    assert not torch.allclose(a[:, :, 1:last_latent], b[:, :, 1:last_latent])  # the frames between are generated


def test_the_two_frames_travel_losslessly_and_fitted_to_the_output_size() -> None:
    first, last = (media.load_image(p) for p in modes.first_and_last())
    fitted = [media.fit_frame(img, 320, 192) for img in (first, last)]
    assert [f.size for f in fitted] == [(320, 192), (320, 192)]
    data = media.lossless_clip(fitted, 24)
    with __import__("av").open(io.BytesIO(data)) as container:
        decoded = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert len(decoded) == 2 and all(np.array_equal(d, np.asarray(f)) for d, f in zip(decoded, fitted, strict=True))


def test_first_last_parameter_names_two_existing_images(tmp_path) -> None:
    from helpers.errors import InvalidSettingError

    with pytest.raises(InvalidSettingError, match="must name two images"):
        modes.first_and_last("only-one.png")
    with pytest.raises(InvalidSettingError, match="not a file"):
        modes.first_and_last(f"{tmp_path}/a.png,{tmp_path}/b.png")


@pytest.mark.slow
def test_video_to_video_with_sound_continues_the_clip_and_makes_sound(tiny_pipe) -> None:
    pipe, _ = tiny_pipe
    s = audiovisual_settings.settings_for("v2v_sound", "smoke", num_inference_steps=1, **SMALL)
    out = calls.generate(
        pipe,
        s,
        "a ball",
        video=media.load_video(modes.conditioning("v2v_sound")),
        condition_frame_indexes_vision=s.condition_frame_indexes,
    )
    assert s.enable_sound and out.sound is not None and out.sound.shape[0] == 2
    assert np.asarray(out.video).shape == (17, 96, 160, 3)


@pytest.mark.slow
def test_the_estimate_at_the_last_step_decodes_to_the_output(tiny_pipe) -> None:
    # What "Look inside the denoising" shows: each step's estimate of the clean video, decoded as the pipeline decodes.
    pipe, _ = tiny_pipe
    s = audiovisual_settings.settings_for("t2v", "smoke", num_inference_steps=3, **SMALL)
    estimates = []

    def keep(pipe_, step, timestep, tensors):
        estimates.append(pipe_.scheduler.model_outputs[-1].clone())
        return tensors

    output = calls.generate(pipe, s, "a ball", callback_on_step_end=keep)
    previews = [diffusers_pipe.decode_latents(pipe, x0) for x0 in estimates]
    assert len(previews) == 3 and all(p.shape == (17, 96, 160, 3) for p in previews)
    np.testing.assert_allclose(previews[-1], output.video, rtol=0, atol=1e-6)
    assert np.abs(previews[0] - output.video).max() > 0.01  # the first estimate is still far from it
