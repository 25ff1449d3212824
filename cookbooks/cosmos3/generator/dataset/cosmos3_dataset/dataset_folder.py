"""A dataset's folder: one file per job under the job's id, and what the ecosystem reads beside them.

`OUTPUT_DIR/<spec name>/` holds:
- `videos/<id>.mp4` and `videos/metadata.jsonl`: `datasets.load_dataset("videofolder", data_dir=".../videos")`;
- `images/<id>.png` and `images/metadata.jsonl`: `load_dataset("imagefolder", data_dir=".../images")`;
- `manifest.json`: the run's record of every file (`helpers.runs`): settings, seconds, peak memory, sha256;
- `failed.json`: the jobs that failed or that a guardrail blocked, with the reason;
- `README.md`, the dataset card, and `contact_sheet.png`, a frame of every file.

Every file is written under a temporary name and renamed when whole, and the manifest is rewritten the same way
after it, so a run stopped at any moment leaves whole files only. Opening the folder again resumes it: a job whose
file is there and matches its recorded sha256 is done; a recorded file that is missing or changed is made again; a
file renamed into place but not yet recorded (the run stopped between the two) is recorded, not made twice; a
temporary file left by a stopped run is deleted; a failed job is tried again; a blocked one stays blocked.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cosmos3_dataset.dataset_spec import Job, Spec
from helpers import media
from helpers.errors import StorageError
from helpers.runs import Generation, Output, Run, sha256_of

FAILED_NAME = "failed.json"
METADATA_NAME = "metadata.jsonl"
CARD_NAME = "README.md"
CONTACT_SHEET_NAME = "contact_sheet.png"
# What a guardrail's refusal says: diffusers' `ValueError`, and the failed job of a vLLM-Omni server.
GUARDRAIL_MESSAGES = ("Cosmos Guardrail detected", "blocked by Cosmos3 guardrails")
# A full disk, a quota, a file size limit, a read-only or forbidden folder: no job can be written until it is fixed.
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM})


def is_guardrail_block(message: str) -> bool:
    return any(words in message for words in GUARDRAIL_MESSAGES)


@dataclass
class JobPlan:
    """What a run of the dataset has to do: the jobs already done, those to make, and those a guardrail blocked."""

    done: list[Job] = field(default_factory=list)
    todo: list[Job] = field(default_factory=list)
    blocked: list[Job] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what resuming found and did

    def describe(self) -> str:
        parts = [f"{len(self.done)} done", f"{len(self.todo)} to make"]
        if self.blocked:
            parts.append(f"{len(self.blocked)} blocked by the guardrails")
        return ", ".join(parts) + "".join(f"\n  {note}" for note in self.notes)


def _write_atomically(path: Path, text: str) -> None:
    with media.atomic_target(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


class DatasetFolder:
    """The folder of one spec's dataset, for one model: `open` it, `plan` the jobs, record each with `generation`
    (or `fail`), then `finish` it (the card and the contact sheet)."""

    def __init__(self, spec: Spec, run: Run):
        self.spec = spec
        self.run = run
        self.path = run.path
        path = self.path / FAILED_NAME
        self.failed: dict[str, dict[str, Any]] = json.loads(path.read_text()) if path.is_file() else {}

    @classmethod
    def open(cls, output_dir: str | os.PathLike[str], spec: Spec, *, backend: str, model: str) -> DatasetFolder:
        """`OUTPUT_DIR/<spec name>`, created, or resumed as it was left."""
        run = Run.resume(Path(output_dir).expanduser() / spec.name, backend=backend, model=model)
        run.note(spec=str(spec.path), preset=spec.preset)
        return cls(spec, run)

    @staticmethod
    def relative(job: Job) -> str:
        return f"{'images' if job.settings.is_image else 'videos'}/{job.id}{job.suffix}"

    def _recorded(self) -> dict[str, Output]:
        return {o.path: o for o in self.run.outputs}

    def plan(self) -> JobPlan:
        """Sort the spec's jobs by what the folder holds, deleting what a stopped run left half-written."""
        plan = JobPlan()
        for folder in (self.path / "videos", self.path / "images"):
            for partial in folder.glob(".*") if folder.is_dir() else ():
                partial.unlink()
                plan.notes.append(f"deleted {partial.name}, a file a stopped run left half-written")
        recorded = self._recorded()
        for job in self.spec.jobs:
            relative = self.relative(job)
            file, output = self.path / relative, recorded.get(relative)
            if output is not None and file.is_file() and sha256_of(file) == output.sha256:
                plan.done.append(job)
                continue
            if output is not None:
                self.run.forget(output)
                plan.notes.append(f"{relative} is {'changed' if file.is_file() else 'missing'}: making it again")
                file.unlink(missing_ok=True)
            elif file.is_file():  # renamed into place whole, then the run stopped before recording it
                self.run.add(relative.removesuffix(job.suffix), file, job.settings, None, job=job.describe())
                plan.notes.append(f"{relative} was written but not recorded: recorded, not made again")
                plan.done.append(job)
                continue
            if self.failed.get(job.id, {}).get("status") == "blocked":
                plan.blocked.append(job)
            else:
                plan.todo.append(job)
        self._write_metadata()
        return plan

    @contextlib.contextmanager
    def generation(self, job: Job) -> Iterator[Generation]:
        """`Run.generation` for one job, into its file, with the job in its record; a full or unwritable folder stops
        the dataset with `StorageError` (what was finished stays listed)."""
        try:
            with self.run.generation(job.settings, name=self.relative(job).removesuffix(job.suffix)) as gen:
                gen.extra.update(job=job.describe(), backend=self.run.backend)
                yield gen
            if self.failed.pop(job.id, None) is not None:
                _write_atomically(self.path / FAILED_NAME, json.dumps(self.failed, indent=2))
            self._write_metadata()
        except OSError as exc:
            if exc.errno in STORAGE_ERRNOS:
                raise _storage_error(exc, len(self.run.outputs)) from exc
            raise

    def fail(self, job: Job, message: str) -> str:
        """Record a job that did not make its file, with the reason: "blocked" when a guardrail refused it (a second
        run leaves it), else "failed" (a second run tries it again). Returns that status."""
        status = "blocked" if is_guardrail_block(message) else "failed"
        attempts = self.failed.get(job.id, {}).get("attempts", 0) + 1
        self.failed[job.id] = {**job.describe(), "status": status, "message": message, "attempts": attempts}
        try:
            _write_atomically(self.path / FAILED_NAME, json.dumps(self.failed, indent=2))
        except OSError as exc:
            raise _storage_error(exc, len(self.run.outputs)) from exc
        return status

    def metadata_rows(self, kind: str) -> list[dict[str, Any]]:
        """The rows of `<kind>/metadata.jsonl` ("videos" or "images"): one per file, the job and its settings."""
        rows = []
        for o in sorted(self.run.outputs, key=lambda o: o.path):
            if not o.path.startswith(f"{kind}/"):
                continue
            job = o.extra.get("job", {})
            rows.append(
                {
                    "file_name": o.path.removeprefix(f"{kind}/"),
                    **job,
                    "settings": o.settings,
                    "seconds": o.seconds,
                    "sha256": o.sha256,
                    "backend": o.extra.get("backend", self.run.backend),
                }
            )
        axes = sorted({axis for row in rows for axis in row.get("variation", {})})
        for row in rows:  # one schema for every row, as `datasets` reads a column
            row["variation"] = {axis: row.get("variation", {}).get(axis) for axis in axes}
        return rows

    def _write_metadata(self) -> None:
        for kind in ("videos", "images"):
            rows = self.metadata_rows(kind)
            if rows or (self.path / kind / METADATA_NAME).exists():
                text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
                _write_atomically(self.path / kind / METADATA_NAME, text)

    def finish(self) -> dict[str, int]:
        """Write the dataset card and the contact sheet; return the counts."""
        ids = {job.id for job in self.spec.jobs}
        made = [o for o in self.run.outputs if o.extra.get("job", {}).get("id") in ids]
        counts = {
            "jobs": len(self.spec.jobs),
            "made": len(made),
            "failed": sum(1 for k, v in self.failed.items() if k in ids and v["status"] == "failed"),
            "blocked": sum(1 for k, v in self.failed.items() if k in ids and v["status"] == "blocked"),
            "files": len(self.run.outputs),
        }
        try:
            _write_atomically(self.path / CARD_NAME, self.card(counts))
            if self.run.outputs:
                self.contact_sheet()
        except OSError as exc:
            raise _storage_error(exc, len(self.run.outputs)) from exc
        return counts

    def card(self, counts: dict[str, int]) -> str:
        settings = {}
        for o in self.run.outputs:
            settings.setdefault(o.settings.get("mode", ""), o.settings)
        backends = sorted({o.extra.get("backend", self.run.backend) for o in self.run.outputs})
        lines = [
            f"# {self.spec.name}",
            "",
            f"Generated by Cosmos 3 (`{self.run.model}`) through {', '.join(backends) or self.run.backend}, from the "
            f"spec `{self.spec.path.name}` at the `{self.spec.preset}` preset.",
            "",
            f"- jobs in the spec: {counts['jobs']}; made: {counts['made']}; failed: {counts['failed']}; blocked by "
            f"the guardrails: {counts['blocked']} (`{FAILED_NAME}` says why)",
            f"- files in this folder: {counts['files']} (`{CONTACT_SHEET_NAME}` shows a frame of each)",
            "",
            "## Variations",
            "",
            *(f"- `{axis}`: {', '.join(f'`{label}`' for label in values)}" for axis, values in self.spec.axes.items()),
            "",
            "## Settings",
            "",
            "| mode | size | frames | fps | steps | guidance | flow shift |",
            "|---|---|---|---|---|---|---|",
            *(
                f"| {mode} | {s['width']}x{s['height']} | {s['num_frames']} | {s['fps']} | "
                f"{s['num_inference_steps']} | {s['guidance_scale']} | {s['flow_shift']} |"
                for mode, s in sorted(settings.items())
            ),
            "",
            "## Loading",
            "",
            "```python",
            "from datasets import load_dataset",
            "",
            'videos = load_dataset("videofolder", data_dir="videos", split="train")',
            'images = load_dataset("imagefolder", data_dir="images", split="train")',
            "```",
            "",
            "Each row has the job's `id`, `scene`, `variation`, `mode`, `seed`, the `prompt` sent, the `settings`, the",
            "`seconds` it took and the file's `sha256`. Decoding a video needs `torchcodec`; "
            '`videos.cast_column("video", Video(decode=False))` gives the paths instead.',
            "",
        ]
        return "\n".join(lines)

    def contact_sheet(self, columns: int = 8, width: int = 160) -> Path:
        """One frame of every file (a video's middle frame), in a grid, as a PNG."""
        from PIL import Image

        tiles = []
        for o in sorted(self.run.outputs, key=lambda o: (o.extra.get("job", {}).get("scene", ""), o.path)):
            frames = media.read_frames(self.path / o.path)
            tile = Image.fromarray(frames[len(frames) // 2])
            tiles.append(tile.resize((width, max(1, round(width * tile.height / tile.width)))))
        height = max(tile.height for tile in tiles)
        rows = -(-len(tiles) // columns)
        sheet = Image.new("RGB", (min(columns, len(tiles)) * width, rows * height))
        for k, tile in enumerate(tiles):
            sheet.paste(tile, ((k % columns) * width, (k // columns) * height))
        return media.write_image(self.path / CONTACT_SHEET_NAME, sheet)


def _storage_error(exc: OSError, finished: int) -> StorageError:
    where = exc.filename or "the output folder"
    return StorageError(
        f"Writing {where} failed: {exc.strerror or exc}. The dataset stops here; the {finished} files finished "
        "before are whole and listed in its manifest.json and metadata.jsonl. Free some space (or point OUTPUT_DIR at "
        "a folder with room you can write to) and run the notebook again: it goes on where it stopped."
    )
