"""A dataset spec and its folder, without a model: every wrong spec is refused naming the field and the fix, job ids
are made from what decides the output, and a folder left in any state by a stopped run resumes without losing or
repeating a file. A full disk stops the dataset with a clear error and what was finished stays listed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cosmos3_dataset import dataset_folder, dataset_spec
from helpers.assets import assets_dir
from helpers.errors import InvalidSettingError, MediaError

BUNDLED = assets_dir("dataset") / "spec.json"


def _spec(tmp_path: Path, **changes: object) -> Path:
    """The bundled spec with `changes` (None removes a field), its scenes' files as absolute paths."""
    spec = json.loads(BUNDLED.read_text())
    for scene in spec["scenes"]:
        scene.update({k: str((BUNDLED.parent / scene[k]).resolve()) for k in ("prompt", "image")})
    for key, value in changes.items():
        if value is None:
            spec.pop(key)
        else:
            spec[key] = value
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def test_the_bundled_spec_expands_into_its_jobs_with_stable_ids() -> None:
    spec = dataset_spec.load(BUNDLED, preset="smoke")
    assert spec.count() == {"t2v": 8, "i2v": 8, "t2i": 8} and spec.preset == "smoke"
    assert len({job.id for job in spec.jobs}) == 24
    again = dataset_spec.load(BUNDLED, preset="smoke")
    assert [job.id for job in again.jobs] == [job.id for job in spec.jobs]
    job = spec.jobs[0]
    assert json.loads(job.prompt)["lighting"]["conditions"] == spec.axes["lighting"][job.variation["lighting"]]
    assert dataset_spec.load(BUNDLED).preset == "draft"  # the spec's own, unless PRESET says otherwise
    assert {j.id for j in dataset_spec.load(BUNDLED, preset="draft").jobs}.isdisjoint({j.id for j in spec.jobs})


def test_an_id_follows_what_decides_the_output_not_the_labels(tmp_path: Path) -> None:
    spec = json.loads(_spec(tmp_path).read_text())
    ids = {job.id for job in dataset_spec.load(_spec(tmp_path), preset="smoke").jobs}
    spec["scenes"][0]["name"] = "renamed"
    spec["variations"]["lighting"]["values"] = {
        f"x_{k}": v for k, v in spec["variations"]["lighting"]["values"].items()
    }
    (tmp_path / "relabelled.json").write_text(json.dumps(spec))
    assert {job.id for job in dataset_spec.load(tmp_path / "relabelled.json", preset="smoke").jobs} == ids
    assert {job.id for job in dataset_spec.load(_spec(tmp_path, seeds=[1]), preset="smoke").jobs}.isdisjoint(ids)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"weather": "rain"}, r"SPEC field 'weather': is not a spec field\. Allowed: 'name'"),
        ({"seeds": []}, r"SPEC field 'seeds': give a non-empty list, e\.g\. \[0, 1\]"),
        ({"scenes": []}, r"SPEC field 'scenes': give a non-empty list"),
        ({"modes": ["t2v", "v2v"]}, r"SPEC field 'modes': 'v2v' is not a dataset mode\. Allowed: 't2v', 'i2v', 't2i'"),
        ({"preset": "huge"}, r"SPEC field 'preset': PRESET='huge' is not a preset"),
        ({"tier": 1080}, r"SPEC field 'tier': TIER=1080 is not a resolution tier"),
        ({"aspect_ratio": "2:1"}, r"SPEC field 'aspect_ratio': ASPECT_RATIO='2:1' is not an aspect ratio"),
        ({"name": "../elsewhere"}, r"SPEC field 'name': '\.\./elsewhere' is not a folder name"),
        ({"preset": None}, r"SPEC field 'preset': is missing"),
        ({"seeds": [0, -1]}, r"SPEC field 'seeds': seed=-1 is not allowed"),
        (
            {"variations": {"sky": {"field": "lighting.sky", "values": {"clear": "Clear."}}}},
            r"SPEC field variations\.sky\.field: scene 'workbench' has no field 'lighting\.sky': lighting has "
            r"\['conditions'",
        ),
        ({"variations": {"sky": {"values": {"clear": "Clear."}}}}, r"SPEC field variations\.sky\.field: name the"),
        ({"variations": {"sky": {"field": "lighting.conditions", "values": {}}}}, r"variations\.sky\.values: give at"),
        (
            {"variations": {"sky": {"field": "lighting.conditions", "values": {"a": "Same.", "b": "Same."}}}},
            r"SPEC field 'variations': two jobs are the same generation",
        ),
    ],
)
def test_a_wrong_spec_is_refused_naming_the_field_and_the_fix(tmp_path: Path, changes: dict, message: str) -> None:
    with pytest.raises(InvalidSettingError, match=message):
        dataset_spec.load(_spec(tmp_path, **changes), preset="spec")


