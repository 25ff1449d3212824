"""Run folders and their manifest: every notebook run writes into a new folder and lists what it made.

Layout: `<output_dir>/<backend>-<YYYYmmdd-HHMMSS>-<n>/` holding the media files and `manifest.json`. A folder is
created with an exclusive `mkdir`, so runs never overwrite each other, and the manifest is rewritten atomically
after each output, so it always lists exactly the files that were completely written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from helpers import environment, media
from helpers.errors import MediaError, OutOfMemoryAdviceError, SoundNotSupportedError
from helpers.settings import PRESET_MEANINGS, Settings

MANIFEST_NAME = "manifest.json"


def _writable_folder(given: str | os.PathLike[str], parameter: str) -> Path:
    """`given` as an absolute folder, created when missing, after a file was written into it: an unwritable
    `parameter` fails here, before anything is loaded or generated."""
    folder = Path(given).expanduser().resolve()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-").close()  # noqa: SIM115 - a probe
    except OSError as exc:
        raise MediaError(
            f"{parameter}={str(given)!r} cannot be written to ({exc.strerror or exc}). Point {parameter} at a folder "
            "you can write to (it is created when missing)."
        ) from exc
    return folder


def oom_advice(settings: Settings, exc: BaseException) -> OutOfMemoryAdviceError:
    names = list(PRESET_MEANINGS)
    smaller = names[names.index(settings.preset) - 1] if names.index(settings.preset) else None
    hint = f"PRESET={smaller!r}" if smaller else "a smaller size or fewer frames"
    return OutOfMemoryAdviceError(
        f"Out of accelerator memory generating {settings.mode}, {settings.num_frames} frames (PRESET="
        f"{settings.preset!r}). Try {hint} or SPEED='low_vram', or free memory held by other notebooks. Original "
        f"error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    )


def _is_oom(exc: BaseException) -> bool:
    import torch

    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


@dataclass
class Output:
    """One file the run produced, as listed in the manifest."""

    mode: str
    path: str  # relative to the run folder
    kind: str
    width: int
    height: int
    num_frames: int
    fps: float
    has_audio: bool
    seed: int | None
    model: str
    settings: dict[str, Any]
    seconds: float | None
    audio: dict[str, Any] | None = None
    sha256: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data.update(data.pop("extra"))
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Output:
        """An output as a manifest lists it (`to_dict`)."""
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        return cls(
            **{k: v for k, v in data.items() if k in known}, extra={k: v for k, v in data.items() if k not in known}
        )


@dataclass
class Run:
    """A fresh output folder and the manifest of what was written into it. `sample_rate`: the checkpoint's audio
    rate (the WAVs of sound modes are written at it)."""

    path: Path
    backend: str
    model: str
    info: dict[str, Any] = field(default_factory=dict)
    sample_rate: int | None = None
    outputs: list[Output] = field(default_factory=list)
    started: str = field(default_factory=lambda: datetime.now().isoformat(timespec="seconds"))

    def __post_init__(self) -> None:
        self._write_manifest()

    @classmethod
    def create(cls, output_dir: str | os.PathLike[str], *, backend: str, model: str, **fields: Any) -> Run:
        """A new, empty run folder under `output_dir` (`fields`: `info`, `sample_rate`)."""
        root = _writable_folder(output_dir, "OUTPUT_DIR")
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        for n in range(1, 10_000):
            path = root / f"{backend}-{stamp}-{n}"
            with contextlib.suppress(FileExistsError):
                path.mkdir()
                return cls(path, backend, model, **fields)
        raise MediaError(f"Could not create a new run folder under {root}.")

    @classmethod
    def resume(cls, path: str | os.PathLike[str], *, backend: str, model: str, parameter: str = "OUTPUT_DIR") -> Run:
        """The run folder at `path`, created when missing, else with the outputs its manifest lists: a run that a
        second "Run All" goes on with. A folder made with another model is refused, naming `parameter`."""
        folder = _writable_folder(path, parameter)
        manifest = folder / MANIFEST_NAME
        if not manifest.is_file():
            return cls(folder, backend, model)
        listed = json.loads(manifest.read_text())
        if listed["model"] != model:
            raise MediaError(
                f"{folder} holds generations of MODEL={listed['model']!r}, not {model!r}: one folder, one model. "
                f"Set {parameter} to another folder, or MODEL back to {listed['model']!r} to go on with it."
            )
        outputs = [Output.from_dict(o) for o in listed["outputs"]]
        return cls(folder, backend, model, info=listed["info"], outputs=outputs, started=listed["started"])

    def forget(self, output: Output) -> None:
        """Drop an output from the manifest (its file is missing or not what was recorded), so it can be made again."""
        self.outputs.remove(output)
        self._write_manifest()

    def note(self, **info: Any) -> None:
        """Add facts about the run (the model, the server, SPEED) to the manifest's `info`."""
        self.info.update(info)
        self._write_manifest()

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST_NAME

    def manifest(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "model": self.model,
            "started": self.started,
            "info": self.info,
            "outputs": [o.to_dict() for o in self.outputs],
        }

    def _write_manifest(self) -> None:
        fd, tmp = tempfile.mkstemp(prefix=".manifest-", suffix=".json", dir=self.path)
        with os.fdopen(fd, "w") as out:
            json.dump(self.manifest(), out, indent=2)
        os.replace(tmp, self.manifest_path)

    def add(
        self,
        mode: str,
        file: str | os.PathLike[str],
        settings: Settings | None = None,
        seconds: float | None = None,
        **extra: Any,
    ) -> Output:
        """Record a file written into this run's folder under `mode`: the one way a file enters the manifest.

        The file is read back, so the manifest says what it really holds, not what was asked: a picture, a video
        (with its AAC track) or a WAV is probed; an array file (`.npy` or `.json` of a pair, `media.write_array`: the
        action family's actions) gives its rows. A file made outside the presets has no settings and no timing.
        """
        path = Path(file).resolve()
        if not path.is_relative_to(self.path.resolve()):
            raise MediaError(f"{path} is outside this run's folder {self.path}: write it there (run.path / name).")
        relative = path.relative_to(self.path.resolve())
        common = {
            "mode": mode,
            "path": str(relative),
            "seed": settings.seed if settings else None,
            "model": self.model,
            "settings": settings.to_dict() if settings else {},
            "seconds": round(seconds, 3) if seconds is not None else None,
            "sha256": sha256_of(path),
            "extra": extra,
        }
        if path.suffix in (".npy", ".json"):
            array, about = media.read_array(path)
            output = Output(
                kind="actions",
                width=0,
                height=0,
                num_frames=len(array),
                fps=about.get("fps", 0),
                has_audio=False,
                **common,
            )
        else:
            info = media.probe(path)
            output = Output(
                kind=info.kind,
                width=info.width,
                height=info.height,
                num_frames=info.num_frames,
                fps=info.fps,
                has_audio=info.has_audio,
                audio=info.audio.__dict__ if info.audio else None,
                **common,
            )
        self.outputs.append(output)
        self._write_manifest()
        return output

    def file_for(self, mode: str, suffix: str) -> Path:
        return self.path / f"{mode}{suffix}"

    def free_stem(self, mode: str) -> str:
        """`mode` as a file name, or `mode-2`, `mode-3`, ... once this run holds files of that name: a second
        generation of a mode (the form's Generate pressed again) never replaces the first one's files."""
        taken = {str(Path(o.path).with_suffix("")) for o in self.outputs}
        stem, n = mode, 1
        while stem in taken:
            n += 1
            stem = f"{mode}-{n}"
        return stem

    @contextlib.contextmanager
    def generation(self, settings: Settings, name: str | None = None) -> Iterator[Generation]:
        """Time one generation of any family's settings, turn an out-of-memory error into advice, and record what it
        saves (the file, its settings, the seconds and the peak accelerator memory), in files named after `name`
        (default: the settings' mode, as `t2v.mp4`). Every notebook records its generations this one way."""
        environment.peak_memory_gib(reset=True)
        mode = name or settings.mode
        gen = Generation(self, mode, settings)
        try:
            yield gen
        except Exception as exc:
            if _is_oom(exc):
                raise oom_advice(settings, exc) from exc
            raise
        if not gen.outputs:
            raise MediaError(
                f"The {mode} generation finished without saving anything: call gen.save(output) or gen.save_bytes(...)."
            )

    def summary(self) -> list[dict[str, Any]]:
        """One row per file, read back from the files (as the manifest lists them)."""
        return summary_of(self.path)


