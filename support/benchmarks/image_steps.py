"""Where a `SPEED="fast"` image step's time goes: the GPU's time inside the step's CUDA graphs against the step's wall
time (the rest is the scheduler, guidance, and the GPU waiting for the host), and the places where the host
waits for the GPU.

Per tier, in one process: a warm-up image, then a timed image (50 steps, as gpu_benchmark.py), during which each
graph replay is bracketed by CUDA events; then a short image (4 steps) under `torch.cuda.set_sync_debug_mode`, which
reports every call that makes the host wait for the GPU, counted by source line.

    python support/benchmarks/image_steps.py --out support/benchmarks/results/image_steps_h200.json  # Nano, random
    python support/benchmarks/image_steps.py --arch tiny --device cpu --tiers 256p --steps 3 --out steps_cpu.json
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from gpu_benchmark import StepClock, build_pipeline, speed_switches, tier_of  # noqa: E402

from helpers import audiovisual_settings, prompts  # noqa: E402
from tuning import (
    notebook_calls,  # noqa: E402
    pipelines,  # noqa: E402
)


def image(pipe, clock: StepClock, tier: str, steps: int) -> None:
    s = audiovisual_settings.settings_for("t2i", "published", tier=tier_of(tier), num_inference_steps=steps, seed=1234)
    clock.reset()
    call = notebook_calls.define("run_with_diffusers.ipynb", pipe=pipe)["generate"]  # the notebook's own `generate`
    call(s, prompts.prompt_text(s), prompts.negative_prompt(s.mode), callback_on_step_end=clock.on_step_end)


def host_waits(pipe, clock: StepClock, tier: str, steps: int) -> dict[str, float]:
    """Per step, the source lines (diffusers' and ours) whose calls made the host wait for the GPU."""
    import torch

    sites: collections.Counter[str] = collections.Counter()

    def record(*_: Any, **__: Any) -> None:
        frames = [f for f in traceback.extract_stack()[:-1] if "warnings" not in f.filename]
        # The innermost frame outside torch: the line that asked for a value on the host.
        caller = next(f for f in reversed(frames) if "/torch/" not in f.filename)
        sites[f"{Path(caller.filename).name}:{caller.lineno} {caller.name}"] += 1

    show, sync = warnings.showwarning, clock.sync
    warnings.showwarning, clock.sync = record, (lambda: None)  # the clock's own waits are not the pipeline's
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            image(pipe, clock, tier, steps)
    finally:
        torch.cuda.set_sync_debug_mode("default")
        warnings.showwarning, clock.sync = show, sync
    return {site: round(n / steps, 2) for site, n in sites.most_common()}


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    pipe = build_pipeline(args.arch, args.device)
    pipelines.apply(pipe, speed_switches("fast"))
    clock = StepClock(pipe)
    cuda = torch.cuda.is_available() and args.device == "cuda"
    events: list[tuple[Any, Any]] = []
    replay = torch.cuda.CUDAGraph.replay

    def timed_replay(graph) -> None:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        replay(graph)
        end.record()
        events.append((start, end))

    rows = []
    for tier in args.tiers.split(","):
        image(pipe, clock, tier, args.steps)  # compiles and records the graphs
        events.clear()
        torch.cuda.CUDAGraph.replay = timed_replay
        try:
            start = time.perf_counter()
            image(pipe, clock, tier, args.steps)
            total = time.perf_counter() - start
        finally:
            torch.cuda.CUDAGraph.replay = replay
        walls = [b - a for a, b in zip(clock.step_ends, clock.step_ends[1:], strict=False)]
        row: dict[str, Any] = {
            "tier": tier,
            "steps": args.steps,
            "total_s": round(total, 3),
            "first_step_s": round(clock.step_ends[0] - clock.first_forward, 4),
            "step_wall_ms": round(statistics.median(walls) * 1e3, 2),
        }
        if events:
            gpu = [a.elapsed_time(b) for a, b in events]  # ms; cond and uncond alternate, step 0 first
            cond, uncond = statistics.median(gpu[2::2]), statistics.median(gpu[3::2])
            row.update(
                replays=len(gpu),
                step0_graphs_ms=[round(gpu[0], 2), round(gpu[1], 2)],
                cond_graph_ms=round(cond, 2),
                uncond_graph_ms=round(uncond, 2),
                outside_graphs_ms=round(row["step_wall_ms"] - cond - uncond, 2),
            )
        if cuda:
            row["host_waits_per_step"] = host_waits(pipe, clock, tier, 4)
        print(json.dumps(row), flush=True)
        rows.append(row)
    return {
        "arch": args.arch,
        "device": torch.cuda.get_device_name() if cuda else args.device,
        "torch": torch.__version__,
        "command": " ".join(["support/benchmarks/image_steps.py", *sys.argv[1:]]),
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", default="nano", help="nano (random weights) or tiny")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiers", default="256p,480p,720p")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    result = run(args)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
