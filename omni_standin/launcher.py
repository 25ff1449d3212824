"""Start the stand-in (`python -m omni_standin MODEL`) as a child process in the background, and stop it again.

The vLLM-Omni notebook starts one through `helpers.with_vllm_omni.local_server.endpoint` when `BASE_URL="auto"` and
no `$OMNI_BASE_URL` is set; tests use it for a real server process over real HTTP.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from helpers.errors import CookbookError
from helpers.with_vllm_omni.api import wait_for_server

READY_LINE = "Application startup complete."
# The variable vLLM (and the stand-in) read the API key from: a key on the command line would show in `ps`.
SERVER_KEY_ENV = "VLLM_API_KEY"


class ServerStartError(CookbookError):
    """The local server process exited or did not become ready; the message carries its log."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass
class LocalServer:
    """A `python -m omni_standin` child process; use as a context manager or call `stop()`."""

    process: subprocess.Popen[bytes]
    base_url: str
    log_path: Path
    api_key: str | None = None
    scratch: Path | None = None  # a temporary folder this launcher made (log, storage), removed by `stop`

    @classmethod
    def start(
        cls,
        model: str,
        *,
        port: int | None = None,
        api_key: str | None = None,
        guardrails: bool | None = None,
        device: str = "auto",
        speed: str = "none",
        served_model_name: str | None = None,
        log_path: str | os.PathLike[str] | None = None,
        extra_args: list[str] | None = None,
        timeout_s: float = 300.0,
    ) -> LocalServer:
        """Start the server on 127.0.0.1 and return once `/health` answers 200 (its log is kept in a file)."""
        port = port or free_port()
        command = [sys.executable, "-m", "omni_standin", model, "--port", str(port), "--device", device]
        command += ["--speed", speed]
        if guardrails is False:
            command.append("--no-guardrails")
        if served_model_name:
            command += ["--served-model-name", served_model_name]
        command += extra_args or []
        scratch = None if log_path else Path(tempfile.mkdtemp(prefix="omni-server-"))
        log_file = Path(log_path) if log_path else scratch / "server.log"  # type: ignore[operator]
        log_file.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.pop(SERVER_KEY_ENV, None)
        if api_key:
            env[SERVER_KEY_ENV] = api_key
        if scratch is not None and "VLLM_OMNI_SERVER_STORAGE__PATH" not in env:
            env["VLLM_OMNI_SERVER_STORAGE__PATH"] = str(scratch / "storage")
        with open(log_file, "wb") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        server = cls(process, f"http://127.0.0.1:{port}", log_file, api_key, scratch)
        try:
            server.wait_ready(timeout_s)
        except BaseException:
            server.stop()
            raise
        return server

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.is_file() else ""

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerStartError(
                    f"The local server exited with code {self.process.returncode} before it was ready. "
                    f"Its log:\n{self.log_text()[-3000:]}"
                )
            if READY_LINE in self.log_text():
                wait_for_server(self.base_url, deadline_s=max(1.0, deadline - time.monotonic()), api_key=self.api_key)
                return
            time.sleep(0.1)
        raise ServerStartError(
            f"The local server did not print {READY_LINE!r} within {timeout_s:.0f} s. "
            f"Its log:\n{self.log_text()[-3000:]}"
        )

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """Ask the server to exit (SIGTERM), kill it if it does not, and remove the folder this launcher made."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout_s)
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
        return self.process.returncode

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
