"""The speed switches on the tiny checkpoint (CPU): names, idempotence, order, and exactness of the exact switches.

Speed itself is measured by support/benchmarks/gpu_benchmark.py on a GPU, never by a timed test.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from cosmos3_audiovisual import modes
from helpers import audiovisual_settings, prompts, speeds
from helpers.errors import InvalidSettingError
from tests import calls
from tuning import patches, pipelines
from tuning.pipelines import load_pipeline


def _fresh_pipe():
    # Switches change the pipeline for good, so each test loads its own copy instead of the shared fixture.
    return load_pipeline("tiny", device="cpu")[0]


def _generate(pipe, mode: str = "t2v_sound", steps: int = 3, image=None):
    s = audiovisual_settings.settings_for(mode, "smoke", num_inference_steps=steps, seed=7)
    out = calls.generate(pipe, s, prompts.prompt_text(s), prompts.negative_prompt(), image=image)
    return out.video, out.sound


def test_unknown_switch_names_the_allowed_ones():
    with pytest.raises(InvalidSettingError, match="Allowed switches: 'fp8_storage'"):
        pipelines.check(["compile", "warp_drive"])


def test_every_speed_names_known_switches_in_the_order_they_apply_and_a_bad_speed_lists_the_choices():
    for name in speeds.offered("tuning"):
        names = speeds.switches(name, "tuning")
        assert names == tuple(s for s in pipelines.SWITCHES if s in names)
    with pytest.raises(
        InvalidSettingError,
        match="SPEED='warp'.*'none', 'fast', 'turbo', 'fp8', 'fp8_turbo', 'fp8_attention', 'low_vram', 'min_vram'",
    ):
        speeds.switches("warp", "tuning")


def test_apply_is_idempotent_and_reports_what_is_on():
    pipe = _fresh_pipe()
    assert pipelines.apply(pipe, ["vae_tiling", "text_kv_cache"]) == ("text_kv_cache", "vae_tiling")
    hooks_before = len(pipe.transformer.layers[0]._diffusers_hook.hooks)
    assert pipelines.apply(pipe, ["text_kv_cache", "vae_tiling"]) == ("text_kv_cache", "vae_tiling")
    assert len(pipe.transformer.layers[0]._diffusers_hook.hooks) == hooks_before
    assert pipelines.applied(pipe) == ("text_kv_cache", "vae_tiling")


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["fp8_storage", "compile"], "'fp8_storage' and 'compile' cannot be combined"),
        (["compile", "group_offload"], "Add 'text_kv_cache' or drop one"),
    ],
)
def test_compile_with_hooks_it_cannot_trace_is_refused_before_anything_changes(names, message):
    pipe = _fresh_pipe()
    with pytest.raises(InvalidSettingError, match=message):
        pipelines.apply(pipe, names)
    assert pipelines.applied(pipe) == ()


def test_compile_alone_is_diffusers_regional_compilation_and_with_the_text_cache_compiles_no_layer():
    alone = _fresh_pipe()
    pipelines.apply(alone, ["compile"])
    assert all(layer._compiled_call_impl is not None for layer in alone.transformer.layers)
    cached = _fresh_pipe()
    pipelines.apply(cached, ["compile", "text_kv_cache", "group_offload"])
    assert all(layer._compiled_call_impl is None for layer in cached.transformer.layers)


def test_switches_out_of_order_ask_for_a_fresh_pipeline():
    pipe = _fresh_pipe()
    pipelines.apply(pipe, ["vae_tiling"])
    with pytest.raises(InvalidSettingError, match="Load the pipeline again"):
        pipelines.apply(pipe, ["text_kv_cache"])


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["t2v_sound", "i2v", "t2i"])
def test_text_kv_cache_gives_the_uncached_output(mode: str, monkeypatch: pytest.MonkeyPatch):
    from helpers import media

    replays = []
    generation_half = patches._generation_half
    monkeypatch.setattr(patches, "_generation_half", lambda *a: replays.append(1) or generation_half(*a))
    reference = _fresh_pipe()
    cached = _fresh_pipe()
    patches.cache_text_keys_values(cached)
    image = media.load_image(modes.conditioning("i2v")) if mode == "i2v" else None

    want_video, want_sound = _generate(reference, mode, image=image)
    for _ in range(2):  # a second call must re-record the cache, not reuse the first call's
        got_video, got_sound = _generate(cached, mode, image=image)
        np.testing.assert_allclose(got_video, want_video, rtol=0, atol=1e-5)
        if want_sound is not None:
            np.testing.assert_allclose(got_sound.float().numpy(), want_sound.float().numpy(), rtol=0, atol=1e-5)
    # Every step runs the generation half on the held keys, step 0 right after recording them:
    # 2 layers x 2 passes (cond, uncond) x 3 steps x 2 calls.
    assert len(replays) == 24


@pytest.mark.slow
def test_text_kv_cache_writes_the_next_prompt_of_the_same_length_into_the_keys_it_holds():
    from diffusers.hooks import HookRegistry

    reference, cached = _fresh_pipe(), _fresh_pipe()
    patches.cache_text_keys_values(cached)
    s = audiovisual_settings.settings_for("t2i", "smoke", num_inference_steps=3, seed=7)
    first = prompts.prompt_text(s)
    second = first.swapcase()  # the tiny checkpoint's tokenizer has one token per byte: the same length

    def image(pipe, text: str):
        return calls.generate(pipe, s, text, prompts.negative_prompt()).video

    hook = HookRegistry.check_if_exists_or_initialize(cached.transformer.layers[0]).get_hook(patches._TEXT_KV_HOOK)
    image(cached, first)
    held = hook.key_values["cond"]
    got = image(cached, second)
    assert hook.key_values["cond"] is held  # the same tensors, which CUDA graphs recorded on keep reading
    np.testing.assert_allclose(got, image(reference, second), rtol=0, atol=1e-5)
    assert not np.allclose(got, image(reference, first), rtol=0, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["low_vram", "min_vram"])
def test_memory_speeds_run_on_the_tiny_checkpoint(name: str):
    pipe = _fresh_pipe()
    pipelines.apply(pipe, speeds.switches(name, "tuning"))
    video, _ = _generate(pipe, "t2v", steps=2)
    assert np.isfinite(video).all()


@pytest.mark.slow
def test_zero_encode_cache_gives_the_uncached_output_and_encodes_once_per_size():
    reference = _fresh_pipe()
    cached = _fresh_pipe()
    patches.cache_blank_video_encoding(cached)
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


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["t2i", "i2v"])
def test_first_frame_2d_gives_the_3d_output_and_runs_the_first_frame_only_in_2d(mode: str, monkeypatch):
    from helpers import media

    frames = []
    first_frame_in_2d = patches._first_frame_in_2d
    monkeypatch.setattr(
        patches,
        "_first_frame_in_2d",
        lambda conv, fwd, x, c=None: frames.append(x.shape[2]) or first_frame_in_2d(conv, fwd, x, c),
    )
    reference, switched = _fresh_pipe(), _fresh_pipe()
    patches.decode_first_frame_in_2d(switched)
    image = media.load_image(modes.conditioning("i2v")) if mode == "i2v" else None
    want, _ = _generate(reference, mode, steps=2, image=image)
    got, _ = _generate(switched, mode, steps=2, image=image)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    # Every causal convolution is asked: the image's (or the video's first) frame alone in 2-D, later frames in 3-D.
    assert 1 in frames and (mode == "t2i" or any(n > 1 for n in frames))


@pytest.mark.slow
def test_zero_encode_cache_still_encodes_a_conditioning_image():
    from helpers import media

    pipe = _fresh_pipe()
    patches.cache_blank_video_encoding(pipe)
    encodes = []
    vae_encode = pipe.vae.encode
    pipe.vae.encode = lambda x, *a, **k: encodes.append(1) or vae_encode(x, *a, **k)
    image = media.load_image(modes.conditioning("i2v"))
    for _ in range(2):
        _generate(pipe, "i2v", steps=1, image=image)
    assert len(encodes) == 2


@pytest.mark.slow
@pytest.mark.parametrize(("name", "streamed"), [("low_vram", False), ("min_vram", True)])
def test_memory_speeds_store_float8_weights_and_only_min_vram_streams_layers(name: str, streamed: bool):
    import torch

    pipe, checkpoint = load_pipeline("tiny", device="cpu", speed=name)
    linear = [m.weight for m in pipe.transformer.layers.modules() if isinstance(m, torch.nn.Linear)]
    assert linear and {w.dtype for w in linear} == {torch.float8_e4m3fn}  # stored in float8 ...
    video, _ = _generate(pipe, "t2v", steps=1)
    assert video.dtype == np.float32 and np.isfinite(video).all()  # ... computed in the model's dtype
    hooks = pipe.transformer.layers[0]._diffusers_hook.hooks
    assert ("group_offloading" in hooks) == streamed


@pytest.mark.slow  # two generations and a text tower moved between devices: seconds
def test_text_tower_offload_keeps_the_text_weights_out_of_the_model_and_changes_no_output():
    kept = _fresh_pipe()
    pipelines.apply(kept, ["fp8_storage", "text_kv_cache", "vae_tiling"])  # low_vram but the offload
    offloaded = load_pipeline("tiny", device="cpu", speed="low_vram")[0]
    assert "text_tower_offload" in pipelines.applied(offloaded)
    layer = offloaded.transformer.layers[0]
    tower = [layer.get_submodule(name) for name in patches.TEXT_TOWER]
    # Empty parameters: `pipe.to(device)` has nothing of the text tower to move, the generation tower it moves whole.
    assert all(m.weight.numel() == 0 for m in tower) and layer.mlp_moe_gen.gate_proj.weight.numel() > 0
    for mode in ("t2v_sound", "t2i"):
        want, got = _generate(kept, mode), _generate(offloaded, mode)
        np.testing.assert_array_equal(got[0], want[0])
        if want[1] is not None:
            np.testing.assert_array_equal(got[1], want[1])
    assert all(m.weight.numel() == 0 for m in tower)  # released again after each call


def test_cuda_graphs_and_step_caching_are_refused_together():
    pipe = _fresh_pipe()
    pipelines.apply(pipe, ["text_kv_cache", "cuda_graphs"])
    with pytest.raises(InvalidSettingError, match="'cuda_graphs' and 'sea_cache' cannot be combined"):
        pipelines.apply(pipe, ["sea_cache"])
    with pytest.raises(InvalidSettingError, match="Drop one of them"):
        pipelines.apply(_fresh_pipe(), ["text_kv_cache", "cuda_graphs", "sea_cache"])


@pytest.mark.slow  # 14 generations compiled: 6-10 s each
@pytest.mark.parametrize("cache", ["sea_cache", "nvidia_sea_cache"])
def test_the_pass_count_sees_the_steps_a_cache_skips_and_every_pass_without_one(cache: str):
    cached, plain = _fresh_pipe(), _fresh_pipe()
    pipelines.apply(cached, ["compile", "text_kv_cache", cache])  # turbo's and fp8_turbo's cache, compiled
    every = patches.count_decoder_passes(plain)
    for steps in (2, 12):
        _generate(plain, "t2v", steps=steps)
        _generate(cached, "t2v", steps=steps)
    passes = patches.count_decoder_passes(cached)  # the counter the cache switch installed
    assert (every.calls, every.computed) == (28, 28)  # two guidance passes a step, 2 + 12 steps
    # The first and last steps are always computed; over 12 steps the cache answers some passes itself.
    assert passes.calls == 28 and 8 <= passes.computed < 28, str(passes)
    passes.reset()
    assert str(passes) == "0 of 0"


def test_the_pass_count_refuses_a_cache_already_on():
    from diffusers import SeaCacheConfig

    pipe = _fresh_pipe()
    pipe.transformer.enable_cache(SeaCacheConfig())
    with pytest.raises(InvalidSettingError, match="comes before the step cache"):
        patches.count_decoder_passes(pipe)


def test_cuda_graphs_need_the_text_cache_and_a_cuda_gpu():
    pipe = _fresh_pipe()
    with pytest.raises(InvalidSettingError, match="apply 'text_kv_cache' first"):
        patches.replay_steps_as_cuda_graphs(pipe)
    patches.cache_text_keys_values(pipe)
    assert "needs a CUDA GPU" in patches.replay_steps_as_cuda_graphs(pipe)


@pytest.mark.slow
def test_fast_keeps_generating_across_many_sizes_and_modes():
    # Each size and prompt length recompiles the compiled layers; PyTorch's default limit (8) made `fast` fail with
    # "recompile limit exceeded" after a few tiers and modes (found on the H200). Here: more shapes than that.
    pipe = _fresh_pipe()
    pipelines.apply(pipe, speeds.switches("fast", "tuning"))
    assert "compile" in pipelines.applied(pipe)
    assert pipelines.skipped(pipe) == ("flash_attention", "cuda_graphs")  # no CUDA here: they cannot act
    sizes = [(64, 64), (96, 64), (128, 64), (64, 96), (128, 96), (160, 96), (96, 128), (192, 128), (128, 160)]
    for i, (width, height) in enumerate(sizes):
        mode = "t2i" if i % 3 == 0 else "t2v"
        s = audiovisual_settings.settings_for(mode, "smoke", width=width, height=height, num_inference_steps=2, seed=i)
        out = calls.generate(pipe, s, prompts.prompt_text(s), prompts.negative_prompt())
        assert np.asarray(out.video).shape[-3:-1] == (height, width)


@pytest.mark.slow  # compiles: seconds
def test_fast_compiles_only_the_cached_generation_half_once_per_prompt_length():
    # What a new kernel traces and loads before its first video. Step 0 (once per guidance pass) runs the text half
    # uncompiled, so only the generation half is compiled, the same at every step: a static graph for the prompt's
    # length and a dynamic one once the negative prompt's length differs. Before: 4 (the whole layer too), and 6 when
    # the first layer's sliced inputs made compiled code guard on views.
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    pipe = _fresh_pipe()
    pipelines.apply(pipe, speeds.switches("fast", "tuning"))
    _generate(pipe, "t2v", steps=2)
    assert counters["stats"]["unique_graphs"] == 2


def test_memory_speeds_choose_the_allocator_before_cuda_starts_and_keep_a_users_own(monkeypatch):
    monkeypatch.delenv(speeds.ALLOCATOR_ENV, raising=False)
    assert "default" in speeds.configure_allocator("fast") and speeds.ALLOCATOR_ENV not in os.environ
    assert speeds.MEMORY_ALLOCATOR in speeds.configure_allocator("low_vram")
    assert os.environ[speeds.ALLOCATOR_ENV] == speeds.MEMORY_ALLOCATOR
    monkeypatch.setenv(speeds.ALLOCATOR_ENV, "max_split_size_mb:512")
    assert "yours, kept" in speeds.configure_allocator("min_vram")
    monkeypatch.delenv(speeds.ALLOCATOR_ENV)
    monkeypatch.setattr("torch.cuda.is_initialized", lambda: True)
    assert "restart" in speeds.configure_allocator("low_vram") and speeds.ALLOCATOR_ENV not in os.environ


@pytest.mark.slow  # a generation each, one of them compiled: 14 s in all
@pytest.mark.parametrize("speed_name", speeds.offered("tuning"))
def test_edge_runs_with_every_speed(speed_name):
    """Edge's feed-forward has no gate (Nemotron's squared ReLU); `low_vram` used to fail on its missing gate_proj."""
    pipe = load_pipeline("tiny-edge", device="cpu", speed=speed_name)[0]
    assert pipe.transformer.config.hidden_act == "relu2" and not hasattr(pipe.transformer.layers[0].mlp, "gate_proj")
    for mode in ("t2v", "t2i"):
        s = audiovisual_settings.settings_for(mode, "smoke", num_inference_steps=2, seed=7)
        video = calls.generate(pipe, s, prompts.prompt_text(s), prompts.negative_prompt(mode)).video
        assert video.shape == (s.num_frames, s.height, s.width, 3) and np.isfinite(video).all()
