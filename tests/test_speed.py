"""helpers.speed on the tiny checkpoint (CPU): names, idempotence, order, and exactness of the exact switches.

Speed itself is measured by benchmarks/gpu_benchmark.py on a GPU, never by a timed test.
"""

from __future__ import annotations

import numpy as np
import pytest

from helpers import pipeline, presets, prompts, speed
from helpers.errors import InvalidSettingError
from helpers.loading import load_pipeline


def _fresh_pipe():
    # Switches change the pipeline for good, so each test loads its own copy instead of the shared fixture.
    return load_pipeline("tiny", device="cpu", progress=False)[0]


def _generate(pipe, mode: str = "t2v_sound", steps: int = 3):
    s = presets.settings_for(mode, "smoke", num_inference_steps=steps, seed=7)
    out = pipe(
        prompt=prompts.prompt_text(mode, s), negative_prompt=prompts.negative_prompt(), **pipeline.pipe_kwargs(pipe, s)
    )
    return out.video, out.sound


def test_unknown_switch_names_the_allowed_ones():
    with pytest.raises(InvalidSettingError, match="Allowed switches: 'fp8_storage'"):
        speed.check(["compile", "warp_drive"])


def test_every_preset_names_known_switches():
    for preset in presets.PRESETS.values():
        assert speed.check(preset.speedups) == tuple(s for s in speed.SWITCHES if s in preset.speedups)


def test_apply_is_idempotent_and_reports_what_is_on():
    pipe = _fresh_pipe()
    assert speed.apply(pipe, ["vae_tiling", "text_kv_cache"]) == ("text_kv_cache", "vae_tiling")
    hooks_before = len(pipe.transformer.layers[0]._diffusers_hook.hooks)
    assert speed.apply(pipe, ["text_kv_cache", "vae_tiling"]) == ("text_kv_cache", "vae_tiling")
    assert len(pipe.transformer.layers[0]._diffusers_hook.hooks) == hooks_before
    assert speed.applied(pipe) == ("text_kv_cache", "vae_tiling")


def test_switches_out_of_order_ask_for_a_fresh_pipeline():
    pipe = _fresh_pipe()
    speed.apply(pipe, ["vae_tiling"])
    with pytest.raises(InvalidSettingError, match="Load the pipeline again"):
        speed.apply(pipe, ["text_kv_cache"])


@pytest.mark.parametrize("mode", ["t2v_sound", "i2v", "t2i"])
def test_text_kv_cache_gives_the_uncached_output(mode: str, monkeypatch: pytest.MonkeyPatch):
    kwargs = {"image": None}
    replays = []
    generation_half = speed._generation_half
    monkeypatch.setattr(speed, "_generation_half", lambda *a: replays.append(1) or generation_half(*a))
    reference = _fresh_pipe()
    cached = _fresh_pipe()
    speed.apply(cached, ["text_kv_cache"])
    if mode == "i2v":
        from helpers import media

        kwargs["image"] = media.load_image(prompts.conditioning("i2v"))

    def run(pipe):
        s = presets.settings_for(mode, "smoke", num_inference_steps=3, seed=7)
        extra = {"image": kwargs["image"]} if kwargs["image"] is not None else {}
        out = pipe(
            prompt=prompts.prompt_text(mode, s),
            negative_prompt=prompts.negative_prompt(),
            **extra,
            **pipeline.pipe_kwargs(pipe, s),
        )
        return out.video, out.sound

    want_video, want_sound = run(reference)
    for _ in range(2):  # a second call must re-record the cache, not reuse the first call's
        got_video, got_sound = run(cached)
        np.testing.assert_allclose(got_video, want_video, rtol=0, atol=1e-5)
        if want_sound is not None:
            np.testing.assert_allclose(got_sound.float().numpy(), want_sound.float().numpy(), rtol=0, atol=1e-5)
    # Steps 1 and 2 of both calls replay the cache: 2 layers x 2 passes (cond, uncond) x 2 steps x 2 calls.
    assert len(replays) == 16


