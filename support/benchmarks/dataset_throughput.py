"""How fast the dataset notebooks make a dataset: jobs a minute, measured by running the notebooks themselves.

    .venv/bin/python support/benchmarks/dataset_throughput.py --cpu
    python support/benchmarks/dataset_throughput.py --gpu --out <folder>

`--cpu`, on this machine at `MODEL="tiny"`, `PRESET="smoke"` and the bundled spec (24 jobs): the Diffusers notebook
in one kernel, and the vLLM-Omni notebook against one real server, two servers (`BASE_URL` lists both), and one
server with two engines behind its URL (`serve_vllm_omni.sh --replicas 2`). Each layout makes the dataset into a
fresh `OUTPUT_DIR`; its rate is the notebook's own count of the loop ("made 24 of 24 in X min"). Results:
support/benchmarks/results/dataset_cpu.json, and the seconds of a job per mode that the notebooks' estimate uses
(`cosmos3_dataset.dataset_spec.MEASURED_SECONDS`).

`--gpu`, at Nano's size (`nano-random`) on a CUDA GPU, with SPEED="fast": the Diffusers notebook's cells run in this
process (`notebook_cells.py`, no Jupyter kernel needed) on a spec of text-to-video jobs at 480p (NVIDIA's 189 frames
and 35 steps), and a fresh process times what one process per video would pay before each video: starting Python,
importing diffusers and loading the pipeline onto the GPU. Written to `--out`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import result_file

from helpers import environment

BENCHMARKS = Path(__file__).resolve().parent
REPOSITORY = BENCHMARKS.parents[1]
DIFFUSERS, VLLM = "dataset/run_with_diffusers.ipynb", "dataset/run_with_vllm_omni.ipynb"
KEY = "benchmark-key"
# The GPU spec: one scene, one variation axis of three values, text to video at 480p as NVIDIA publishes it.
GPU_SPEC = {
    "name": "throughput",
    "preset": "published",
    "tier": 480,
    "modes": ["t2v"],
    "seeds": [0],
    "scenes": [
        {
            "name": "workbench",
            "prompt": str(REPOSITORY / "cookbooks/cosmos3/generator/audiovisual/assets/prompts/i2v.json"),
        }
    ],
    "variations": {
        "lighting": {
            "field": "lighting.conditions",
            "values": {
                "noon": "Flat, even daylight from an overcast sky at noon",
                "low_sun": "Low golden sun from the left, long warm shadows",
                "night": "Dim night light from a single desk lamp",
            },
        }
    },
}
_MADE = re.compile(r"made (\d+) of (\d+) in ([\d.]+) min \(([\d.]+) a minute\)")


def _loop(printed: str) -> dict[str, float]:
    """The notebook's own count of its loop: "made 24 of 24 in 0.21 min (114.3 a minute)"."""
    made, jobs, minutes, rate = _MADE.search(printed).groups()
    return {"jobs": int(jobs), "made": int(made), "loop_minutes": float(minutes), "jobs_per_minute": float(rate)}


def _printed(executed: Path) -> str:
    document = json.loads(executed.read_text())
    return "".join(
        "".join(o.get("text", "")) for c in document["cells"] for o in c.get("outputs", []) if o.get("name") == "stdout"
    )


def _seconds_by_mode(folder: Path) -> dict[str, float]:
    outputs = json.loads((folder / "manifest.json").read_text())["outputs"]
    modes = sorted({o["settings"]["mode"] for o in outputs})
    return {m: round(statistics.median(o["seconds"] for o in outputs if o["settings"]["mode"] == m), 2) for m in modes}


