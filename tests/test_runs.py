"""Run folders and manifests: a new folder per run, entries read back from the files, nothing listed that was
not completely written, and out-of-memory errors turned into advice naming a smaller preset."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from helpers import presets, runs
from helpers.errors import MediaError, OutOfMemoryAdviceError, SoundNotSupportedError


def _output(settings, sound=True):
    rng = np.random.default_rng(1)
    video = rng.random((settings.num_frames, settings.height, settings.width, 3), dtype=np.float32)
    audio = torch.from_numpy(rng.uniform(-0.5, 0.5, (2, 48000)).astype(np.float32)) if sound else None
    return SimpleNamespace(video=video, sound=audio)


def test_each_run_gets_its_own_folder(tmp_path):
    first = runs.Run.create(tmp_path, backend="diffusers", model="tiny")
    second = runs.Run.create(tmp_path, backend="diffusers", model="tiny")
    assert first.path != second.path and first.path.is_dir() and second.path.is_dir()
    assert json.loads(first.manifest_path.read_text())["outputs"] == []


def test_manifest_lists_what_the_files_hold(tmp_path):
    run = runs.Run.create(tmp_path, backend="diffusers", model="tiny", sample_rate=48000)
    s = presets.settings_for("t2v_sound", "smoke", seed=9)
    with run.generation("t2v_sound", s) as gen:
        gen.save(_output(s))
    manifest = json.loads(run.manifest_path.read_text())
    video, wav = manifest["outputs"]
    assert (video["path"], video["kind"], video["num_frames"], video["width"], video["height"]) == (
        "t2v_sound.mp4", "video", 17, 160, 96,
    )  # fmt: skip
    assert video["has_audio"] and video["audio"]["codec"] == "aac" and video["seed"] == 9
    assert video["settings"]["preset"] == "smoke" and video["model"] == "tiny" and video["seconds"] >= 0
    assert wav["kind"] == "audio" and wav["audio"]["duration_s"] == pytest.approx(17 / 24)
    assert run.summary()[0]["sound"] == "AAC"


def test_a_failed_generation_adds_nothing_to_the_manifest(tmp_path):
    run = runs.Run.create(tmp_path, backend="diffusers", model="tiny", sample_rate=48000)
    s = presets.settings_for("t2v", "smoke")
    with pytest.raises(RuntimeError, match="boom"), run.generation("t2v", s):
        raise RuntimeError("boom")
    with pytest.raises(MediaError, match="without saving"), run.generation("t2v", s):
        pass
    assert json.loads(run.manifest_path.read_text())["outputs"] == []
    assert sorted(p.name for p in run.path.iterdir()) == ["manifest.json"]


def test_sound_asked_but_missing_is_an_error_not_a_silent_file(tmp_path):
    run = runs.Run.create(tmp_path, backend="diffusers", model="tiny", sample_rate=48000)
    s = presets.settings_for("t2v_sound", "smoke")
    with pytest.raises(SoundNotSupportedError), run.generation("t2v_sound", s) as gen:
        gen.save(_output(s, sound=False))
    assert sorted(p.name for p in run.path.iterdir()) == ["manifest.json"]


@pytest.mark.parametrize(("preset", "advice"), [("quality", "PRESET='default'"), ("default", "PRESET='draft'")])
def test_out_of_memory_names_a_smaller_preset(tmp_path, preset, advice):
    run = runs.Run.create(tmp_path, backend="diffusers", model="nvidia/Cosmos3-Nano")
    s = presets.settings_for("t2v", preset)
    with pytest.raises(OutOfMemoryAdviceError) as err, run.generation("t2v", s):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
    assert advice in str(err.value) and "CUDA out of memory" in str(err.value)
