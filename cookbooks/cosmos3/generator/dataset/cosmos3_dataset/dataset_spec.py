"""A dataset of generations as data: a spec file a reader edits, expanded into jobs with stable ids.

A spec is one JSON object (the bundled one: `cookbooks/cosmos3/generator/dataset/assets/spec.json`):

    {
      "name": "workcells",                 # the dataset's folder under OUTPUT_DIR
      "preset": "draft",                   # smoke | draft | published; PRESET overrides it
      "tier": 480, "aspect_ratio": "16:9", # optional: a size other than the preset's
      "modes": ["t2v", "i2v", "t2i"],
      "seeds": [0, 1],
      "scenes": [{"name": "arm", "prompt": "prompts/arm.json", "image": "images/arm.png"}],
      "variations": {
        "time_of_day": {"field": "lighting.conditions", "values": {"noon": "...", "dusk": "..."}}
      }
    }

Each scene's prompt is a structured JSON caption (inline, or a file beside the spec), as the audiovisual notebooks
send them. A variation axis replaces one field of every caption (a dotted path; a number picks a list item) with each
of its values in turn. The jobs are every scene x every combination of the axes' values x every mode x every seed.
A job's id is a hash of what decides its output, so the same job has the same id in every run and on every backend.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers import audiovisual_settings, media, prompts
from helpers.audiovisual_settings import AudiovisualSettings
from helpers.errors import InvalidSettingError, MediaError, allowed
from helpers.runs import sha256_of

MODES: tuple[str, ...] = ("t2v", "i2v", "t2i")
FIELDS: tuple[str, ...] = ("name", "preset", "tier", "aspect_ratio", "modes", "seeds", "scenes", "variations")
REQUIRED: tuple[str, ...] = ("name", "preset", "modes", "seeds", "scenes")
SCENE_FIELDS: tuple[str, ...] = ("name", "prompt", "image")
AXIS_FIELDS: tuple[str, ...] = ("field", "values")

# Seconds a job took where it was measured, for the estimate before a dataset starts: {(model, preset, device):
# {mode: seconds}}: "tiny" on two CPU cores, the Diffusers notebook's medians (support/benchmarks/results/
# dataset_cpu.json). Elsewhere the progress bar's estimate takes over once the first jobs are done.
MEASURED_SECONDS: dict[tuple[str, str, str], dict[str, float]] = {
    ("tiny", "smoke", "cpu"): {"t2v": 0.59, "i2v": 0.59, "t2i": 0.21},
}


@dataclass(frozen=True)
class Scene:
    name: str
    caption: dict[str, Any]
    image: Path | None


@dataclass(frozen=True)
class Job:
    """One generation of the dataset: a scene's caption with one value of each variation axis, in one mode, at one
    seed, with the settings the preset gives that mode."""

    scene: str
    variation: dict[str, str]  # axis -> the value's label
    caption: dict[str, Any]
    image: Path | None
    settings: AudiovisualSettings

    @property
    def mode(self) -> str:
        return self.settings.mode

    @property
    def seed(self) -> int:
        return self.settings.seed

    @property
    def prompt(self) -> str:
        """The caption as the one line of JSON the model reads, with the settings' size and length written in."""
        return prompts.prompt_text(self.settings, self.caption)

    @property
    def negative_prompt(self) -> str:
        return prompts.negative_prompt(self.mode)

    @property
    def id(self) -> str:
        """16 hex digits of a hash of the prompt, the negative prompt, the settings and the image's bytes: what
        decides the output, and nothing else (not the scene's or the values' labels)."""
        content = {
            "prompt": self.prompt,
            "negative_prompt": self.negative_prompt,
            "settings": {k: v for k, v in self.settings.to_dict().items() if k != "preset"},
            "image": sha256_of(self.image) if self.image else None,
        }
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def suffix(self) -> str:
        return ".png" if self.settings.is_image else ".mp4"

    def describe(self) -> dict[str, Any]:
        """What the dataset's metadata says of the job, beside its file."""
        return {
            "id": self.id,
            "scene": self.scene,
            "variation": self.variation,
            "mode": self.mode,
            "seed": self.seed,
            "prompt": self.prompt,
            "conditioning_image": self.image.name if self.image else None,
        }


@dataclass(frozen=True)
class Spec:
    name: str
    preset: str
    path: Path
    jobs: tuple[Job, ...]
    axes: dict[str, dict[str, str]]

    def count(self) -> dict[str, int]:
        """Jobs per mode."""
        counts: dict[str, int] = {}
        for job in self.jobs:
            counts[job.mode] = counts.get(job.mode, 0) + 1
        return counts

    def estimate_s(self, model: str, device: str, jobs: Iterable[Job] | None = None) -> float | None:
        """The jobs' seconds from what one job of each mode took where it was measured (`MEASURED_SECONDS`), or None
        where this model, preset and device were not measured."""
        measured = MEASURED_SECONDS.get((model, self.preset, device))
        if measured is None:
            return None
        return sum(measured[job.mode] for job in (self.jobs if jobs is None else jobs))


