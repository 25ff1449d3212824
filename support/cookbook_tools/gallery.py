"""A static HTML gallery of one or more runs: players, prompts, settings and timings, openable from disk."""

from __future__ import annotations

import html
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from helpers import prompts
from helpers.audiovisual_settings import MODE_TITLES
from helpers.errors import MediaError
from helpers.runs import MANIFEST_NAME

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem; background: #fafafa; color: #222; }
h1 { margin-bottom: 0.2rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #ccc; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(340px, 1fr)); gap: 1.2rem; }
.card { background: white; border: 1px solid #ddd; border-radius: 8px; padding: 0.8rem; }
.card video, .card img { width: 100%; background: #000; border-radius: 4px; }
.card audio { width: 100%; margin-top: 0.4rem; }
.meta { font-size: 0.85rem; color: #555; margin: 0.4rem 0; }
details { font-size: 0.8rem; } pre { white-space: pre-wrap; word-break: break-word; max-height: 16rem; overflow: auto; }
"""


def _prompt(item: dict[str, Any]) -> str:
    """What the file was made from: the prompt the run recorded with it (the quickstart's), else the title of the
    mode's bundled structured prompt, else nothing."""
    if item.get("prompt"):
        return str(item["prompt"])
    try:
        return str(prompts.about(item["mode"]).get("title", ""))
    except Exception:  # noqa: BLE001 - a gallery of foreign runs must not fail on a missing prompt asset
        return ""


def _card(run_dir: Path, page_dir: Path, item: dict[str, Any], audio_of: dict[str, str]) -> str:
    src = html.escape(os.path.relpath(run_dir / item["path"], page_dir))
    mode = item["mode"]
    if item["kind"] == "image":
        player = f'<img src="{src}" alt="{html.escape(mode)}">'
    else:
        player = f'<video src="{src}" controls loop preload="metadata"></video>'
        if mode in audio_of:
            wav = html.escape(os.path.relpath(run_dir / audio_of[mode], page_dir))
            player += f'<audio src="{wav}" controls preload="metadata"></audio>'
    s = item.get("settings", {})
    frames = f", {item['num_frames']} frames @ {item['fps']:g} fps" if item["kind"] == "video" else ""
    sound = ", AAC sound" if item.get("has_audio") and item["kind"] == "video" else ""
    settings = json.dumps(s, indent=1)
    # A file written by hand (the quickstart's) has no preset, seed or timing.
    facts = [f"{item['width']}x{item['height']}{frames}{sound}"]
    facts += [f"seed {item['seed']}"] if item.get("seed") is not None else []
    facts += [f"preset {html.escape(str(s['preset']))}"] if s.get("preset") else []
    facts += [f"{item['seconds']:.2f} s"] if item.get("seconds") is not None else []
    prompt = _prompt(item)
    return (
        f'<div class="card" data-mode="{html.escape(mode)}"><h3>{html.escape(MODE_TITLES.get(mode, mode))}</h3>'
        f"{player}"
        f'<p class="meta">{"; ".join(facts)}</p>'
        + (f'<p class="meta">Prompt: {html.escape(prompt)}</p>' if prompt else "")
        + f"<details><summary>settings</summary><pre>{html.escape(settings)}</pre></details></div>"
    )


def write_gallery(run_dirs: Iterable[str | os.PathLike[str]], page: str | os.PathLike[str]) -> Path:
    """Write an HTML page showing every output of the given run folders (media linked, not copied)."""
    target = Path(page).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    sections = []
    for run in run_dirs:
        run_dir = Path(run).resolve()
        manifest_path = run_dir / MANIFEST_NAME
        if not manifest_path.is_file():
            raise MediaError(f"{run_dir} is not a run folder: it has no {MANIFEST_NAME}.")
        manifest = json.loads(manifest_path.read_text())
        items = manifest["outputs"]
        audio_of = {o["mode"]: o["path"] for o in items if o["kind"] == "audio"}
        # Sound plays inside its video's card; action arrays are numbers, shown by their plots.
        cards = "".join(_card(run_dir, target.parent, o, audio_of) for o in items if o["kind"] in ("image", "video"))
        title = f"{manifest['backend']} · {manifest['model']} · {run_dir.name}"
        sections.append(f'<h2>{html.escape(title)}</h2><div class="grid">{cards}</div>')
    body = "".join(sections) or "<p>No runs.</p>"
    target.write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>Cosmos 3 cookbook gallery</title>"
        f"<style>{_STYLE}</style></head><body><h1>Cosmos 3 cookbook gallery</h1>{body}</body></html>\n",
        encoding="utf-8",
    )
    return target