def sha256_of(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def summary_of(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The summary rows of any run folder, this process's or another's (a parallel run, a server's)."""
    outputs = json.loads((Path(run_dir) / MANIFEST_NAME).read_text())["outputs"]
    return [
        {
            "mode": o["mode"],
            "file": o["path"],
            "size": f"{o['width']}x{o['height']}" if o["width"] else "",
            "frames": o["num_frames"] or "",
            "fps": o["fps"] or "",
            "sound": "AAC" if o["has_audio"] and o["kind"] == "video" else ("PCM" if o["kind"] == "audio" else ""),
            "seconds": o["seconds"],
        }
        for o in outputs
    ]


class Generation:
    """Handle given by `Run.generation`: saves the pipeline output and records it."""

    def __init__(self, run: Run, mode: str, settings: Settings):
        self.run = run
        self.mode = mode
        self.stem = run.free_stem(mode)  # the files' name
        self.settings = settings
        self.started = time.perf_counter()
        self.outputs: list[Output] = []
        self.extra: dict[str, Any] = {}

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.started

    @property
    def file(self) -> Path:
        """The first file this generation saved (the video or the picture)."""
        if not self.outputs:
            raise MediaError(f"The {self.mode} generation has saved nothing yet: call gen.save(output) first.")
        return self.run.path / self.outputs[0].path

    def _record(self, file: Path, seconds: float, extra: dict[str, Any]) -> None:
        extra = {**self.extra, "peak_memory_gib": round(environment.peak_memory_gib(), 3), **extra}
        self.outputs.append(self.run.add(self.mode, file, self.settings, seconds, **extra))

    def _save_wav(self, sound: Any, rate: int, seconds: float, extra: dict[str, Any]) -> None:
        """The sound as a WAV of exactly the video's length, beside the MP4."""
        wav = self.run.file_for(self.stem, ".wav")
        self._record(media.write_wav(wav, media.fit_audio(sound, rate, self.settings.duration_s), rate), seconds, extra)

    def save(self, output: Any, **extra: Any) -> list[Output]:
        """Write a pipeline output (`.video`, `.sound`), or the frames a modular pipeline returns, as PNG, or MP4
        (+ WAV when there is sound)."""
        seconds = self.seconds
        s = self.settings
        frames = getattr(output, "video", output)
        if s.is_image:
            self._record(media.write_image(self.run.file_for(self.stem, ".png"), frames), seconds, extra)
            return self.outputs
        sound = getattr(output, "sound", None) if s.enable_sound else None
        rate = self.run.sample_rate
        if s.enable_sound and sound is None:
            raise SoundNotSupportedError(f"Sound was asked for in {self.mode!r} but the pipeline returned none.")
        if s.enable_sound and not rate:
            raise SoundNotSupportedError(
                "Sound needs the sample rate: set run.sample_rate (the checkpoint's: diffusers_pipe.sample_rate(pipe))."
            )
        mp4 = self.run.file_for(self.stem, ".mp4")
        self._record(media.write_video(mp4, frames, s.fps, audio=sound, sample_rate=rate), seconds, extra)
        if sound is not None:
            self._save_wav(sound, rate, seconds, extra)
        return self.outputs

    def save_bytes(self, data: bytes, suffix: str, seconds: float | None = None, **extra: Any) -> list[Output]:
        """Store media that arrived as bytes (from a server); for a video with sound, also its AAC track as a WAV.
        `seconds`: the generation's time where it was measured elsewhere (a job waited on in another thread)."""
        seconds = self.seconds if seconds is None else seconds
        target = self.run.file_for(self.stem, suffix)
        with media.atomic_target(target) as tmp:
            tmp.write_bytes(data)
        self._record(target, seconds, extra)
        if self.settings.enable_sound and suffix == ".mp4":
            sound, rate = media.read_audio(target)
            self._save_wav(sound, rate, seconds, extra)
        return self.outputs