def cpu() -> None:
    from cookbook_tools import notebooks
    from local_server.server import LocalServer

    layouts = {"one server": [[]], "two servers": [[], []], "one server, two replicas": [["--replicas", "2"]]}
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        executed = notebooks.execute(
            DIFFUSERS,
            out / "diffusers.ipynb",
            {"MODEL": "tiny", "PRESET": "smoke", "PROGRESS": False, "OUTPUT_DIR": str(out / "diffusers")},
        )
        results["diffusers, one kernel"] = {
            **_loop(_printed(executed)),
            "seconds_by_mode": _seconds_by_mode(out / "diffusers" / "workcells"),
        }
        for name, servers in layouts.items():
            with ExitStack() as stack:
                started = time.perf_counter()
                running = [
                    stack.enter_context(
                        LocalServer.start("tiny", api_key=KEY, flags=["--no-guardrails", *flags], progress=False)
                    )
                    for flags in servers
                ]
                start_s = time.perf_counter() - started
                folder = out / name.replace(" ", "_").replace(",", "")
                executed = notebooks.execute(
                    VLLM,
                    folder / "vllm.ipynb",
                    {
                        "MODEL": "tiny",
                        "PRESET": "smoke",
                        "PROGRESS": False,
                        "OUTPUT_DIR": str(folder),
                        "BASE_URL": ",".join(s.base_url for s in running),
                        "API_KEY": KEY,
                        "MAX_IN_FLIGHT": 2 * len(servers),
                    },
                )
                results[f"vllm-omni, {name}"] = {
                    **_loop(_printed(executed)),
                    "servers_start_s": round(start_s, 1),
                    "seconds_by_mode": _seconds_by_mode(folder / "workcells"),
                }
    result_file.write(
        {
            "what": "the bundled spec's 24 jobs (8 t2v, 8 i2v at 320x192, 9 frames; 8 t2i at 256x256; 2 steps) on the "
            "tiny checkpoint, made by each dataset notebook's loop; jobs_per_minute from the notebook's own count",
            "machine": {"cpu_cores": os.cpu_count(), **environment.report()},
            "results": results,
        },
        BENCHMARKS / "results" / "dataset_cpu.json",
    )


LOAD = """
import time
started = time.perf_counter()
import torch
from diffusers import Cosmos3OmniPipeline
imported = time.perf_counter()
pipe = Cosmos3OmniPipeline.from_pretrained({path!r}, dtype=torch.bfloat16, enable_safety_checker=False,
                                           use_native_flow_schedule=True).to("cuda")
torch.cuda.synchronize()
print({{"import_s": imported - started, "load_s": time.perf_counter() - imported}})
"""


def gpu(out: Path) -> None:
    import notebook_cells

    from checkpoints import random_weights

    out.mkdir(parents=True, exist_ok=True)
    spec = out / "spec.json"
    spec.write_text(json.dumps(GPU_SPEC))
    arguments = [str(REPOSITORY / "cookbooks/cosmos3/generator" / DIFFUSERS), "--out", str(out)]
    for parameter in ("MODEL=nano-random", "SPEED=fast", f"SPEC={spec}", f"OUTPUT_DIR={out / 'datasets'}"):
        arguments += ["-p", parameter]
    try:
        notebook_cells.main([*arguments, "-p", "PROGRESS=False"])
    except ModuleNotFoundError as exc:  # a GPU machine without `datasets`: the cells after the loop need it
        if exc.name != "datasets":
            raise
        print("stopped at the cell that loads the dataset with `datasets`, which this machine lacks")
    outputs = json.loads((out / "manifest.json").read_text())["outputs"]
    seconds = [o["seconds"] for o in outputs]
    warm = statistics.median(seconds[1:])
    path = random_weights.ensure("nano-random", device="cuda")
    started = time.perf_counter()
    answer = subprocess.run(
        [sys.executable, "-c", LOAD.format(path=str(path))], capture_output=True, text=True, check=True
    )
    process_s = time.perf_counter() - started
    load = eval(answer.stdout.strip().splitlines()[-1])  # noqa: S307 - the dict our own child printed
    result_file.write(
        {
            "what": "the dataset Diffusers notebook at Nano's size (nano-random), SPEED='fast', text to video at "
            "832x480, 189 frames, 35 steps, one pipeline for every job; and what a fresh process pays before a video",
            "machine": environment.report(),
            "job_seconds": seconds,
            "first_job_s": seconds[0],
            "warm_job_s": round(warm, 1),
            "videos_per_hour": round(3600 / warm, 1),
            "fresh_process": {"total_s": round(process_s, 1), **{k: round(v, 1) for k, v in load.items()}},
            "saved_per_video_s": round(process_s + seconds[0] - warm, 1),
            "loop": _loop((out / "printed.txt").read_text()),
        },
        out / "dataset_gpu.json",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--cpu", action="store_true")
    where.add_argument("--gpu", action="store_true")
    parser.add_argument("--out", type=Path, default=BENCHMARKS / "results" / "dataset_gpu")
    args = parser.parse_args()
    cpu() if args.cpu else gpu(args.out)


if __name__ == "__main__":
    main()
