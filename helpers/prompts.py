"""Structured JSON prompts: load the bundled ones, add the generation metadata, serialise, count words.

Cosmos 3 was trained on long structured JSON captions, and NVIDIA passes `json.dumps(caption)` as the prompt.
Each bundled prompt (assets/prompts/<mode>.json) is such an object plus a `_cookbook` block that says which
conditioning asset it belongs with; that block is ours and never sent to the model.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from helpers.assets import asset_path
from helpers.audiovisual_settings import MODE_TITLES, MODES, AudiovisualSettings
from helpers.errors import InvalidSettingError, MediaError

COOKBOOK_KEY = "_cookbook"


@cache
def _read(name: str) -> dict[str, Any]:
    path = asset_path(f"prompts/{name}.json")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InvalidSettingError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidSettingError(f"{path} must hold one JSON object.")
    return data


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise InvalidSettingError(f"No bundled prompt for mode {mode!r}. Modes with prompts: {', '.join(MODES)}.")


def load(mode: str) -> dict[str, Any]:
    """The structured caption for a mode (a fresh copy, without the `_cookbook` block)."""
    _check_mode(mode)
    return {k: v for k, v in json.loads(json.dumps(_read(mode))).items() if k != COOKBOOK_KEY}


def about(mode: str) -> dict[str, Any]:
    _check_mode(mode)
    return dict(_read(mode).get(COOKBOOK_KEY, {}))


def conditioning(mode: str) -> Path:
    """The bundled image or video that the prompt of an i2v / v2v mode continues."""
    name = about(mode).get("conditioning")
    if not name:
        raise InvalidSettingError(f"Mode {mode!r} takes no conditioning image or video.")
    return asset_path(name)


def first_and_last(paths: str = "", mode: str = "fl2v") -> tuple[Path, Path]:
    """fl2v's first and last frame: `paths` as "first.png,last.png" (the FIRST_LAST parameter), or the bundled pair."""
    if not paths.strip():
        return asset_path(about(mode)["conditioning"]), asset_path(about(mode)["last_frame"])
    given = [Path(p.strip()).expanduser() for p in paths.split(",") if p.strip()]
    if len(given) != 2:
        raise InvalidSettingError(
            f"FIRST_LAST={paths!r} must name two images, the first and the last frame: a.png,b.png"
        )
    for path in given:
        if not path.is_file():
            raise InvalidSettingError(f"FIRST_LAST names {str(path)!r}, which is not a file. Give two image paths.")
    return given[0], given[1]


def check_conditioning(image: str = "", video: str = "", first_last: str = "") -> None:
    """The notebook's IMAGE, VIDEO and FIRST_LAST, opened before any model loads or server starts."""
    from helpers import media

    given = [("IMAGE", image, media.load_image), ("VIDEO", video, lambda p: media.read_frames(p, max_frames=1))]
    given += [("FIRST_LAST", str(p), media.load_image) for p in (first_and_last(first_last) if first_last else ())]
    for name, path, read in given:
        if path:
            try:
                read(Path(path).expanduser())
            except MediaError as exc:
                raise MediaError(f"{name}={path!r} cannot be used: {exc}") from exc


def chapters() -> list[dict[str, Any]]:
    """The long video's chapters (assets/prompts/long_video.json): one short structured caption per chunk, in order,
    each going on from the one before."""
    return [dict(chapter) for chapter in json.loads(json.dumps(_read("long_video")["chapters"]))]


def negative_prompt(mode: str = "t2v") -> str:
    """The bundled negative prompt for a video mode; none for an image, as NVIDIA's framework samples images."""
    return "" if mode == "t2i" else str(_read("negative")["negative_prompt"])


def is_structured(prompt: str) -> bool:
    """True when the prompt text is a JSON object (a structured caption)."""
    text = prompt.strip()
    if not text.startswith("{"):
        return False
    try:
        return isinstance(json.loads(text), dict)
    except json.JSONDecodeError:
        return False


def with_metadata(caption: dict[str, Any], width: int, height: int, num_frames: int, fps: float) -> dict[str, Any]:
    """The caption with the generation's resolution, duration and frame rate, in vLLM-Omni's keys and formats
    (`_format_json_object_prompt` in its Cosmos 3 pipeline), so both backends send the model the same text."""
    out = dict(caption)
    out["resolution"] = {"H": height, "W": width}
    if num_frames > 1:
        out["duration"] = f"{int(num_frames / fps)}s"
        out["fps"] = float(fps)
    else:
        out.pop("duration", None)
        out.pop("fps", None)
    return out


def compact(caption: dict[str, Any]) -> str:
    """One line of JSON, as the model was trained on (`json.dumps` with its default separators)."""
    return json.dumps(caption, ensure_ascii=False)


def with_settings(prompt: str, settings: AudiovisualSettings) -> str:
    """A JSON-object prompt with the resolution, duration and frame rate of `settings` written in (as vLLM-Omni
    does on its video routes); plain text as is."""
    if not is_structured(prompt):
        return prompt
    caption = with_metadata(json.loads(prompt), settings.width, settings.height, settings.num_frames, settings.fps)
    return compact(caption)


def prompt_text(settings: AudiovisualSettings, caption: dict[str, Any] | None = None) -> str:
    """A structured caption (default: the bundled one of the settings' mode) with the settings' resolution,
    duration and frame rate written in, as the one line of JSON the model reads."""
    if caption is None:
        caption = load(settings.mode)
    elif not isinstance(caption, dict):
        raise InvalidSettingError(
            "caption must be a dict (a structured JSON prompt, e.g. prompts.load('t2v')), "
            f"not {type(caption).__name__}."
        )
    caption = with_metadata(caption, settings.width, settings.height, settings.num_frames, settings.fps)
    return compact(caption)


def count_words(value: Any) -> int:
    """Words in every string value of a caption (or in a plain string)."""
    if isinstance(value, str):
        return len(re.findall(r"\S+", value))
    if isinstance(value, dict):
        return sum(count_words(v) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(count_words(v) for v in value)
    return 0


def describe(modes: list[str] | tuple[str, ...] = MODES) -> list[dict[str, Any]]:
    """One row per mode: its title, prompt title, word count and conditioning file."""
    return [
        {
            "mode": mode,
            "what": MODE_TITLES[mode],
            "prompt": about(mode).get("title", ""),
            "words": count_words(load(mode)),
            "conditioning": ", ".join(about(mode)[k] for k in ("conditioning", "last_frame") if about(mode).get(k)),
        }
        for mode in modes
    ]
