"""Checks of the values a client sends inside fields: JSON text, `extra_params` entries, `lora` objects.

Each failure is a 400 that names the field and says what is wrong with it (docs/vllm-omni-contract.md §9), where
Python would otherwise raise deep inside the pipeline: RecursionError for JSON nested thousands of levels deep,
ValueError for a number with thousands of digits, TypeError or a silent NaN for a value of the wrong kind.
"""

from __future__ import annotations

import json
import math
from typing import Any

from fastapi import HTTPException

from omni_standin.limits import MAX_JSON_DEPTH

# vLLM-Omni 0.30's `parse_lora_request` reads the adapter's name and path under any of these keys.
LORA_NAME_KEYS = ("name", "lora_name", "adapter")
LORA_PATH_KEYS = ("local_path", "path", "lora_path", "lora_local_path")


def _too_deep(value: Any) -> bool:
    """Whether `value` nests lists and objects more than MAX_JSON_DEPTH levels deep (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth >= MAX_JSON_DEPTH:
                    return True
                stack.append((child, depth + 1))
    return False


def _loads(text: str) -> Any:
    """`json.loads`, with RecursionError also for a value that nests more than MAX_JSON_DEPTH levels."""
    value = json.loads(text)
    if _too_deep(value):
        raise RecursionError
    return value


def parse_json(raw: str, field: str) -> Any:
    """`raw` parsed, or a 400 that keeps vLLM-Omni's `Invalid JSON in form field.` and says where and why."""
    try:
        return _loads(raw)
    except RecursionError:
        reason = f"nested more than {MAX_JSON_DEPTH} levels deep"
    except ValueError as exc:  # a syntax error, or a number with more digits than Python converts
        reason = str(exc)
    raise HTTPException(400, f"Invalid JSON in form field. {field}: {reason}.")


def json_object(raw: str | None, field: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    value = parse_json(raw, field)
    if not isinstance(value, dict):
        got = type(value).__name__
        raise HTTPException(
            400, f"Invalid JSON in form field: expected dict, got {got}. {field} must be a JSON object."
        )
    return value


def check_prompt(prompt: str) -> None:
    """A prompt that starts like a JSON object is read as a structured caption, so it must be one Python can read."""
    if not prompt.lstrip().startswith("{"):
        return
    try:
        _loads(prompt)
    except json.JSONDecodeError:
        return  # plain text that happens to start with a brace
    except RecursionError:
        raise HTTPException(400, f"Invalid JSON in prompt: it nests more than {MAX_JSON_DEPTH} levels deep.") from None
    except ValueError as exc:
        raise HTTPException(400, f"Invalid JSON in prompt: {exc}.") from None


def check_lora(lora: dict[str, Any] | None) -> None:
    """vLLM-Omni 0.30's checks of a `lora` object (400 on failure); the stand-in loads no adapter (§9)."""
    if lora is None:
        return
    name = next((lora[k] for k in LORA_NAME_KEYS if lora.get(k)), None)
    path = next((lora[k] for k in LORA_PATH_KEYS if lora.get(k)), None)
    if not name or not path:
        raise HTTPException(400, "Invalid lora object: both name and path are required.")
    for key, kind, noun in (("scale", float, "a finite number"), ("int_id", int, "an integer")):
        if key not in lora:
            continue
        try:
            ok = not isinstance(lora[key], bool) and math.isfinite(kind(lora[key]))
        except (TypeError, ValueError, OverflowError):
            ok = False
        if not ok:
            raise HTTPException(400, f"Invalid lora object: {key} must be {noun}, got {_shown(lora[key])}.")


def _as_float(value: Any) -> float:
    """A JSON number as a float: NaN for anything else, infinite for an integer too large for a float."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    try:
        return float(value)
    except OverflowError:
        return math.inf


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def extra_bool(extra: dict[str, Any], keys: tuple[str, ...], default: bool) -> bool:
    """The first of `keys` present in `extra_params`, which must be a JSON boolean."""
    for key in keys:
        if key in extra:
            if not isinstance(extra[key], bool):
                got = _shown(extra[key])
                raise HTTPException(400, f"Invalid extra_params.{key}: expected true or false, got {got}.")
            return extra[key]
    return default


def extra_number(
    extra: dict[str, Any], keys: tuple[str, ...], default: float | None, positive: bool = False
) -> float | None:
    """The first of `keys` present in `extra_params`, which must be a finite (and, if asked, positive) number."""
    for key in keys:
        if key in extra:
            value = extra[key]
            number = _as_float(value)
            if not math.isfinite(number):
                raise HTTPException(400, f"Invalid extra_params.{key}: expected a finite number, got {_shown(value)}.")
            if positive and number <= 0:
                raise HTTPException(400, f"Invalid extra_params.{key}: must be greater than 0, got {value}.")
            return number
    return default
