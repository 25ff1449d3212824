"""`python -m helpers.serve MODEL`: a local server that speaks the vLLM-Omni API, backed by Diffusers.

Flags mirror `vllm serve`: `--host` (default 127.0.0.1, so nothing outside this machine can reach it), `--port`,
`--served-model-name`, `--api-key`, `--no-guardrails`; `--device` picks the accelerator. `/health` answers 503
until the model has loaded, then the log prints `Application startup complete.`, as a real server does.

`LocalServer` starts one in the background for a notebook or a test and stops it again.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from helpers.errors import CookbookError

READY_LINE = "Application startup complete."
BASE_URL_ENV = "OMNI_BASE_URL"
API_KEY_ENV = "OMNI_API_KEY"
log = logging.getLogger("uvicorn.error")


class ServerStartError(CookbookError):
    """The local server process exited or did not become ready; the message carries its log."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m helpers.serve", description=__doc__.splitlines()[0])
    parser.add_argument("model", help="Hugging Face id, local checkpoint folder, or 'tiny'")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--served-model-name", default=None, help="name in /v1/models (default: MODEL)")
    parser.add_argument("--api-key", default=None, help="require `Authorization: Bearer KEY` on /v1/*")
    parser.add_argument("--no-guardrails", action="store_true", help="never load the guardrail models")
    parser.add_argument("--flow-shift", type=float, default=None, help="default flow shift for video requests")
    parser.add_argument("--device", default="auto", help="auto | cuda | cuda:N | cpu")
    return parser


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    from helpers.omni_server.app import ServerState, create_app
    from helpers.omni_server.engine import DiffusersEngine

    args = build_parser().parse_args(argv)
    storage = Path(os.environ.get("VLLM_OMNI_SERVER_STORAGE__PATH") or tempfile.mkdtemp(prefix="omni-videos-"))
    storage.mkdir(parents=True, exist_ok=True)
    state = ServerState(
        served_model_name=args.served_model_name or args.model,
        storage=storage,
        api_key=args.api_key or os.environ.get("VLLM_API_KEY"),
        default_flow_shift=args.flow_shift,
    )
    # lifespan="off": uvicorn serves (and /health answers 503) while the model loads; the ready line is ours.
    server = uvicorn.Server(uvicorn.Config(create_app(state), host=args.host, port=args.port, lifespan="off"))
    failure: list[BaseException] = []

    def load() -> None:
        try:
            engine = DiffusersEngine.load(
                args.model, device=args.device, guardrails=False if args.no_guardrails else None
            )
        except Exception as exc:
            failure.append(exc)
            log.error("Could not load %s: %s", args.model, exc)
            server.should_exit = True
            return
        while not server.started and not server.should_exit:
            time.sleep(0.05)
        state.engine = engine
        log.info(READY_LINE)

    log.info("Starting vLLM-Omni stand-in API server (pure diffusion mode) on http://%s:%d", args.host, args.port)
    threading.Thread(target=load, name="load-model", daemon=True).start()
    server.run()
    if state.engine is not None:
        state.engine.shutdown()
    return 1 if failure else 0


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass
class LocalServer:
    """A `python -m helpers.serve` child process; use as a context manager or call `stop()`."""

    process: subprocess.Popen[bytes]
    base_url: str
    log_path: Path
    api_key: str | None = None

    @classmethod
    def start(
        cls,
        model: str,
        *,
        port: int | None = None,
        api_key: str | None = None,
        guardrails: bool | None = None,
        device: str = "auto",
        served_model_name: str | None = None,
        log_path: str | os.PathLike[str] | None = None,
        timeout_s: float = 300.0,
    ) -> LocalServer:
        """Start the server on 127.0.0.1 and return once `/health` answers 200 (its log is kept in a file)."""
        port = port or free_port()
        command = [sys.executable, "-m", "helpers.serve", model, "--port", str(port), "--device", device]
        if api_key:
            command += ["--api-key", api_key]
        if guardrails is False:
            command.append("--no-guardrails")
        if served_model_name:
            command += ["--served-model-name", served_model_name]
        log_file = Path(log_path) if log_path else Path(tempfile.mkdtemp(prefix="omni-server-")) / "server.log"
        log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(log_file, "wb") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        server = cls(process, f"http://127.0.0.1:{port}", log_file, api_key)
        try:
            server.wait_ready(timeout_s)
        except BaseException:
            server.stop()
            raise
        return server

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.is_file() else ""

    def wait_ready(self, timeout_s: float) -> None:
        from helpers.omni_client import wait_for_server

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerStartError(
                    f"The local server exited with code {self.process.returncode} before it was ready. "
                    f"Its log ({self.log_path}):\n{self.log_text()[-3000:]}"
                )
            if READY_LINE in self.log_text():
                wait_for_server(self.base_url, deadline_s=max(1.0, deadline - time.monotonic()), api_key=self.api_key)
                return
            time.sleep(0.1)
        raise ServerStartError(
            f"The local server did not print {READY_LINE!r} within {timeout_s:.0f} s. Its log ({self.log_path}):\n"
            f"{self.log_text()[-3000:]}"
        )

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """Ask the server to exit (SIGTERM: uvicorn finishes gracefully), then kill it if it does not."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout_s)
        return self.process.returncode

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class Endpoint:
    """Where the notebook sends requests, and the local server it started (None for an external one)."""

    base_url: str
    api_key: str | None
    server: LocalServer | None

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()


def endpoint(
    base_url: str,
    *,
    model: str,
    api_key: str = "",
    device: str = "auto",
    guardrails: bool | None = None,
    log_dir: str | os.PathLike[str] | None = None,
) -> Endpoint:
    """`base_url="auto"`: $OMNI_BASE_URL when set, else a local server on `model`; anything else is used as is."""
    key = api_key or os.environ.get(API_KEY_ENV) or None
    if base_url != "auto":
        return Endpoint(base_url.rstrip("/"), key, None)
    if os.environ.get(BASE_URL_ENV):
        return Endpoint(os.environ[BASE_URL_ENV].rstrip("/"), key, None)
    log_path = Path(log_dir) / "server.log" if log_dir else None
    server = LocalServer.start(model, api_key=key, guardrails=guardrails, device=device, log_path=log_path)
    return Endpoint(server.base_url, key, server)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        raise SystemExit(main())
