"""Shared pieces of the real-browser tests: Debian's Chromium driven by Playwright, a throwaway JupyterLab server
on 127.0.0.1, media checks run inside the page, and screenshots kept as test artifacts.

Playwright's own browser download does not work on the CI network, so the tests drive the distribution's
`/usr/bin/chromium` (`.ci/run` installs it) and skip with a clear reason where it is missing. Every wait is bounded.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = REPO / "outputs" / "test-artifacts"
# Without the background-networking switches Chromium keeps dialling Google, and this closed network refuses it.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SERVER_START_TIMEOUT_S = 90
SERVER_STOP_TIMEOUT_S = 20
PAGE_TIMEOUT_MS = 30_000

# Run in the page: wait (bounded) until every <video> in `root` has loaded its metadata, then report each one.
MEDIA_STATE_JS = """
async ([selector, timeoutMs]) => {
  const root = document.querySelector(selector) || document;
  const players = [...root.querySelectorAll('video, audio')];
  const images = [...root.querySelectorAll('img')];
  const settled = () => players.every((m) => m.readyState >= 1 || m.error) && images.every((i) => i.complete);
  const deadline = Date.now() + timeoutMs;
  while (!settled() && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
  }
  const player = (m) => ({
    src: (m.currentSrc || m.src || '').slice(0, 120),
    readyState: m.readyState,
    duration: Number.isFinite(m.duration) ? m.duration : null,
    width: m.videoWidth ?? null,
    height: m.videoHeight ?? null,
    error: m.error ? `${m.error.code}: ${m.error.message}` : null,
  });
  return {
    videos: players.filter((m) => m.tagName === 'VIDEO').map(player),
    audios: players.filter((m) => m.tagName === 'AUDIO').map(player),
    images: images.map((i) => ({ src: (i.currentSrc || i.src || '').slice(0, 120), naturalWidth: i.naturalWidth })),
  };
}
"""


# Run in the page: seek every <video> under `selector` a little way in and wait (bounded) until that frame is
# decoded (readyState >= 2, HAVE_CURRENT_DATA); returns each video's readyState afterwards.
SHOW_FRAME_JS = """
async ([selector, timeoutMs]) => {
  const root = document.querySelector(selector) || document;
  const videos = [...root.querySelectorAll('video')];
  for (const v of videos) {
    v.preload = 'auto';
    if (Number.isFinite(v.duration) && v.duration > 0) v.currentTime = v.duration / 2;
  }
  const deadline = Date.now() + timeoutMs;
  while (!videos.every((v) => v.readyState >= 2 && !v.seeking) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
  }
  return videos.map((v) => v.readyState);
}
"""


def require_chromium() -> None:
    """Skip the calling test where Debian's Chromium is not installed (a laptop); CI installs it."""
    if not CHROMIUM.is_file():
        pytest.skip(f"{CHROMIUM} not found: install Debian's chromium package (`apt-get install chromium`) to run it")


def media_state(page: Any, selector: str = "body", timeout_ms: int = 20_000) -> dict[str, list[dict[str, Any]]]:
    """Every <video>, <audio> and <img> under `selector` once loaded (or after `timeout_ms`), as plain data."""
    return page.evaluate(MEDIA_STATE_JS, [selector, timeout_ms])


def assert_playable(players: list[dict[str, Any]]) -> None:
    """Each <video>/<audio> decoded its metadata: readyState >= 1 (HAVE_METADATA) and a finite non-zero duration;
    a video also a frame size. For an H.264 MP4 this means the browser's own demuxer and decoder accepted it."""
    for m in players:
        assert m["error"] is None, f"media failed to load: {m}"
        assert m["readyState"] >= 1, f"media metadata never loaded: {m}"
        assert m["duration"] is not None and m["duration"] > 0, f"media without a finite, non-zero duration: {m}"
        if m["width"] is not None:
            assert m["width"] > 0 and m["height"] > 0, f"video without a frame size: {m}"


def assert_frames_decode(page: Any, selector: str = "body", timeout_ms: int = 20_000) -> None:
    """Every video under `selector` decodes a picture from its middle (not only its header): readyState >= 2."""
    states = page.evaluate(SHOW_FRAME_JS, [selector, timeout_ms])
    assert states and all(s >= 2 for s in states), f"video readyStates after seeking: {states}"


