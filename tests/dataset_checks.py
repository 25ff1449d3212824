"""The dataset notebooks' session runs, each with a fault in the middle, and the checks their tests share.

- The Diffusers notebook's kernel is killed (SIGKILL) once a few jobs are recorded, and a second "Run All" with the
  same OUTPUT_DIR finishes the rest.
- The vLLM-Omni notebook sends its jobs to two real tiny servers, the session's and one of its own, and the second is
  killed (its whole process group) while it runs a job; the jobs finish on the first.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from cookbook_tools import notebooks
from cosmos3_dataset.dataset_spec import load
from helpers import media
from helpers.assets import assets_dir
from local_server.server import LocalServer
from tests.notebook_checks import execute_smoke

DATASET_DIFFUSERS, DATASET_VLLM = notebooks.DATASET_PAIR
SPEC = assets_dir("dataset") / "spec.json"
JOBS = len(load(SPEC, preset="smoke").jobs)
KILL_AFTER = 5  # jobs recorded before the fault


@dataclass
class DatasetRun:
    executed: Path  # the executed notebook that finished the dataset
    folder: Path  # OUTPUT_DIR/<spec name>
    before_fault: dict[str, tuple[int, int]]  # files recorded when the fault struck: {path: (inode, mtime_ns)}
    files_at_fault: int  # whole media files in the folder then, recorded or not
    fault: str  # what the fault did


def recorded(folder: Path) -> list[dict[str, Any]]:
    manifest = folder / "manifest.json"
    try:
        return json.loads(manifest.read_text())["outputs"] if manifest.is_file() else []
    except json.JSONDecodeError:  # read while it was being replaced: never, as it is renamed into place whole
        raise AssertionError(f"{manifest} was read half-written") from None


def _stamps(folder: Path) -> dict[str, tuple[int, int]]:
    return {o["path"]: ((s := (folder / o["path"]).stat()).st_ino, s.st_mtime_ns) for o in recorded(folder)}


def media_files(folder: Path, hidden: bool = False) -> list[Path]:
    """The dataset's media files (or, with `hidden`, the temporary ones a write leaves until its rename)."""
    return [
        p
        for kind in ("videos", "images")
        for p in sorted((folder / kind).glob("*"))
        if p.suffix in (".mp4", ".png") and p.name.startswith(".") == hidden
    ]


def _kernels() -> list[int]:
    """This process's child processes that are Jupyter kernels."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == os.getpid() and b"ipykernel_launcher" in cmdline:
            found.append(int(entry.name))
    return found


def _wait_for(condition, what: str, timeout_s: float = 600, poll_s: float = 0.2) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(poll_s)


def _in_background(target) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


def killed_kernel_then_resumed(out: Path) -> DatasetRun:
    """Run the Diffusers notebook, SIGKILL its kernel once `KILL_AFTER` jobs are recorded, then run it again."""
    folder = out / "media" / "workcells"
    thread, errors = _in_background(
        lambda: execute_smoke(DATASET_DIFFUSERS, out / "first", OUTPUT_DIR=str(out / "media"))
    )
    _wait_for(lambda: len(recorded(folder)) >= KILL_AFTER or not thread.is_alive(), "the first jobs")
    kernels = _kernels()
    assert thread.is_alive() and len(kernels) == 1, (kernels, errors)
    os.kill(kernels[0], signal.SIGKILL)
    thread.join(120)
    assert errors and "DeadKernelError" in type(errors[0]).__name__ + repr(errors[0]), errors
    before, files = _stamps(folder), len(media_files(folder))
    assert KILL_AFTER <= len(before) < JOBS, len(before)
    executed = execute_smoke(DATASET_DIFFUSERS, out)
    return DatasetRun(executed, folder, before, files, f"kernel killed after {len(before)} of {JOBS} jobs")


def killed_server_mid_job(out: Path, survivor: LocalServer, key: str) -> DatasetRun:
    """Run the vLLM-Omni notebook over `survivor` and a second tiny server, and kill the second (its process group)
    while it runs a job, once `KILL_AFTER` jobs are recorded."""
    folder = out / "media" / "workcells"
    with LocalServer.start("tiny", api_key=key, flags=["--no-guardrails"], progress=False) as doomed:
        base_url = f"{survivor.base_url},{doomed.base_url}"
        thread, errors = _in_background(
            lambda: execute_smoke(DATASET_VLLM, out, BASE_URL=base_url, API_KEY=key, MAX_IN_FLIGHT=2)
        )
        headers = {"Authorization": f"Bearer {key}"}

        def doomed_is_busy() -> bool:
            if len(recorded(folder)) < KILL_AFTER:
                return False
            jobs = httpx.get(f"{doomed.base_url}/v1/videos", headers=headers, timeout=10).json()["data"]
            return any(job["status"] == "in_progress" for job in jobs)

        _wait_for(lambda: doomed_is_busy() or not thread.is_alive(), "a job in progress on the second server")
        assert thread.is_alive(), errors
        os.killpg(doomed.process.pid, signal.SIGKILL)
        doomed.process.wait(30)
        before, files = _stamps(folder), len(media_files(folder))
        thread.join(900)
    assert not errors, errors
    executed = out / Path(DATASET_VLLM).name
    return DatasetRun(executed, folder, before, files, f"{doomed.base_url} killed after {len(before)} jobs")


def check_file(path: Path, row: dict[str, Any]) -> None:
    """A dataset file, decoded: the size, frames and frame rate its settings give, and its recorded sha256."""
    from helpers.runs import sha256_of

    s = row["settings"]
    info = media.probe(path)
    assert (info.width, info.height) == (s["width"], s["height"]), (path, info)
    if path.suffix == ".mp4":
        assert (info.codec, info.num_frames, info.fps, info.has_audio) == ("h264", s["num_frames"], s["fps"], False)
        assert media.read_frames(path).shape == (s["num_frames"], s["height"], s["width"], 3)
    else:
        assert info.kind == "image" and path.suffix == ".png", info
    assert sha256_of(path) == row["sha256"], path
