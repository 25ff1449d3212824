"""Wall time of a whole cookbook notebook on the tiny checkpoint, kernel start included: what a reader's "Run All"
at `MODEL="tiny"`, `PRESET="smoke"` costs.

    .venv/bin/python support/benchmarks/notebook_wall_time.py [--notebook action/run_with_diffusers.ipynb] [--repeats 3]
    .venv/bin/python support/benchmarks/notebook_wall_time.py --all --repeats 1

Each repeat is a fresh `papermill` process (interpreter start, kernel start, imports, checkpoint load, every
section; a vLLM-Omni notebook starts and stops its own server), timed from outside, with every other parameter at
the notebook's default. The tiny checkpoints are built into a fresh cache before timing, so their one-time build is
not counted, just as a reader's second run would not pay it. Results go to
support/benchmarks/results/<family>_<notebook>_cpu.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from checkpoints import random_weights
from cookbook_tools import notebooks
from helpers import environment
from helpers.assets import notebook_path

TARGETS_S = {"run_with_diffusers.ipynb": 60.0, "run_with_vllm_omni.ipynb": 90.0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notebook", default="run_with_diffusers.ipynb", choices=notebooks.NOTEBOOKS)
    parser.add_argument("--all", action="store_true", help="every notebook in turn, one result file each")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--preset", default="smoke")
    args = parser.parse_args()
    for name in notebooks.NOTEBOOKS if args.all else (args.notebook,):
        measure(name, args.repeats, args.preset)
    return 0


def measure(name: str, repeats: int, preset: str) -> None:
    results_dir = Path(__file__).resolve().parent / "results"
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "COSMOS3_COOKBOOK_CACHE": str(Path(tmp) / "cache")}
        os.environ["COSMOS3_COOKBOOK_CACHE"] = env["COSMOS3_COOKBOOK_CACHE"]
        for variant in ("tiny", "tiny-nosound"):  # the action notebooks' policy runs on the second
            random_weights.ensure_tiny_checkpoint(variant=variant)
        walls, per_mode = [], []
        for i in range(repeats):
            out = Path(tmp) / f"run{i}"
            out.mkdir()
            cmd = [
                sys.executable,
                "-m",
                "papermill",
                str(notebook_path(name)),
                str(out / "executed.ipynb"),
                "-k",
                notebooks.KERNEL,
                "--cwd",
                str(notebook_path(name).parent),
                "-p",
                "MODEL",
                "tiny",
                "-p",
                "PRESET",
                preset,
                "-p",
                "OUTPUT_DIR",
                str(out / "media"),
            ]
            start = time.perf_counter()
            done = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(f"papermill failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
            walls.append(time.perf_counter() - start)
            manifest = json.loads(next((out / "media").glob("*/manifest.json")).read_text())
            per_mode.append({o["mode"]: o["seconds"] for o in manifest["outputs"] if o["seconds"] is not None})
            print(f"repeat {i + 1}: {walls[-1]:.1f} s", flush=True)

    target = TARGETS_S.get(name)
    result = {
        "notebook": name,
        "model": "tiny",
        "preset": preset,
        "repeats": repeats,
        "wall_s": [round(w, 2) for w in walls],
        "median_wall_s": round(statistics.median(walls), 2),
        "target_s": target,
        "meets_target": target is None or statistics.median(walls) < target,
        "generation_s_by_mode_last_run": per_mode[-1],  # what the run recorded, for the calls that time themselves
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), **environment.versions()},
        "measured": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": f"python support/benchmarks/notebook_wall_time.py --notebook {name} --repeats {repeats}",
    }
    family = Path(name).parent.name or "audiovisual"
    path = results_dir / f"{family}_{Path(name).stem}_cpu.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(name, json.dumps({k: result[k] for k in ("median_wall_s", "target_s", "meets_target")}), f"-> {path}")


if __name__ == "__main__":
    raise SystemExit(main())