def screenshot(page: Any, name: str) -> Path:
    """Save a full-page PNG under outputs/test-artifacts/ and print where it went."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True, timeout=PAGE_TIMEOUT_MS)
    print(f"screenshot: {path}")
    return path


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """A headless Debian Chromium driven by Playwright (skips where it is not installed)."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, timeout=PAGE_TIMEOUT_MS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    """A fresh page (own context) with bounded default timeouts; console errors are collected in `page.errors`."""
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    pg = context.new_page()
    pg.errors = []
    pg.on("pageerror", lambda exc: pg.errors.append(str(exc)))
    try:
        yield pg
    finally:
        context.close()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class JupyterLab:
    """A running JupyterLab server: open `url(path)` in a browser; files go in `root`."""

    root: Path
    port: int
    token: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str = "lab") -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base}/{path.lstrip('/')}{sep}token={self.token}"

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.is_file() else ""

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(self.url("api/status"), timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def wait_until_up(self, timeout_s: float = SERVER_START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.process.returncode}:\n{self.log_tail()}")
            if self._answers():
                return
            time.sleep(0.3)
        raise TimeoutError(f"JupyterLab did not answer within {timeout_s} s:\n{self.log_tail()}")

    def stop(self) -> None:
        """SIGTERM (the server shuts its kernels down), then SIGKILL to its process group if it lingers."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=SERVER_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                pass
        try:  # kernels it started live in its process group (start_new_session=True)
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait(timeout=SERVER_STOP_TIMEOUT_S)


def start_jupyterlab(workdir: Path) -> JupyterLab:
    """Start JupyterLab with this venv's Python (so kernel `python3` is this venv's ipykernel) on 127.0.0.1.

    Its root is `workdir/root`; its config, data, runtime, settings and workspace folders are private to
    `workdir`, so the developer's own JupyterLab setup neither leaks in nor gets touched.
    """
    root, home = workdir / "root", workdir / "home"
    dirs = {name: home / name for name in ("config", "data", "runtime", "settings", "workspaces", "ipython")}
    for d in [root, *dirs.values()]:
        d.mkdir(parents=True, exist_ok=True)
    # No "get notified about Jupyter news?" toast over the notebook.
    (dirs["config"] / "labconfig").mkdir(exist_ok=True)
    (dirs["config"] / "labconfig" / "page_config.json").write_text(
        '{"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": true}}'
    )
    # Every cell stays in the page (no virtual scrolling), so the tests see all outputs.
    tracker = dirs["settings"] / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True, exist_ok=True)
    tracker.write_text('{"windowingMode": "none"}')
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(dirs["config"]),
        JUPYTER_DATA_DIR=str(dirs["data"]),
        JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
        JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
        JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]),
        IPYTHONDIR=str(dirs["ipython"]),
        JUPYTER_PLATFORM_DIRS="1",
        PYTHONUNBUFFERED="1",
    )
    env.pop("JUPYTER_PATH", None)
    log = workdir / "jupyterlab.log"
    last_error: Exception | None = None
    for _attempt in range(3):  # a free port can be taken between choosing it and binding it
        port, token = _free_port(), secrets.token_hex(16)
        cmd = [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--allow-root",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.expose_app_in_browser=True",
        ]
        with log.open("ab") as out:
            process = subprocess.Popen(
                cmd,
                cwd=root,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        lab = JupyterLab(root=root, port=port, token=token, process=process, log=log)
        try:
            lab.wait_until_up()
            return lab
        except (RuntimeError, TimeoutError) as exc:
            last_error = exc
            lab.stop()
    raise RuntimeError(f"JupyterLab did not start: {last_error}")


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterLab]:
    """A JupyterLab server for the module's tests, stopped (with its kernels) afterwards."""
    require_chromium()
    lab = start_jupyterlab(tmp_path_factory.mktemp("jupyterlab"))
    try:
        yield lab
    finally:
        lab.stop()


def traceback_texts(texts: list[str]) -> list[str]:
    """The output texts that show a Python error (IPython's traceback banner or a bare `Traceback`)."""
    pattern = re.compile(r"Traceback \(most recent call last\)|^-{20,}\n\w+(Error|Exception)\b", re.MULTILINE)
    return [t for t in texts if pattern.search(t)]
