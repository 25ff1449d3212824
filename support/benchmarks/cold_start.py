"""The first generation in a fresh process: `SPEED="none"`, then `"fast"` with empty compile caches (cold), then
`"fast"` again with the caches the cold run filled (a second kernel, or the next day's). Each run is its own Python
process, as a new notebook kernel is: it builds the model, turns the switches on, and times its first generation
and then a second one (the steady time). The caches sit in one folder given to every run (`TORCHINDUCTOR_CACHE_DIR`,
FlashAttention-4's kernels under it); the cold run starts with it empty.

    python support/benchmarks/cold_start.py --out support/benchmarks/results/cold_start_h200.json  # Nano, random
    python support/benchmarks/cold_start.py --arch tiny --device cpu --frames 9 --steps 3 --out cold_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUN = """
import json, sys, time
sys.path.insert(0, "support/benchmarks")
from gpu_benchmark import StepClock, build_pipeline, generate, speed_switches
from tuning import pipelines
arch, device, speed_name, mode, tier, frames, steps, count = sys.argv[1:9]
started = time.perf_counter()
pipe = build_pipeline(arch, device)
pipelines.apply(pipe, speed_switches(speed_name))
clock = StepClock(pipe)
result = {"build_s": time.perf_counter() - started}
for name in ("first", "second")[: int(count)]:
    row, _ = generate(pipe, clock, mode, tier, int(frames), int(steps), int(steps))
    result[name] = {k: row[k] for k in ("total_s", "setup_s", "first_step_s", "second_step_s", "median_step_s",
                                        "decode_s", "size", "frames")}
print(json.dumps(result))
"""


def one(args: argparse.Namespace, speed: str, cache: Path, count: int) -> dict[str, object]:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), "TRITON_CACHE_DIR": str(cache / "triton")}
    env.pop("FLASH_ATTENTION_CUTE_DSL_CACHE_DIR", None)  # under the cache folder, as the notebook keeps it
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            RUN,
            args.arch,
            args.device,
            speed,
            args.mode,
            args.tier,
            str(args.frames),
            str(args.steps),
            str(count),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"the {speed} run failed:\n{out.stderr[-3000:]}")
    result = json.loads(out.stdout.splitlines()[-1])
    return {**result, "build_s": round(result["build_s"], 2)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", choices=("nano", "tiny"), default="nano")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--mode", default="t2v")
    parser.add_argument("--tier", default="256p")
    parser.add_argument("--frames", type=int, default=189)
    parser.add_argument("--steps", type=int, default=35)
    parser.add_argument("--warm-runs", type=int, default=1, help="fast runs after the cold one")
    parser.add_argument("--also", default="", help="more warm runs, e.g. fast-flash_attention (fast without a switch)")
    parser.add_argument("--out", default="cold_start.json")
    args = parser.parse_args(argv)
    cache = Path(tempfile.mkdtemp(prefix="cosmos3-compile-cache-"))
    rows = []
    try:
        runs = [("none", "none"), ("fast, cold", "fast")] + [("fast, warm", "fast")] * args.warm_runs
        runs += [(f"{name}, warm", name) for name in args.also.split(",") if name]
        for name, speed in runs:
            started = time.perf_counter()
            rows.append({"run": name, "speed": speed, **one(args, speed, cache, 2 if name == "fast, warm" else 1)})
            rows[-1]["process_s"] = round(time.perf_counter() - started, 1)
            print(json.dumps(rows[-1]), flush=True)
        kept = {p.name: sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) for p in cache.iterdir()}
        print("compile cache, bytes per folder:", kept, flush=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    result = {
        "what": f"the first {args.mode} generation in a fresh process ({args.frames} frames, {args.steps} steps, "
        f"{args.tier}), {args.arch} on {args.device}; 'cold': compile caches empty, 'warm': the caches the cold run "
        "left; each run's setup, first and second step and decode",
        "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
