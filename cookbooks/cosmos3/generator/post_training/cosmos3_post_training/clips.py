"""A folder of training clips in the 🤗 `datasets` videofolder layout: the videos beside a `metadata.jsonl` whose rows
name each one (`file_name`) and give its caption. The dataset cookbook writes that layout (its `videos/` folder), and
so does NVIDIA's fine-tuning data, whose captions are structured JSON (`caption_json`), the prompt format Cosmos 3
was trained on. Every fault is reported before any model loads, naming `DATA` and what is missing.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers import media
from helpers.errors import MediaError

METADATA = "metadata.jsonl"
# Where a row's caption is found, in order: NVIDIA's structured caption, the dataset cookbook's prompt, the plain
# columns other video datasets use.
CAPTION_COLUMNS: tuple[str, ...] = ("caption_json", "prompt", "caption", "text")
BUNDLED = Path(__file__).resolve().parent.parent / "assets" / "clips"


@dataclass(frozen=True)
class Clip:
    """One training clip: its frames (PIL images at the training canvas), its caption as sent to the model, and its
    frame rate, which Cosmos 3 reads as a condition."""

    name: str
    frames: list[Any]
    caption: str
    fps: int
    title: str


def folder_of(data: str) -> Path:
    """`DATA` as a folder: "bundled" is the cookbook's four clips."""
    return BUNDLED if data == "bundled" else Path(os.path.expanduser(data))


def caption_text(row: dict[str, Any], where: str) -> str:
    """The caption a row gives, as the prompt string the pipeline takes: a structured caption as its JSON."""
    column = next((c for c in CAPTION_COLUMNS if row.get(c)), None)
    if column is None:
        raise MediaError(
            f"DATA: {where} has no caption. Give each row one of the columns {', '.join(CAPTION_COLUMNS)} "
            "(a structured caption as a JSON object in caption_json works best: the format Cosmos 3 was trained on)."
        )
    caption = row[column]
    return json.dumps(caption) if isinstance(caption, dict) else str(caption)


def load(data: str, width: int, height: int, num_frames: int) -> list[Clip]:
    """The clips of `data`, each fitted to `width` x `height` (scaled to cover, centre-cropped) and cut to its first
    `num_frames` frames; refused, naming `DATA`, where a folder, a row, a caption, a file or frames are missing."""
    folder = folder_of(data)
    if not folder.is_dir():
        raise MediaError(f"DATA={data!r} is not a folder. Give a folder of clips with a {METADATA}, or 'bundled'.")
    metadata = folder / METADATA
    if not metadata.is_file():
        videos = sorted(p.name for p in folder.glob("*.mp4"))[:3]
        raise MediaError(
            f"DATA={data!r} has no {METADATA}: write one row per clip, such as "
            f'{{"file_name": "{videos[0] if videos else "clip.mp4"}", "caption_json": {{...}}}} (the datasets '
            "videofolder layout; the dataset cookbook writes it in its videos/ folder)."
        )
    clips = []
    for number, line in enumerate(metadata.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{METADATA} line {number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise MediaError(f"DATA: {where} is not JSON ({err.msg}); each line holds one object.") from err
        if not isinstance(row, dict) or not row.get("file_name"):
            raise MediaError(f"DATA: {where} names no file: each row needs a file_name, the video beside the metadata.")
        path = folder / row["file_name"]
        if not path.is_file():
            raise MediaError(f"DATA: {where} names {row['file_name']!r}, which is not in {folder}.")
        caption = caption_text(row, where)
        info = media.probe(path)
        if info.num_frames < num_frames:
            raise MediaError(
                f"DATA: {row['file_name']} has {info.num_frames} frames and this PRESET trains on {num_frames}: "
                "give longer clips, or a smaller PRESET."
            )
        frames = [media.fit_frame(f, width, height) for f in media.load_video(path, max_frames=num_frames)]
        fps = int(row.get("fps") or round(info.fps))
        title = json.loads(caption).get("temporal_caption", "")[:80] if caption.startswith("{") else caption[:80]
        clips.append(Clip(path.stem, frames, caption, fps, title))
    if not clips:
        raise MediaError(f"DATA={data!r}: {METADATA} lists no clips.")
    return clips
