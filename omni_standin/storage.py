"""The folder job videos are kept in, and how it cleans itself (docs/vllm-omni-contract.md §7, §9).

As on vLLM-Omni: `VLLM_OMNI_SERVER_STORAGE__PATH`, else a temporary folder; with
`VLLM_OMNI_SERVER_STORAGE__FILE_TTL` (seconds) a sweep every `VLLM_OMNI_SERVER_STORAGE__TTL_SWEEP_INTERVAL` seconds
(300) deletes every file in the folder older than that, while job records stay. Files being written live in
`.partial-<pid>/` and are renamed into place only when complete, so a crash never leaves a half-written video under
a job's name; at start the partial folders of processes that are gone are removed, as are the temporary storage
folders of stand-ins that crashed. A temporary folder this server made is removed when it exits.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

PATH_ENV = "VLLM_OMNI_SERVER_STORAGE__PATH"
TTL_ENV = "VLLM_OMNI_SERVER_STORAGE__FILE_TTL"
SWEEP_ENV = "VLLM_OMNI_SERVER_STORAGE__TTL_SWEEP_INTERVAL"
DEFAULT_SWEEP_S = 300.0
TEMP_PREFIX = "omni-videos-"
PARTIAL_PREFIX = ".partial-"
log = logging.getLogger("uvicorn.error")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_stale(parent: Path, prefix: str) -> None:
    """Remove `<prefix><pid>…` folders under `parent` whose process is gone (what a crash leaves behind)."""
    for folder in parent.glob(f"{prefix}*"):
        pid = folder.name[len(prefix) :].split("-")[0]
        if folder.is_dir() and pid.isdigit() and (int(pid) == os.getpid() or not _alive(int(pid))):
            shutil.rmtree(folder, ignore_errors=True)


def _seconds(name: str) -> float | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) == 0:
        raise ValueError(f"{name} must be a positive whole number of seconds, got {raw!r}.")
    return float(raw)


class Storage:
    """The storage folder, this process's partial folder in it, and the TTL sweeper."""

    def __init__(self, path: Path, *, ttl_s: float | None = None, sweep_s: float = DEFAULT_SWEEP_S, owned: bool):
        self.path = path
        self.ttl_s = ttl_s
        self.sweep_s = sweep_s
        self.owned = owned
        remove_stale(path, PARTIAL_PREFIX)
        self.partial = path / f"{PARTIAL_PREFIX}{os.getpid()}"
        self.partial.mkdir(exist_ok=True)
        self._stop = threading.Event()

    @classmethod
    def from_environment(cls) -> Storage:
        """Raises ValueError naming the variable when a TTL setting is not a whole number of seconds."""
        ttl_s = _seconds(TTL_ENV)
        sweep_s = _seconds(SWEEP_ENV) or DEFAULT_SWEEP_S
        configured = os.environ.get(PATH_ENV)
        if configured:
            path = Path(configured)
            path.mkdir(parents=True, exist_ok=True)
            return cls(path, ttl_s=ttl_s, sweep_s=sweep_s, owned=False)
        remove_stale(Path(tempfile.gettempdir()), TEMP_PREFIX)
        path = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-"))
        return cls(path, ttl_s=ttl_s, sweep_s=sweep_s, owned=True)

    def partial_path(self, name: str) -> Path:
        return self.partial / name

    def sweep(self, ttl_s: float) -> None:
        """Delete every file in the folder older than `ttl_s`, as vLLM-Omni's sweeper does; folders are kept."""
        cutoff = time.time() - ttl_s
        for path in self.path.iterdir():
            with contextlib.suppress(FileNotFoundError):
                if path.is_file() and path.stat().st_mtime < cutoff:
                    path.unlink()
                    log.info("Removed %s: older than %s=%d s.", path.name, TTL_ENV, ttl_s)

    def start_sweeper(self) -> None:
        ttl_s = self.ttl_s
        if ttl_s is None:
            return

        def run() -> None:
            while True:
                self.sweep(ttl_s)
                if self._stop.wait(self.sweep_s):
                    return

        threading.Thread(target=run, name="storage-ttl", daemon=True).start()

    def close(self) -> None:
        """Stop sweeping; remove this process's partial files, and the whole folder if this server made it."""
        self._stop.set()
        shutil.rmtree(self.path if self.owned else self.partial, ignore_errors=True)
