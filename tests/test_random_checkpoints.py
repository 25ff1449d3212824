"""The random-weight checkpoints: the tiny one built from the real diffusers classes, saved with save_pretrained,
reloaded with from_pretrained, deterministic and able to run every mode; and the exact offline Qwen tokenizer that
`nano-random` uses (its 15 B-parameter build is exercised on the GPU runner)."""

import json

import numpy as np
import pytest
import torch

import random_checkpoints as tiny_checkpoint
from cookbook_tools import pipelines
from helpers import presets, prompts
from helpers.errors import SoundNotSupportedError
from helpers.with_diffusers import calls


def _state_digest(pipe):
    return {
        name: float(sum(p.double().sum() for p in getattr(pipe, name).state_dict().values()))
        for name in ("transformer", "vae", "sound_tokenizer")
    }


def test_build_save_reload_gives_the_same_real_components(tmp_path):
    from diffusers import AutoencoderKLWan, Cosmos3OmniPipeline

    path = tiny_checkpoint.ensure_tiny_checkpoint(tmp_path)
    index = json.loads((path / "model_index.json").read_text())
    assert index["_class_name"] == "Cosmos3OmniPipeline"
    assert index["sound_tokenizer"] == ["diffusers", "Cosmos3AVAEAudioTokenizer"]
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    assert size < 20 * 2**20
    reloaded = Cosmos3OmniPipeline.from_pretrained(path, enable_safety_checker=False)
    assert isinstance(reloaded.vae, AutoencoderKLWan)
    assert _state_digest(reloaded) == _state_digest(tiny_checkpoint.build_tiny_pipeline())


def test_building_twice_gives_identical_weights_and_reuses_the_cache(tmp_path):
    assert _state_digest(tiny_checkpoint.build_tiny_pipeline()) == _state_digest(tiny_checkpoint.build_tiny_pipeline())
    first = tiny_checkpoint.ensure_tiny_checkpoint(tmp_path)
    stamp = (first / "model_index.json").stat().st_mtime_ns
    assert tiny_checkpoint.ensure_tiny_checkpoint(tmp_path) == first
    assert (first / "model_index.json").stat().st_mtime_ns == stamp
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # no staging folders left behind


def test_loaded_tiny_pipeline_reports_cpu_float32_no_guardrails_and_sound(tiny_pipe):
    pipe, checkpoint = tiny_pipe
    info = checkpoint.info()
    assert (info["source"], info["device"], info["dtype"], info["guardrails"]) == ("tiny", "cpu", "float32", False)
    assert calls.has_sound(pipe) and calls.sample_rate(pipe) == 48000


@pytest.mark.parametrize("mode", ["t2i", "t2v", "t2v_sound"])
def test_every_output_shape_follows_the_settings(tiny_pipe, mode):
    pipe, _ = tiny_pipe
    s = presets.settings_for(mode, "smoke")
    out = pipelines.generate(pipe, '{"caption": "a harbor"}', s)
    assert out.video.shape == (s.num_frames, s.height, s.width, 3)
    assert (out.sound is not None) == s.enable_sound
    if s.enable_sound:
        assert out.sound.shape[0] == 2


def test_same_seed_same_frames_other_seed_other_frames(tiny_pipe):
    pipe, _ = tiny_pipe
    runs = []
    for seed in (3, 3, 4):
        s = presets.settings_for("t2v", "smoke", seed=seed, num_frames=5)
        runs.append(pipelines.generate(pipe, "a harbor", s).video)
    assert np.array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])


def test_flow_shift_follows_the_mode_and_changes_the_output(tiny_pipe):
    pipe, _ = tiny_pipe
    s = presets.settings_for("t2v", "smoke", num_frames=5, num_inference_steps=2)
    video = pipelines.generate(pipe, "a harbor", s).video
    assert pipe.scheduler.config.flow_shift == 10.0
    pipelines.generate(pipe, "a harbor", presets.settings_for("t2i", "smoke", num_inference_steps=2))
    assert pipe.scheduler.config.flow_shift == 3.0
    shifted = presets.settings_for("t2v", "smoke", num_frames=5, num_inference_steps=2, flow_shift=3.0)
    assert not np.array_equal(pipelines.generate(pipe, "a harbor", shifted).video, video)


def test_qwen_tokenizer_is_exact_and_offline():
    tokenizer = tiny_checkpoint.qwen_tokenizer()
    assert tokenizer.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>", "<|vision_start|>"]) == [
        151644,
        151645,
        151652,
    ]
    # The cookbook's own prompts are long: they are what makes text cost as much as video at 256p.
    s = presets.settings_for("t2v", "default")
    assert 1_200 < len(tokenizer(prompts.prompt_text(s))["input_ids"]) < 2_200


def test_sound_on_a_checkpoint_without_sound_fails_before_generating(tmp_path):
    """A real silent checkpoint: the tiny one saved without its sound tokenizer, reloaded by from_pretrained."""
    from diffusers import Cosmos3OmniPipeline

    full = tiny_checkpoint.build_tiny_pipeline()
    silent = Cosmos3OmniPipeline(
        transformer=full.transformer, text_tokenizer=full.text_tokenizer, vae=full.vae,
        scheduler=full.scheduler, sound_tokenizer=None, enable_safety_checker=False,
    )  # fmt: skip
    silent.save_pretrained(tmp_path / "silent")
    pipe = Cosmos3OmniPipeline.from_pretrained(tmp_path / "silent", enable_safety_checker=False)
    with pytest.raises(SoundNotSupportedError, match="no sound tokenizer"):
        pipelines.generate(pipe, "a harbor", presets.settings_for("t2v_sound", "smoke"))
    assert torch.is_tensor(next(pipe.transformer.parameters()))
