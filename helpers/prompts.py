"""Structured JSON prompts: load the bundled ones, add the generation metadata, serialise, count words.

Cosmos 3 was trained on long structured JSON captions, and NVIDIA passes `json.dumps(caption)` as the prompt.
Each bundled prompt (assets/prompts/<mode>.json) is such an object plus a `_cookbook` block that says which
conditioning asset it belongs with; that block is ours and never sent to the model.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

from helpers.assets import asset_path
from helpers.audiovisual_settings import MODES, AudiovisualSettings
from helpers.errors import InvalidSettingError

COOKBOOK_KEY = "_cookbook"


@cache
def bundled(name: str) -> dict[str, Any]:
    """A bundled prompt file (assets/prompts/<name>.json) as it is; treat it as read-only."""
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
    return {k: v for k, v in json.loads(json.dumps(bundled(mode))).items() if k != COOKBOOK_KEY}


def about(mode: str) -> dict[str, Any]:
    """The `_cookbook` block of a mode's bundled prompt: its title and the conditioning files it goes with."""
    _check_mode(mode)
    return dict(bundled(mode).get(COOKBOOK_KEY, {}))


def negative_prompt(mode: str = "t2v") -> str:
    """The bundled negative prompt for a video mode; none for an image, as NVIDIA's framework samples images."""
    return "" if mode == "t2i" else str(bundled("negative")["negative_prompt"])


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