@pytest.mark.parametrize("preset", ["low_vram", "min_vram"])
def test_memory_presets_run_on_the_tiny_checkpoint(preset: str):
    pipe = _fresh_pipe()
    speed.apply(pipe, presets.PRESETS[preset].speedups)
    video, _ = _generate(pipe, "t2v", steps=2)
    assert np.isfinite(video).all()


def test_zero_encode_cache_gives_the_uncached_output_and_encodes_once_per_size():
    reference = _fresh_pipe()
    cached = _fresh_pipe()
    speed.apply(cached, ["zero_encode_cache"])
    encodes = []
    vae_encode = cached.vae.encode
    cached.vae.encode = lambda x, *a, **k: encodes.append(tuple(x.shape)) or vae_encode(x, *a, **k)
    want, _ = _generate(reference, "t2v", steps=2)
    for _ in range(2):
        got, _ = _generate(cached, "t2v", steps=2)
        np.testing.assert_array_equal(got, want)
    assert len(encodes) == 1
    _generate(cached, "t2i", steps=2)  # another size: encoded once more
    assert len(encodes) == 2


def test_zero_encode_cache_still_encodes_a_conditioning_image():
    from helpers import media

    pipe = _fresh_pipe()
    speed.apply(pipe, ["zero_encode_cache"])
    encodes = []
    vae_encode = pipe.vae.encode
    pipe.vae.encode = lambda x, *a, **k: encodes.append(1) or vae_encode(x, *a, **k)
    s = presets.settings_for("i2v", "smoke", num_inference_steps=1, seed=7)
    image = media.load_image(prompts.conditioning("i2v"))
    for _ in range(2):
        pipe(prompt=prompts.prompt_text("i2v", s), image=image, **pipeline.pipe_kwargs(pipe, s))
    assert len(encodes) == 2


def test_min_vram_streams_layers_and_low_vram_keeps_them_on_the_device():
    low, minimal = presets.get_preset("low_vram").speedups, presets.get_preset("min_vram").speedups
    assert "fp8_storage" in low and "group_offload" not in low
    assert {"fp8_storage", "group_offload"} <= set(minimal)
    assert not (set(low) - speed.EXACT_SWITCHES) - {"fp8_storage", "vae_tiling"}


def test_vae_autotune_turns_cudnn_benchmark_mode_on_only_during_the_decode():
    import torch

    pipe = _fresh_pipe()
    modes = []
    decode = pipe.vae.decode
    pipe.vae.decode = lambda *a, **k: modes.append(torch.backends.cudnn.benchmark) or decode(*a, **k)
    speed.apply(pipe, ["vae_autotune"])
    before = torch.backends.cudnn.benchmark
    _generate(pipe, "t2v", steps=1)
    assert modes == [True]
    assert torch.backends.cudnn.benchmark == before


def test_fast_keeps_generating_across_many_sizes_and_modes():
    # Each size and prompt length recompiles the compiled layers; PyTorch's default limit (8) made `fast` fail with
    # "recompile limit exceeded" after a few tiers and modes (found on the H200). Here: more shapes than that.
    pipe = _fresh_pipe()
    speed.apply(pipe, presets.PRESETS["fast"].speedups)
    assert "compile" in speed.applied(pipe)
    assert speed.skipped(pipe) == ("flash_attention",)  # no CUDA here: PyTorch's attention stays
    sizes = [(64, 64), (96, 64), (128, 64), (64, 96), (128, 96), (160, 96), (96, 128), (192, 128), (128, 160)]
    for i, (width, height) in enumerate(sizes):
        mode = "t2i" if i % 3 == 0 else "t2v"
        s = presets.settings_for(mode, "smoke", width=width, height=height, num_inference_steps=2, seed=i)
        out = pipe(
            prompt=prompts.prompt_text(mode, s),
            negative_prompt=prompts.negative_prompt(),
            **pipeline.pipe_kwargs(pipe, s),
        )
        assert np.asarray(out.video).shape[-3:-1] == (height, width)
