"""Start the real vLLM-Omni server for Cosmos 3: `bash scripts/serve_vllm_omni.sh MODEL [vllm serve flags...]`.

It runs `vllm serve <checkpoint> --omni ...` in the foreground, in an environment of its own (vLLM-Omni pins
torch and transformers differently from the cookbook's `.venv`), created on first use and kept under
`~/.cache/cosmos3-cookbook/` (or `$COSMOS3_VLLM_OMNI_ENV`):

- on a machine without an NVIDIA GPU: the pinned packages of `support/vllm_omni_cpu/requirements.txt` (vLLM's CPU build,
  vLLM-Omni 0.30.0, diffusers 0.42.1) and the cookbook's CPU platform plugin `vllm_omni_cpu`; the model runs in
  float32 unless `--dtype` says otherwise, since most CPUs emulate bf16 (in a trial with `tiny`, bf16 made start-up
  and a small video several times slower);
- on a GPU machine: vLLM-Omni's normal CUDA build from PyPI (or use the published `docker run` command instead).

`MODEL` is what the notebooks take: `tiny` and its variants (built offline, served as `tiny`), `nano-random`, a
local checkpoint folder, or a Hugging Face id (`@fp8` for that revision). Everything that can be checked before the
server starts is checked first (the model, the port), and a failure says how to fix it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import checkpoints
from helpers.errors import CookbookError
from local_server import room_limits

VLLM_OMNI_VERSION = "0.30.0"
REPOSITORY = Path(__file__).resolve().parents[2]
PLUGIN = REPOSITORY / "support" / "vllm_omni_cpu"
LOCK = PLUGIN / "requirements.txt"
ENV_VAR = "COSMOS3_VLLM_OMNI_ENV"
# auto | cpu | cuda: the notebook's DEVICE for a server it starts ("cpu" serves on the CPU even where a GPU is).
DEVICE_ENV = "COSMOS3_VLLM_OMNI_DEVICE"
# The packages a GPU machine gets: vLLM-Omni's own CUDA build, with the diffusers release Cosmos 3 needs.
CUDA_PACKAGES = (f"vllm=={VLLM_OMNI_VERSION}", f"vllm-omni=={VLLM_OMNI_VERSION}")
DIFFUSERS = "diffusers==0.42.1"
DEFAULT_PORT = 8000
PREFIX = "serve_vllm_omni:"  # how this module's own lines start in the server's log


class ServeError(CookbookError):
    """Something is wrong before the server could start; the message says what to change."""


def say(message: str) -> None:
    print(f"{PREFIX} {message}", file=sys.stderr, flush=True)


def has_nvidia_gpu() -> bool:
    """`nvidia-smi -L` lists a GPU (what decides between vLLM-Omni's CUDA build and the CPU plugin)."""
    if shutil.which("nvidia-smi") is None:
        return False
    result = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    return result.returncode == 0 and "GPU" in result.stdout


def wants_gpu(device: str | None = None) -> bool:
    """Whether the server runs vLLM-Omni's CUDA build: where a GPU is, unless `device` (by default
    $COSMOS3_VLLM_OMNI_DEVICE) is cpu."""
    device = device or os.environ.get(DEVICE_ENV, "auto")
    if device not in ("auto", "cpu", "cuda"):
        raise ServeError(f"${DEVICE_ENV}={device!r} is not allowed. Allowed: auto, cpu, cuda.")
    if device == "cpu":
        return False
    found = has_nvidia_gpu()
    if device == "cuda" and not found:
        raise ServeError(
            "DEVICE='cuda' asks for a GPU server, and this machine has no NVIDIA GPU: use 'auto' or 'cpu'."
        )
    return found


def environment_dir(gpu: bool) -> Path:
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "cosmos3-cookbook" / f"vllm-omni-{VLLM_OMNI_VERSION}-{'cuda' if gpu else 'cpu'}"


def _digest(*parts: bytes) -> str:
    digest = hashlib.sha256(f"{sys.version_info[:2]}".encode())
    for part in parts:
        digest.update(part)
    return digest.hexdigest()


def _packages_fingerprint(gpu: bool) -> str:
    """Changes whenever the pinned packages change, so a stale environment is rebuilt, not trusted."""
    return _digest(" ".join((*CUDA_PACKAGES, DIFFUSERS)).encode() if gpu else LOCK.read_bytes())


def _plugin_fingerprint() -> str:
    return _digest(*(p.read_bytes() for p in [PLUGIN / "pyproject.toml", *sorted(PLUGIN.glob("vllm_omni_cpu/*.py"))]))


def install_commands(env: Path, gpu: bool) -> list[list[str]]:
    """The commands that build the server's packages in `env` (a new virtual environment)."""
    pip = [str(env / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    commands = [[sys.executable, "-m", "venv", str(env)], [*pip, "--upgrade", "pip"]]
    if gpu:
        # vllm-omni pins diffusers 0.40.0; Cosmos 3 needs 0.42.1, which replaces it without trouble.
        return [*commands, [*pip, *CUDA_PACKAGES], [*pip, DIFFUSERS]]
    return [*commands, [*pip, "--no-deps", "-r", str(LOCK)]]


def plugin_command(env: Path) -> list[str]:
    """Installs (again) the CPU platform plugin alone: editing it does not rebuild the whole environment."""
    return [
        str(env / "bin" / "python"),
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-deps",
        "--force-reinstall",
        str(PLUGIN),
    ]


def _run(command: list[str]) -> None:
    say("$ " + " ".join(command))
    result = subprocess.run(command, check=False)
    if result.returncode != 0:
        raise ServeError(
            f"Installing the server environment failed (exit status {result.returncode}) at:\n  {' '.join(command)}\n"
            "pip's message is above. Check that this machine reaches the package index, then run again (a "
            f"half-made environment is rebuilt). To put the environment elsewhere, set ${ENV_VAR}."
        )


@contextlib.contextmanager
def _locked(env: Path) -> Iterator[None]:
    """One installer at a time (a notebook and a test session may start servers together)."""
    env.parent.mkdir(parents=True, exist_ok=True)
    with open(env.parent / f".{env.name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_environment(gpu: bool) -> Path:
    """The server's environment, created (or rebuilt when the pins changed) on first use. Returns its folder."""
    if not gpu and not LOCK.is_file():
        raise ServeError(
            f"The server's pinned packages ({LOCK.relative_to(REPOSITORY)}) are not at {REPOSITORY}: run this from the "
            "cookbook's repository, installed with `pip install -e .` (scripts/setup.sh does that)."
        )
    env = environment_dir(gpu)
    packages, plugin = env / ".cosmos3-cookbook-packages", env / ".cosmos3-cookbook-plugin"
    with _locked(env):
        installed = False
        if not packages.is_file() or packages.read_text() != _packages_fingerprint(gpu):
            say(
                f"creating the vLLM-Omni {VLLM_OMNI_VERSION} server environment in {env} "
                f"({'CUDA build' if gpu else 'CPU build'}; first use only: about 5 minutes and 7 GB on a CPU machine)"
            )
            shutil.rmtree(env, ignore_errors=True)
            for step in install_commands(env, gpu):
                _run(step)
            packages.write_text(_packages_fingerprint(gpu))
            installed = True
        if not gpu and (not plugin.is_file() or plugin.read_text() != _plugin_fingerprint()):
            _run(plugin_command(env))
            plugin.write_text(_plugin_fingerprint())
            installed = True
        if installed:
            check = [str(env / "bin" / "python"), "-c", "import vllm_omni" + ("" if gpu else ", vllm_omni_cpu")]
            if subprocess.run(check, check=False, capture_output=True).returncode != 0:
                packages.unlink(missing_ok=True)
                raise ServeError(f"The server environment in {env} is incomplete (`{check[-1]}` fails): run again.")
            say("server environment ready")
    return env


def _flag(args: Sequence[str], name: str) -> str | None:
    """The value of `--name VALUE` or `--name=VALUE` in a vllm serve argument list (None when absent)."""
    for index, arg in enumerate(args):
        if arg == name and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _pop_flag(args: list[str], name: str) -> str | None:
    """The value of the launcher's own flag `--name VALUE` (or `--name=VALUE`), taken out of `args`."""
    value = _flag(args, name)
    if value is not None:
        index = next(i for i, arg in enumerate(args) if arg == name or arg.startswith(name + "="))
        del args[index : index + (1 if "=" in args[index] else 2)]
    return value


def check_port(host: str, port: int) -> None:
    """Fail now, not after minutes of start-up, when something already listens on the port."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise ServeError(
                f"Port {port} on {host} is in use ({exc.strerror}). Pass another one (`--port {port + 1}`), or stop "
                f"what listens there (`ss -ltnp 'sport = :{port}'` names it)."
            ) from exc


def check_exposure(host: str, flags: Sequence[str]) -> None:
    """A server reachable from other machines must ask for a key: anyone who reaches it could fill its queue."""
    loopback = host in ("localhost", "::1") or host.startswith("127.")
    if not loopback and _flag(flags, "--api-key") is None and not os.environ.get("VLLM_API_KEY"):
        raise ServeError(
            f"--host {host} makes the server reachable from other machines, and it has no API key. Add "
            "`--api-key <secret>` (or set $VLLM_API_KEY) and give the key to the people who use it, or leave "
            "--host out to listen on 127.0.0.1 only."
        )


def command(model: str, flags: Sequence[str], gpu: bool | None = None) -> list[str]:
    """`vllm serve <checkpoint folder> --omni FLAGS` for MODEL, resolved as the Diffusers notebooks resolve it (a Hub
    id is downloaded first, so its `@revision` is the folder served), with the cookbook's defaults for what FLAGS
    leave out: the name MODEL is served as, 127.0.0.1 as the host, and float32 on a CPU. A Hub id on a machine without
    a GPU is refused before anything is downloaded, unless $COSMOS3_VLLM_OMNI_DEVICE=cpu asks for the CPU on purpose.
    The server's guardrails are its own (`--no-guardrails` turns them off), not the cookbook environment's."""
    gpu = has_nvidia_gpu() if gpu is None else gpu
    checkpoint = checkpoints.resolve(model, device=os.environ.get(DEVICE_ENV, "auto"), guardrails=False, served=True)
    args = list(flags)
    if _flag(args, "--host") is None:
        args += ["--host", "127.0.0.1"]  # vLLM's own default is every interface
    if checkpoint.served_name and _flag(args, "--served-model-name") is None:
        args += ["--served-model-name", checkpoint.served_name]
    if not gpu and _flag(args, "--dtype") is None:
        args += ["--dtype", "float32"]  # most CPUs emulate bf16, several times slower
    return ["vllm", "serve", str(Path(checkpoint.path).absolute()), "--omni", *args]


# Flags that split one request over several devices: with them, a replica needs a group of GPUs, which a deploy file of
# your own gives (`devices` in blocks of the group's size).
PARALLEL_FLAGS = ("--tensor-parallel-size", "--cfg-parallel-size", "--ulysses-degree", "--ring-degree", "--num-gpus")


def deploy_file(replicas: int, gpu: bool, guardrails: bool) -> str:
    """vLLM-Omni 0.30.0's Cosmos 3 deploy file (`vllm_omni/deploy/cosmos3_omni.yaml`) with `replicas` engines of its
    one stage behind the server's one URL, each on its own GPU; requests go to them in turn. On a CPU the engines run
    their worker in-process (`uni`): the default `mp` worker starts a CUDA stream thread that fails there."""
    devices = f'\n    devices: "{",".join(str(n) for n in range(replicas))}"' if gpu else ""
    return (
        "# Cosmos 3 deploy file of vLLM-Omni 0.30.0, several engines behind one URL (serve_vllm_omni.sh --replicas)\n"
        "pipeline: cosmos3_omni_deploy\n"
        "async_chunk: false\n"
        f"distributed_executor_backend: {'mp' if gpu else 'uni'}\n"
        "stages:\n"
        "  - stage_id: 0\n"
        "    model_class_name: Cosmos3OmniDiffusersPipeline\n"
        f"    num_replicas: {replicas}{devices}\n"
        "    model_config:\n"
        f"      guardrails: {'true' if guardrails else 'false'}\n"
    )


def with_replicas(flags: Sequence[str], gpu: bool) -> list[str]:
    """FLAGS with `--replicas N` replaced by `--deploy-config` of a deploy file with N engines (`deploy_file`)."""
    args = list(flags)
    value = _pop_flag(args, "--replicas")
    if value is None:
        return args
    if not value.isdigit() or int(value) < 1:
        raise ServeError(f"--replicas {value}: give the number of engines behind the server's URL, 1 or more.")
    if int(value) == 1:
        return args
    if _flag(args, "--deploy-config") is not None:
        raise ServeError(
            f"--replicas {value} writes a deploy file of its own, and --deploy-config gives yours: set num_replicas "
            "(and devices) in your file's stage instead."
        )
    clash = [flag for flag in PARALLEL_FLAGS if _flag(args, flag) is not None]
    if clash:
        raise ServeError(
            f"--replicas {value} puts one engine on each GPU; {clash[0]} spreads one engine over several. Use one of "
            "them, or write a deploy file whose stage has num_replicas and devices, and pass it with --deploy-config."
        )
    fd, path = tempfile.mkstemp(prefix="cosmos3-replicas-", suffix=".yaml")
    with os.fdopen(fd, "w") as file:
        file.write(deploy_file(int(value), gpu, guardrails="--no-guardrails" not in args))
    return [*args, "--deploy-config", path]


def _api_keys(args: Sequence[str]) -> list[str]:
    """The keys the server takes: every value after `--api-key` (vLLM takes several), else $VLLM_API_KEY."""
    keys: list[str] = []
    for index, arg in enumerate(args):
        if arg.startswith("--api-key="):
            keys.append(arg.split("=", 1)[1])
        elif arg == "--api-key":
            keys += list(itertools.takewhile(lambda value: not value.startswith("--"), args[index + 1 :]))
    return keys or [k for k in [os.environ.get("VLLM_API_KEY")] if k]


def with_room_limits(flags: Sequence[str], gpu: bool) -> tuple[list[str], dict[str, str], str]:
    """FLAGS without `--room-limits VALUE` and `--adapters DIR`, and with the room-limits middleware
    (`local_server.room_limits`), unless VALUE is `off`; the environment the middleware reads (its limits, the API
    keys, the one folder a request's LoRA adapter may come from, where to import it from); and a line that says the
    limits. VALUE changes the machine's defaults: `max_frames=121,max_steps=20`."""
    args = list(flags)
    value = _pop_flag(args, "--room-limits")
    adapters = _pop_flag(args, "--adapters")
    if adapters is not None and not os.path.isdir(adapters):
        raise ServeError(f"--adapters {adapters}: no such folder. Give the folder the room's LoRA adapters are in.")
    if value == "off":
        return args, {room_limits.ENV: "off"}, "room limits: off (--room-limits off)"
    try:
        limits = room_limits.DEFAULTS["gpu" if gpu else "cpu"].with_overrides(value or "")
    except ValueError as exc:
        raise ServeError(str(exc)) from exc
    path = os.pathsep.join(filter(None, [str(REPOSITORY / "support"), os.environ.get("PYTHONPATH")]))
    env = {
        room_limits.ENV: limits.to_env(),
        room_limits.KEYS_ENV: json.dumps(_api_keys(args)),
        room_limits.ADAPTERS_ENV: os.path.realpath(adapters) if adapters else "",
        "PYTHONPATH": path,
    }
    line = f"room limits for a {'GPU' if gpu else 'CPU'} server: {limits.describe()} (change with --room-limits)"
    line += f"; LoRA adapters from {env[room_limits.ADAPTERS_ENV]} only" if adapters else "; no LoRA adapters"
    return [*args, "--middleware", f"{room_limits.__name__}.RoomLimits"], env, line


USAGE = """Usage: bash scripts/serve_vllm_omni.sh MODEL [--replicas N] [--room-limits off|NAME=N,...] [--adapters DIR]
       [vllm flags...]
       bash scripts/serve_vllm_omni.sh --install   (only create the server environment, e.g. before a workshop)
--replicas N serves N engines of the model behind the one URL, one per GPU (vLLM-Omni's num_replicas): N
requests run at once, where one engine runs one at a time.
--room-limits: every server refuses, with a 400 naming the field, a request over the room's limits (pixels a frame,
frames, pixel-frames a call, steps, seconds of sound, MiB a file) or with a value out of its range, and a
participant's request beyond max_queued waiting or running (429); a generation past max_run_s seconds gets 504.
The defaults admit every preset and tier the notebooks offer on the machine; `off` turns them off, and NAME=N,...
changes some: max_pixels, max_frames, max_pixel_frames, max_steps, max_upload_mib, max_queued, max_sound_s,
max_run_s.
--adapters DIR: a request's LoRA adapter (its `lora` field's path, on this machine) is taken only from DIR: any
other path, `..` and links out of it included, gets a 400; without it the room loads no adapter."""


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv in (["-h"], ["--help"]):
        print(__doc__.split("\n\n")[0] + "\n\n" + USAGE)
        return 0
    if argv == ["--install"]:
        try:
            say(f"the server environment is {ensure_environment(wants_gpu())}")
        except CookbookError as exc:
            say(f"error: {exc}")
            return 2
        return 0
    if not argv or argv[0].startswith("-"):
        say(f"error: the first argument is MODEL (tiny, a checkpoint folder or a Hugging Face id).\n{USAGE}")
        return 2
    model, flags = argv[0], argv[1:]
    try:
        host, port = _flag(flags, "--host") or "127.0.0.1", _flag(flags, "--port") or str(DEFAULT_PORT)
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ServeError(f"--port {port} is not a TCP port: give a number from 1 to 65535.")
        check_exposure(host, flags)
        check_port(host, int(port))
        gpu = wants_gpu()
        flags, room_env, room_line = with_room_limits(flags, gpu)
        args = command(model, with_replicas(flags, gpu), gpu)
        env = ensure_environment(gpu)
    except CookbookError as exc:
        say(f"error: {exc}")
        return 2
    say("$ " + " ".join(args))
    say(room_line)
    os.environ.update(room_env)
    if not gpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # a GPU left visible would take the plugin's place
    executable = str(env / "bin" / "vllm")
    os.execv(executable, [executable, *args[1:]])
    return 0  # not reached: the server replaces this process


if __name__ == "__main__":
    sys.exit(main())
