"""The audiovisual notebooks' modes: the ones `MODES` names and their settings at once (`COMPARE`'s presets, a 4-step
checkpoint's modes), and each mode's bundled prompt and conditioning (`IMAGE`, `VIDEO`, `FIRST_LAST` and the files
they default to, the long video's chapters). The settings themselves, which the dataset family makes too, are
`helpers.audiovisual_settings`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers import media, models, prompts
from helpers.assets import asset_path
from helpers.audiovisual_settings import MODE_TITLES, MODES, PRESETS, AudiovisualSettings, settings_for
from helpers.errors import InvalidSettingError, MediaError, allowed
from helpers.settings import get_preset


def parse_modes(modes: str | list[str] | tuple[str, ...]) -> list[str]:
    """Turn `"t2v, i2v"` (or a list) into a validated list of modes, in the order given, without repeats."""
    items = modes.split(",") if isinstance(modes, str) else list(modes)
    chosen: list[str] = []
    for raw in items:
        mode = raw.strip()
        if not mode:
            continue
        if mode == "all":
            chosen.extend(m for m in MODES if m not in chosen)
            continue
        if mode not in MODES:
            raise InvalidSettingError(
                f"Unknown mode {mode!r} in MODES. Allowed modes: {allowed(MODES)} (or 'all').", "MODES"
            )
        if mode not in chosen:
            chosen.append(mode)
    if not chosen:
        raise InvalidSettingError(
            f"No mode selected. Set MODES to a comma-separated list of: {allowed(MODES)}.", "MODES"
        )
    return chosen


def parse_presets(names: str) -> list[str]:
    """Turn `"draft, published"` into a validated list of preset names (empty text: an empty list)."""
    return [get_preset(PRESETS, n.strip()).name for n in names.split(",") if n.strip()]


def makes(model: str, mode: str) -> bool:
    """Whether `model` makes `mode`: a published checkpoint makes its own modes; anything else makes every one."""
    v = models.variant(model)
    return v is None or v.modes is None or mode in v.modes


def settings_for_modes(
    modes: str | list[str], preset: str = "published", *, seed: int = 0, model: str = "", **overrides: Any
) -> dict[str, AudiovisualSettings]:
    """`{mode: settings}` for comma-separated modes, in order, with the same overrides; an empty aspect ratio or a
    TIER of 0 (a notebook parameter left as it is) means the preset's own size."""
    given = {k: v for k, v in overrides.items() if v not in ("", 0, None)}
    return {mode: settings_for(mode, preset, seed=seed, model=model, **given) for mode in parse_modes(modes)}


def distilled_settings(
    model: str, preset: str = "published", *, seed: int = 0, **overrides: Any
) -> dict[str, AudiovisualSettings]:
    """`{mode: settings}` for a 4-step checkpoint (`DISTILLED_MODEL`): each mode it makes, at the preset's size, with
    its own 4 steps and no guidance. Empty for an empty `model`; a local folder is taken to make both."""
    if not model:
        return {}
    found = models.variant(model)
    modes = found.modes if found is not None and found.modes is not None else ("t2i", "i2v")
    if found is None or found.fixed_steps is None:
        overrides = {**overrides, "num_inference_steps": 4, "guidance_scale": 1.0}
    return settings_for_modes(",".join(modes), preset, seed=seed, model=model, **overrides)


def conditioning(mode: str) -> Path:
    """The bundled image or video that the prompt of an i2v / v2v mode continues."""
    name = prompts.about(mode).get("conditioning")
    if not name:
        raise InvalidSettingError(f"Mode {mode!r} takes no conditioning image or video.")
    return asset_path(name)


def first_and_last(paths: str = "", mode: str = "fl2v") -> tuple[Path, Path]:
    """fl2v's first and last frame: `paths` as "first.png,last.png" (the FIRST_LAST parameter), or the bundled pair."""
    if not paths.strip():
        return asset_path(prompts.about(mode)["conditioning"]), asset_path(prompts.about(mode)["last_frame"])
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
    return [dict(chapter) for chapter in json.loads(json.dumps(prompts.bundled("long_video")["chapters"]))]


def describe(modes: list[str] | tuple[str, ...] = MODES) -> list[dict[str, Any]]:
    """One row per mode: its title, prompt title, word count and conditioning file."""
    return [
        {
            "mode": mode,
            "what": MODE_TITLES[mode],
            "prompt": prompts.about(mode).get("title", ""),
            "words": prompts.count_words(prompts.load(mode)),
            "conditioning": ", ".join(
                prompts.about(mode)[k] for k in ("conditioning", "last_frame") if prompts.about(mode).get(k)
            ),
        }
        for mode in modes
    ]