def test_a_scene_without_its_image_or_with_a_missing_one_is_refused_for_image_to_video(tmp_path: Path) -> None:
    spec = json.loads(_spec(tmp_path).read_text())
    spec["scenes"][1].pop("image")
    (tmp_path / "no_image.json").write_text(json.dumps(spec))
    with pytest.raises(InvalidSettingError, match=r"SPEC field scenes\[1\]\.image: mode 'i2v' needs an image"):
        dataset_spec.load(tmp_path / "no_image.json")
    spec["modes"] = ["t2v"]  # without i2v, a scene needs no image
    (tmp_path / "no_image.json").write_text(json.dumps(spec))
    assert len(dataset_spec.load(tmp_path / "no_image.json").jobs) == 8
    spec["scenes"][1]["image"] = "nowhere.png"
    (tmp_path / "no_image.json").write_text(json.dumps(spec))
    with pytest.raises(InvalidSettingError, match=r"SPEC field scenes\[1\]\.image: .*nowhere\.png"):
        dataset_spec.load(tmp_path / "no_image.json")


def test_a_size_the_model_cannot_make_and_a_wrong_preset_parameter_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidSettingError, match=r"SPEC field 'tier': MODEL='nvidia/Cosmos3-Edge' makes 256, 480"):
        dataset_spec.load(_spec(tmp_path, tier=720), model="nvidia/Cosmos3-Edge")
    with pytest.raises(InvalidSettingError, match=r"SPEC field 'modes': .* makes 'i2v' only; drop 't2v' from MODES"):
        dataset_spec.load(BUNDLED, model="nvidia/Cosmos3-Super-Image2Video")
    with pytest.raises(InvalidSettingError, match=r"PRESET='huge' is not a preset\. Allowed: 'smoke', .* Or 'spec'"):
        dataset_spec.load(BUNDLED, preset="huge")
    with pytest.raises(InvalidSettingError, match=r"SPEC='nowhere\.json' is not a file"):
        dataset_spec.load("nowhere.json")


def _frames(job: dataset_spec.Job, value: float = 0.5) -> np.ndarray:
    s = job.settings
    return np.full((s.num_frames, s.height, s.width, 3), value, np.float32)


def _make(folder: dataset_folder.DatasetFolder, jobs: list[dataset_spec.Job]) -> None:
    for job in jobs:
        with folder.generation(job) as gen:
            gen.save(_frames(job))