def _field(where: str, message: str) -> InvalidSettingError:
    return InvalidSettingError(f"SPEC field {where}: {message}")


def _read_json(path: Path, where: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise _field(where, f"{str(path)!r} does not exist. Give a path relative to the spec file.") from exc
    except json.JSONDecodeError as exc:
        raise _field(where, f"{str(path)!r} is not valid JSON ({exc}).") from exc


def _unknown(given: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise _field(
            f"{where}{unknown[0]!r}" if where else repr(unknown[0]), f"is not a spec field. Allowed: {allowed(known)}."
        )


def _caption(scene: dict[str, Any], base: Path, where: str) -> dict[str, Any]:
    given = scene.get("prompt")
    if isinstance(given, str):
        given = _read_json(base / given, f"{where}.prompt")
    if not isinstance(given, dict) or not given:
        raise _field(f"{where}.prompt", "give a structured JSON caption: an object, or the name of a .json file.")
    return {k: v for k, v in given.items() if k != prompts.COOKBOOK_KEY}


def _image(scene: dict[str, Any], base: Path, where: str, needed: bool) -> Path | None:
    given = scene.get("image")
    if given is None:
        if needed:
            raise _field(
                f"{where}.image",
                "mode 'i2v' needs an image for every scene: add \"image\": \"file.png\", or drop 'i2v' from modes.",
            )
        return None
    path = (base / str(given)).resolve()
    try:
        media.load_image(path)
    except MediaError as exc:
        raise _field(f"{where}.image", f"{exc}") from exc
    return path


def _path_of(field: Any, where: str) -> list[str]:
    if not isinstance(field, str) or not field.strip():
        raise _field(
            f"{where}.field",
            'name the caption field the values replace, as a dotted path such as "lighting.conditions".',
        )
    return field.strip().split(".")


def _replace(caption: dict[str, Any], path: list[str], value: str, where: str, scene: str) -> dict[str, Any]:
    """A copy of `caption` with the field at `path` set to `value`; the field must exist."""
    edited = copy.deepcopy(caption)
    node: Any = edited
    for depth, key in enumerate(path):
        last = depth == len(path) - 1
        if isinstance(node, list) and key.isdigit() and int(key) < len(node):
            index: Any = int(key)
        elif isinstance(node, dict) and key in node:
            index = key
        else:
            here = ".".join(path[:depth]) or "the caption"
            keys = (
                list(node)
                if isinstance(node, dict)
                else f"items 0 to {len(node) - 1}"
                if isinstance(node, list)
                else []
            )
            raise _field(
                f"{where}.field",
                f"scene {scene!r} has no field {'.'.join(path)!r}: {here} has "
                f"{keys or 'no fields'}. Name a field every scene's caption has.",
            )
        if last:
            node[index] = value
        else:
            node = node[index]
    return edited


def _axes(variations: Any, scenes: list[Scene]) -> dict[str, tuple[list[str], dict[str, str]]]:
    if variations is None:
        return {}
    if not isinstance(variations, dict):
        raise _field(
            "'variations'", 'give an object: {"axis": {"field": "lighting.conditions", "values": {"label": "text"}}}.'
        )
    axes = {}
    for axis, body in variations.items():
        where = f"variations.{axis}"
        if not isinstance(body, dict):
            raise _field(where, 'give {"field": ..., "values": {...}}.')
        _unknown(body, AXIS_FIELDS, f"{where}.")
        path = _path_of(body.get("field"), where)
        values = body.get("values")
        if not isinstance(values, dict) or not values:
            raise _field(
                f"{where}.values",
                'give at least one value, as {"label": "the field\'s new text"}: with none the dataset has no jobs.',
            )
        for scene in scenes:
            _replace(scene.caption, path, "", where, scene.name)
        axes[axis] = (path, {str(k): str(v) for k, v in values.items()})
    return axes


def _list(spec: dict[str, Any], key: str, example: str) -> list[Any]:
    value = spec.get(key)
    if not isinstance(value, list) or not value:
        raise _field(repr(key), f"give a non-empty list, e.g. {example}: with none the dataset has no jobs.")
    return value


# The notebook parameter each spec field stands for: a refusal of the settings' entry names the parameter, and the
# spec adds the field whose value it was.
SPEC_FIELDS: dict[str, str] = {
    "PRESET": "preset",
    "TIER": "tier",
    "ASPECT_RATIO": "aspect_ratio",
    "MODES": "modes",
    "seed": "seeds",
}


def _settings(
    spec: dict[str, Any], modes: list[str], seeds: list[Any], preset: str, model: str
) -> dict[tuple[str, Any], AudiovisualSettings]:
    """Each mode's settings at each seed, under the notebook's PRESET or else the spec's preset, at the spec's size:
    the settings' entry every family shares, whose refusal names the spec field it came from."""
    given = preset not in ("", "spec")  # the notebook's PRESET, which a refusal names as it is
    settings = {}
    for mode in dict.fromkeys(modes):
        for seed in dict.fromkeys(seeds):
            try:
                settings[mode, seed] = audiovisual_settings.settings_for(
                    mode,
                    preset if given else spec["preset"],
                    seed=seed,
                    model=model,
                    tier=spec.get("tier"),
                    aspect_ratio=spec.get("aspect_ratio"),
                )
            except InvalidSettingError as exc:
                field = SPEC_FIELDS.get(exc.parameter or "")
                if field == "preset" and given:  # the notebook's own PRESET takes one value more
                    raise InvalidSettingError(f"{exc} Or 'spec': the spec file's own.", "PRESET") from exc
                if field is None:
                    raise
                if field == "tier" and "tier" not in spec:  # a size the spec's preset set
                    field = "preset"
                raise _field(repr(field), str(exc)) from exc
    return settings


def load(path: str | os.PathLike[str], *, preset: str = "", model: str = "") -> Spec:
    """The spec at `path` expanded into its jobs, every field checked first: a wrong one raises
    `InvalidSettingError` naming the field and the fix. `preset` (the notebook's PRESET) replaces the spec's unless
    it is "spec" or empty."""
    spec_path = Path(path).expanduser().resolve()
    if not spec_path.is_file():
        raise InvalidSettingError(
            f"SPEC={str(path)!r} is not a file. Give the path of a dataset spec (JSON), or "
            "leave SPEC empty for the bundled one."
        )
    spec = _read_json(spec_path, "SPEC")
    if not isinstance(spec, dict):
        raise InvalidSettingError(f"SPEC={str(path)!r} must hold one JSON object.")
    _unknown(spec, FIELDS, "")
    for key in REQUIRED:
        if key not in spec:
            raise _field(
                repr(key),
                f"is missing. A spec has {allowed(REQUIRED)} (and may have 'variations', 'tier', 'aspect_ratio').",
            )
    name = spec["name"]
    if not isinstance(name, str) or not name or name != Path(name).name or name.startswith("."):
        raise _field("'name'", f"{name!r} is not a folder name: use letters, digits, '-' or '_'.")
    modes = _list(spec, "modes", '["t2v", "i2v"]')
    for mode in modes:
        if mode not in MODES:
            raise _field("'modes'", f"{mode!r} is not a dataset mode. Allowed: {allowed(MODES)}.")
    seeds = _list(spec, "seeds", "[0, 1]")
    base = spec_path.parent
    scenes = []
    for k, scene in enumerate(_list(spec, "scenes", '[{"name": "arm", "prompt": "arm.json"}]')):
        where = f"scenes[{k}]"
        if not isinstance(scene, dict):
            raise _field(where, 'give {"name": ..., "prompt": ..., "image": ...}.')
        _unknown(scene, SCENE_FIELDS, f"{where}.")
        scene_name = str(scene.get("name") or f"scene{k}")
        scenes.append(Scene(scene_name, _caption(scene, base, where), _image(scene, base, where, "i2v" in modes)))
    axes = _axes(spec.get("variations"), scenes)

    settings = _settings(spec, modes, seeds, preset, model)
    jobs = []
    labels = [list(values.items()) for _, values in axes.values()]
    for scene in scenes:
        for combination in itertools.product(*labels):
            caption = scene.caption
            for (axis, (field_path, _)), (_, text) in zip(axes.items(), combination, strict=True):
                caption = _replace(caption, field_path, text, f"variations.{axis}", scene.name)
            variation = {axis: label for axis, (label, _) in zip(axes, combination, strict=True)}
            for mode in dict.fromkeys(modes):
                for seed in dict.fromkeys(seeds):
                    image = scene.image if mode == "i2v" else None
                    jobs.append(Job(scene.name, variation, caption, image, settings[mode, seed]))
    ids = [job.id for job in jobs]
    if len(set(ids)) != len(ids):
        raise _field(
            "'variations'",
            "two jobs are the same generation (the same caption, mode and seed): give each "
            "value of an axis a different text, and each seed once.",
        )
    return Spec(
        name,
        next(iter(settings.values())).preset,
        spec_path,
        tuple(jobs),
        {axis: values for axis, (_, values) in axes.items()},
    )
