"""Run folders and manifests: a new folder per run, entries read back from the files, nothing listed that was
not completely written, and out-of-memory errors turned into advice naming a smaller preset."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from helpers import audiovisual_settings, media, runs
from helpers.errors import MediaError, OutOfMemoryAdviceError, SoundNotSupportedError


def _output(settings, sound=True, seed=1):
    rng = np.random.default_rng(seed)
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
    s = audiovisual_settings.settings_for("t2v_sound", "smoke", seed=9)
    with run.generation(s) as gen:
        gen.save(_output(s))
    manifest = json.loads(run.manifest_path.read_text())
    video, wav = manifest["outputs"]
    assert (video["path"], video["kind"], video["num_frames"], video["width"], video["height"]) == (
        "t2v_sound.mp4",
        "video",
        9,
        320,
        192,
    )
    assert video["has_audio"] and video["audio"]["codec"] == "aac" and video["seed"] == 9
    assert video["settings"]["preset"] == "smoke" and video["model"] == "tiny" and video["seconds"] >= 0
    assert wav["kind"] == "audio" and wav["audio"]["duration_s"] == pytest.approx(9 / 24)
    assert run.summary()[0]["sound"] == "AAC"


def test_generating_a_mode_again_keeps_the_first_files(tmp_path):
    """The form's Generate pressed twice on one mode: both videos (and their WAVs) stay, each listed once."""
    run = runs.Run.create(tmp_path, backend="diffusers", model="tiny", sample_rate=48000)
    first, second = (audiovisual_settings.settings_for("t2v_sound", "smoke", seed=seed) for seed in (1, 2))
    for s in (first, second):
        with run.generation(s) as gen:
            gen.save(_output(s, seed=s.seed))
    manifest = json.loads(run.manifest_path.read_text())["outputs"]
    assert [(o["mode"], o["path"], o["seed"]) for o in manifest] == [
        ("t2v_sound", "t2v_sound.mp4", 1),
        ("t2v_sound", "t2v_sound.wav", 1),
        ("t2v_sound", "t2v_sound-2.mp4", 2),
        ("t2v_sound", "t2v_sound-2.wav", 2),
    ]
    assert all((run.path / o["path"]).is_file() for o in manifest)
    assert (
        media.read_frames(run.path / "t2v_sound.mp4").mean() != media.read_frames(run.path / "t2v_sound-2.mp4").mean()
    )


def test_a_failed_generation_adds_nothing_to_the_manifest(tmp_path):
    run = runs.Run.create(tmp_path, backend="diffusers", model="tiny", sample_rate=48000)
    s = audiovisual_settings.settings_for("t2v", "smoke")
    with pytest.raises(RuntimeError, match="boom"), run.generation(s):
        raise RuntimeError("boom")
    with pytest.raises(MediaError, match="without saving"), run.generation(s):
        pass
    assert json.loads(run.manifest_path.read_text())["outputs"] == []
    assert sorted(p.name for p in run.path.iterdir()) == ["manifest.json"]


def test_sound_asked_but_missing_is_an_error_not_a_silent_file(tmp_path):
    run = runs.Run.create(tmp_path, backend="diffusers", model="tiny", sample_rate=48000)
    s = audiovisual_settings.settings_for("t2v_sound", "smoke")
    with pytest.raises(SoundNotSupportedError), run.generation(s) as gen:
        gen.save(_output(s, sound=False))
    assert sorted(p.name for p in run.path.iterdir()) == ["manifest.json"]


@pytest.mark.parametrize(("preset", "advice"), [("published", "PRESET='draft'"), ("draft", "PRESET='smoke'")])
def test_out_of_memory_names_a_smaller_preset(tmp_path, preset, advice):
    run = runs.Run.create(tmp_path, backend="diffusers", model="nvidia/Cosmos3-Nano")
    s = audiovisual_settings.settings_for("t2v", preset)
    with pytest.raises(OutOfMemoryAdviceError) as err, run.generation(s):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
    assert advice in str(err.value) and "CUDA out of memory" in str(err.value)


def test_an_output_dir_that_cannot_be_written_names_the_parameter(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(MediaError, match="OUTPUT_DIR=.*cannot be written to.*Point OUTPUT_DIR at a folder"):
        runs.Run.create(blocker / "outputs", backend="diffusers", model="tiny")


def test_bytes_from_a_server_are_stored_and_a_video_with_sound_also_gets_its_wav(tmp_path):
    from helpers import media

    s = audiovisual_settings.settings_for("t2v_sound", "smoke", seed=2)
    source = media.write_video(
        tmp_path / "served.mp4", _output(s).video, s.fps, audio=_output(s).sound, sample_rate=48000
    )
    run = runs.Run.create(tmp_path / "out", backend="vllm_omni", model="tiny")
    with run.generation(s) as gen:
        gen.save_bytes(source.read_bytes(), ".mp4", server_seconds=1.5)
    video, wav = json.loads(run.manifest_path.read_text())["outputs"]
    assert (video["path"], video["has_audio"], video["server_seconds"]) == ("t2v_sound.mp4", True, 1.5)
    assert (wav["path"], wav["kind"]) == ("t2v_sound.wav", "audio")
    assert wav["audio"]["duration_s"] == pytest.approx(s.duration_s)


def test_action_files_are_listed_as_pairs_with_their_settings_and_never_overwritten(tmp_path):
    from cosmos3_action import action_settings, actions

    run = runs.Run.create(tmp_path, backend="diffusers", model="tiny")
    s = action_settings.settings_for("id_av", "smoke", seed=2)
    first = actions.save(run, "id_av", np.zeros((60, 9)), s, units="m")
    second = actions.save(run, "id_av", np.ones((60, 9)), s, units="m")
    assert (first.name, second.name) == ("id_av.npy", "id_av-2.npy")
    manifest = json.loads(run.manifest_path.read_text())["outputs"]
    assert [o["path"] for o in manifest] == ["id_av.npy", "id_av.json", "id_av-2.npy", "id_av-2.json"]
    assert {(o["kind"], o["num_frames"], o["fps"], o["seed"]) for o in manifest} == {("actions", 60, 10, 2)}
    array, about = actions.read(second)
    assert array.min() == 1 and about["domain_name"] == "av" and about["task"] == "inverse_dynamics"
    assert {row["frames"] for row in run.summary()} == {60}
