"""Where a test run's time goes on this machine, by cause: a fresh interpreter's imports, a Jupyter kernel's start,
loading the tiny checkpoint, one smoke video split into its transformer, autoencoder and MP4 writing, an action chunk's
autoencoder, and the real vLLM-Omni server's start and what it costs while it waits.

The suite is made of these: every notebook run is a kernel and the set-up cell's imports, every served notebook a
server or two, and the generations themselves are small at `tiny`. Run on an idle machine:

    python support/benchmarks/run_costs.py --out support/benchmarks/results/run_costs_cpu.json
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import result_file

# What a Diffusers notebook's set-up cell imports first, each on top of the one before, in a fresh interpreter.
IMPORTS = (
    "torch",
    "diffusers",
    "diffusers.hooks.layerwise_casting",  # imports peft, and with it most of transformers
    "diffusers.models.autoencoders.autoencoder_cosmos3_audio",
    "cosmos3_audiovisual.modes",
    "matplotlib.pyplot",
)


def import_seconds() -> dict[str, float]:
    code = (
        "import importlib, sys, time\n"
        "for name in sys.argv[1:]:\n"
        "    start = time.perf_counter(); importlib.import_module(name)\n"
        "    print(name, round(time.perf_counter() - start, 2))\n"
    )
    lines = subprocess.run([sys.executable, "-c", code, *IMPORTS], capture_output=True, text=True, check=True).stdout
    return {name: float(seconds) for name, seconds in (line.split() for line in lines.splitlines())}


def kernel_start_seconds() -> float:
    from jupyter_client.manager import start_new_kernel

    start = time.perf_counter()
    manager, client = start_new_kernel(kernel_name="python3")
    ready = time.perf_counter() - start
    client.stop_channels()
    manager.shutdown_kernel(now=True)
    return ready


@contextmanager
def timed(totals: dict[str, float], name: str, owner: Any, method: str) -> Iterator[None]:
    """Adds the time spent in `owner.method` to `totals[name]` while the block runs."""
    original: Callable = getattr(owner, method)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            totals[name] = totals.get(name, 0.0) + time.perf_counter() - start

    setattr(owner, method, wrapper)
    try:
        yield
    finally:
        delattr(owner, method)


def generation_seconds() -> dict[str, float]:
    import torch
    from diffusers import Cosmos3OmniPipeline
    from diffusers.utils import export_to_video

    import checkpoints
    from helpers import audiovisual_settings, prompts
    from tuning import notebook_calls

    folder = checkpoints.resolve("tiny", device="cpu").path
    start = time.perf_counter()
    pipe = Cosmos3OmniPipeline.from_pretrained(folder, dtype=torch.float32, enable_safety_checker=False)
    costs = {"load_tiny_s": time.perf_counter() - start}
    pipe.set_progress_bar_config(disable=True)
    generate = notebook_calls.define("run_with_diffusers.ipynb", pipe=pipe)["generate"]  # the notebook's own call
    s = audiovisual_settings.settings_for("t2v", "smoke", seed=0)
    generate(s, prompts.prompt_text(s))  # the first call pays one-time costs
    totals: dict[str, float] = {}
    with timed(totals, "transformer", pipe.transformer, "forward"), timed(totals, "vae_decode", pipe.vae, "decode"):
        start = time.perf_counter()
        video = generate(s, prompts.prompt_text(s), output_type="pil").video
        costs["smoke_t2v_s"] = time.perf_counter() - start
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder_out:
        export_to_video(video, str(Path(folder_out) / "t2v.mp4"), fps=s.fps)
    costs["write_mp4_s"] = time.perf_counter() - start
    costs |= {f"smoke_t2v_{name}_s": seconds for name, seconds in totals.items()}
    chunk = torch.randn(1, 3, 33, 256, 320)  # an action chunk at the smoke tier: 33 frames at 320x256
    with torch.no_grad():
        start = time.perf_counter()
        latents = pipe.vae.encode(chunk).latent_dist.mode()
        costs["action_chunk_vae_encode_s"] = time.perf_counter() - start
        start = time.perf_counter()
        pipe.vae.decode(latents)
        costs["action_chunk_vae_decode_s"] = time.perf_counter() - start
    return {name: round(seconds, 3) for name, seconds in costs.items()}


def _tree_cpu_seconds(pid: int) -> float:
    """User and system time of `pid` and its children, from /proc."""
    table = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True, check=True).stdout.split()
    children: dict[int, list[int]] = {}
    for child, parent in zip(table[::2], table[1::2], strict=True):
        children.setdefault(int(parent), []).append(int(child))
    ticks, todo = 0, [pid]
    while todo:
        current = todo.pop()
        todo += children.get(current, [])
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def server_seconds(idle_s: float) -> dict[str, float]:
    from local_server.server import LocalServer

    start = time.perf_counter()
    with LocalServer.start("tiny", flags=["--no-guardrails"], progress=False) as server:
        ready = time.perf_counter() - start
        pid = server.process.pid
        before = _tree_cpu_seconds(pid)
        time.sleep(idle_s)
        idle = (_tree_cpu_seconds(pid) - before) / idle_s
    return {
        "server_start_s": round(ready, 1),
        "server_start_cpu_s": round(before, 1),
        "idle_server_cores": round(idle, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--idle-s", type=float, default=20.0, help="how long the started server is watched, idle")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        os.environ["COSMOS3_COOKBOOK_CACHE"] = cache  # the tiny checkpoint built afresh, as in a test session
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        result: dict[str, Any] = {"cpus": os.cpu_count(), "imports_s": import_seconds()}
        result["kernel_start_s"] = round(kernel_start_seconds(), 2)
        result |= generation_seconds()
        result |= server_seconds(args.idle_s)
    result["command"] = "python support/benchmarks/run_costs.py --out " + str(args.out)
    result_file.write(result, args.out)


if __name__ == "__main__":
    main()