def test_a_stopped_dataset_resumes_from_what_is_on_disk(tmp_path: Path) -> None:
    spec = dataset_spec.load(BUNDLED, preset="smoke")
    folder = dataset_folder.DatasetFolder.open(tmp_path, spec, backend="diffusers", model="tiny")
    plan = folder.plan()
    assert (len(plan.done), len(plan.todo)) == (0, 24)
    _make(folder, plan.todo[:6])
    changed, missing = plan.todo[:2]
    blocked, failed = plan.todo[10:12]
    (folder.path / folder.relative(changed)).write_bytes(b"not the video it was")
    (folder.path / folder.relative(missing)).unlink()
    folder.fail(blocked, "Input was blocked by Cosmos3 guardrails.")
    folder.fail(failed, "HTTP 500: the server lost its engine")
    # A stopped run: a half-written file under its temporary name, and a whole file renamed but not yet recorded.
    (folder.path / "videos" / f".{plan.todo[6].id}-abc.mp4").write_bytes(b"half")
    unrecorded = plan.todo[7]
    from helpers import media

    media.write_video(folder.path / folder.relative(unrecorded), _frames(unrecorded), unrecorded.settings.fps)

    again = dataset_folder.DatasetFolder.open(tmp_path, spec, backend="vllm_omni", model="tiny").plan()
    todo = {job.id for job in again.todo}
    assert {changed.id, missing.id} <= todo and blocked.id not in todo and failed.id in todo
    assert [job.id for job in again.blocked] == [blocked.id]
    assert unrecorded.id in {job.id for job in again.done} and len(again.done) == 5  # 6 made, 2 spoilt, 1 adopted
    assert len(todo) == 24 - 5 - 1
    notes = "\n".join(again.notes)
    assert "half-written" in notes and "changed" in notes and "missing" in notes and "not recorded" in notes
    assert list((folder.path / "videos").glob(".*")) == []


def test_one_folder_holds_one_model(tmp_path: Path) -> None:
    spec = dataset_spec.load(BUNDLED, preset="smoke")
    dataset_folder.DatasetFolder.open(tmp_path, spec, backend="diffusers", model="tiny")
    with pytest.raises(MediaError, match=r"holds generations of MODEL='tiny', not 'nano-random'.*Set OUTPUT_DIR"):
        dataset_folder.DatasetFolder.open(tmp_path, spec, backend="diffusers", model="nano-random")


_FULL_DISK = """
import resource, signal, sys
import numpy as np
from cosmos3_dataset import dataset_folder, dataset_spec
from helpers.errors import StorageError
spec = dataset_spec.load(sys.argv[1], preset="smoke")
folder = dataset_folder.DatasetFolder.open(sys.argv[2], spec, backend="diffusers", model="tiny")
jobs = folder.plan().todo
t2i = [job for job in jobs if job.mode == "t2i"][:2]
for job in t2i:
    with folder.generation(job) as gen:
        gen.save(np.zeros((1, job.settings.height, job.settings.width, 3), np.float32))
# The kernel's file size limit, the way a full disk refuses a write: a real OSError from the kernel.
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (40_000, 40_000))
try:
    job = next(job for job in jobs if job.mode == "t2v")
    with folder.generation(job) as gen:
        gen.save(np.random.default_rng(0).random((9, 192, 320, 3), dtype=np.float32))
except StorageError as err:
    print(err)
"""


@pytest.mark.slow  # a fresh interpreter that generates until its file size limit: seconds
def test_a_full_disk_stops_the_dataset_with_the_fix_and_keeps_what_was_finished(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _FULL_DISK, str(BUNDLED), str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert "failed: File too large. The dataset stops here; the 2 files finished before are whole" in result.stdout
    assert "point OUTPUT_DIR at a folder with room" in result.stdout and "goes on where it stopped" in result.stdout
    folder = tmp_path / "workcells"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert len(manifest["outputs"]) == 2 and list((folder / "videos").glob("*.mp4")) == []
    assert len((folder / "images" / "metadata.jsonl").read_text().splitlines()) == 2


def test_the_two_notebooks_mirror_each_other_section_by_section() -> None:
    from cookbook_tools import notebooks
    from tests.notebook_checks import sections

    diffusers, vllm = (sections(name) for name in notebooks.DATASET_PAIR)
    backend = {  # what differs: the backend's own section, and a call where the other sends a request
        "## Speed switches": "## Servers for a dataset",
        "## Several prompts in one call?": "## Several prompts in one request?",
        "## When a spec is wrong": "## When a spec or a job is wrong",
    }
    assert [backend.get(h, h) for h in diffusers] == vllm
