"""For the notebook: the `torchrun` command of a request, what a machine with too few GPUs lacks, and running it.

    request = Request(model=MODEL, gpus=GPUS, modes=MODES, preset=PRESET, tiers=TIER, speed=SPEED, seed=SEED)
    print(" ".join(torchrun_command(request)))
    missing = gpu_shortfall(request)
    run_dir = None if missing else run_parallel(request)  # streams the ranks' output; the run folder rank 0 wrote

The runner publishes its run folder in a small JSON file whose path the launcher chooses, so the folder is never
read out of the printed output.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from checkpoints.names import TINY_MODEL_NAME
from checkpoints.random_weights import NANO_MIN_GPU_GIB
from helpers.errors import CookbookError
from tuning.several_gpus.request import Request
from tuning.several_gpus.runner import failure_path

# Flags the printed command always shows, so that it reads on its own; other fields only when not the default.
SHOWN_FLAGS: frozenset[str] = frozenset({"model", "gpus", "modes", "preset", "speed", "seed", "output_dir"})
# Lines of output kept for the error message of a failed run.
TAIL_LINES = 40


class ParallelRunError(CookbookError, RuntimeError):
    """The parallel run failed; the message holds the end of its output."""


def torchrun() -> list[str]:
    """The `torchrun` beside this Python (a virtual environment's), else the same launcher through `python -m`."""
    beside = Path(sys.executable).with_name("torchrun")
    return [str(beside)] if beside.is_file() else [sys.executable, "-m", "torch.distributed.run"]


def torchrun_command(request: Request) -> list[str]:
    """The command that runs `request`, as an argument list: one process per GPU on this machine."""
    request.check()
    flags = request.arguments(shown=SHOWN_FLAGS)
    return [
        *torchrun(),
        "--standalone",
        "--nproc-per-node",
        str(request.gpus),
        "-m",
        "tuning.several_gpus",
        *flags,
    ]


def gpu_shortfall(request: Request) -> str | None:
    """None when this machine can run `request`; otherwise what it lacks and what to do instead, as text to print."""
    import torch

    request.check()
    gpus = request.gpus
    if request.device_type() == "cpu":
        if request.model == TINY_MODEL_NAME:
            return (
                f"GPUS={gpus} runs one process per GPU, and this machine has no CUDA GPU. With MODEL="
                f"'{TINY_MODEL_NAME}' the command above also runs on CPU cores (processes over gloo) as a check of "
                "the code path; for speed it needs GPUs."
            )
        return (
            f"GPUS={gpus} runs one process per GPU, and this machine has no CUDA GPU. On CPU cores only "
            f"MODEL='{TINY_MODEL_NAME}' runs in parallel (to check the code path, over gloo). For "
            f"MODEL={request.model!r}: a machine with {gpus} NVIDIA GPUs of {NANO_MIN_GPU_GIB} GiB or more, where "
            "this notebook (or the command above) runs as it is; or a vLLM-Omni server on such a machine "
            "(run_with_vllm_omni.ipynb)."
        )
    have = torch.cuda.device_count()
    if have >= gpus:
        return None
    name = torch.cuda.get_device_name(0) if have else "none"
    return (
        f"GPUS={gpus} runs one process per GPU, and this machine has {have} ({name}). Each GPU holds a whole copy "
        f"of the model, so it needs {gpus} GPUs of {NANO_MIN_GPU_GIB} GiB or more; there, this notebook (or the "
        f"command above) runs as it is. Here: GPUS={max(have, 1)} runs on this machine's GPU{'s' * (have > 1)}, "
        "or a vLLM-Omni server on a larger machine takes the same request (run_with_vllm_omni.ipynb)."
    )


def run_parallel(request: Request, echo: Callable[[str], None] = print) -> Path:
    """Run `request` with torchrun, passing each line of its output to `echo`; returns the run folder rank 0 wrote.

    Raises `ParallelRunError` with the end of the output when a rank fails. Interrupting (the notebook's Stop)
    ends the run: torchrun passes the signal on to every rank.
    """
    with tempfile.TemporaryDirectory(prefix="cosmos3-parallel-") as folder:
        published = Path(folder) / "run.json"
        command = torchrun_command(dataclasses.replace(request, publish=str(published)))
        tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        try:
            for line in process.stdout or ():
                line = line.rstrip("\n")
                tail.append(line)
                echo(line)
            code = process.wait()
        except BaseException:
            process.terminate()
            process.wait()
            raise
        facts = json.loads(published.read_text()) if published.is_file() else {}
        if code != 0 or not facts.get("done"):
            where = f" It wrote into {facts['run_dir']}." if facts else ""
            errors = [Path(failure_path(str(published), rank)) for rank in range(request.gpus)]
            causes = "".join(f"\n{e.read_text()}" for e in errors if e.is_file())
            raise ParallelRunError(
                f"The parallel run failed (torchrun exited with {code}).{where}{causes}\n\nIts last lines:\n"
                + "\n".join(tail)
            )
        return Path(facts["run_dir"])
