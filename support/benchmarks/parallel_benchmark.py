"""Time text-to-video through the parallel Diffusers runner on N GPUs, with one GPU's time in the same file.

Nano's architecture with random weights (`MODEL="nano-random"`, built once on the GPU by
`checkpoints.random_weights` and loaded with `from_pretrained`), 189 frames, 35 steps, `SPEED="fast"`, at each tier,
through `tuning.several_gpus` (one torchrun command per GPU count, all tiers in it). Each size is first
generated untimed at 2 steps (compilation, cuDNN tuning); the timed generation then runs all steps, and its time is
rank 0's from the pipe call to the decoded video, as the run's manifest records it. Rows are keyed by (model, GPUs,
degrees, tier) and merged into `--out`, so GPU counts can be run in separate commands; each row is compared with the
1-GPU row of its tier.

    python support/benchmarks/parallel_benchmark.py --gpus 1 --out support/benchmarks/results/parallel_h200.json
    python support/benchmarks/parallel_benchmark.py --gpus 2,4 --out support/benchmarks/results/parallel_h200.json
    python support/benchmarks/parallel_benchmark.py --model tiny --device cpu --gpus 1,2 --tiers 256p --frames 9 \\
        --steps 2 --out parallel_cpu.json                                                # a smoke check on a CPU
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from helpers import audiovisual_settings, runs
from tuning.several_gpus.launch import run_parallel
from tuning.several_gpus.request import Request

SEED = 1234
WARMUP_STEPS = 2
# Targets for 720p, and published multi-GPU times for Nano text-to-video at 720p, 189 frames, 35 steps (seconds).
GOALS_720P = {2: {"max_s": 105.0, "min_speedup": 1.9}, 4: {"max_s": 60.0}}
PUBLISHED_720P = {
    "nvidia_pytorch_4x_h200_s": 67.48,
    "nvidia_pytorch_8x_h200_s": 41.26,
    "vllm_omni_4x_b200_s": 35.29,
    "ours_fast_1x_h200_s": 201.8,
}


def request_for(args: argparse.Namespace, gpus: int, media: Path) -> Request:
    return Request(
        model=args.model,
        gpus=gpus,
        modes="t2v",
        preset="published",
        tiers=",".join(t.removesuffix("p") for t in args.tiers.split(",")),
        speed=args.speed,
        seed=SEED,
        output_dir=str(media),
        device=args.device,
        num_frames=args.frames,
        steps=args.steps,
        warmup_steps=min(WARMUP_STEPS, args.steps),
        decode=args.decode,
    ).check()


def rows_of(run_dir: Path, request: Request, wall_s: float) -> list[dict[str, Any]]:
    """One row per tier, from the manifest the run wrote."""
    manifest = json.loads((run_dir / runs.MANIFEST_NAME).read_text())
    info = manifest["info"]
    rows = []
    for output in manifest["outputs"]:
        size = (output["settings"]["width"], output["settings"]["height"])
        tier = next((f"{t}p" for t, sizes in audiovisual_settings.SIZES.items() if size in sizes.values()), "")
        rows.append(
            {
                "model": request.model,
                "gpus": request.gpus,
                "cfg_degree": info["cfg_degree"],
                "context_degree": info["context_degree"],
                "vae_decode": info["vae_decode"],
                "device": info.get("gpu_name", "cpu"),
                "speed": request.speed,
                "tier": tier,
                "size": f"{output['width']}x{output['height']}",
                "frames": output["num_frames"],
                "steps": output["settings"]["num_inference_steps"],
                "seconds": output["seconds"],
                "ranks_latent_deviation": output.get("ranks_latent_deviation", 0.0),
                "command_wall_s": round(wall_s, 1),
            }
        )
    return rows


def compare(rows: list[dict[str, Any]]) -> None:
    """Add each row's speedup over the 1-GPU row of its model, tier, frames and steps, and the 720p goals."""
    single = {(r["model"], r["tier"], r["frames"], r["steps"]): r["seconds"] for r in rows if r["gpus"] == 1}
    for r in rows:
        one = single.get((r["model"], r["tier"], r["frames"], r["steps"]))
        r["single_gpu_s"] = one
        r["speedup"] = round(one / r["seconds"], 3) if one else None
        goal = GOALS_720P.get(r["gpus"]) if r["tier"] == "720p" and r["frames"] == 189 and r["steps"] == 35 else None
        if goal:
            r["goal"] = goal
            r["meets_goal"] = r["seconds"] <= goal["max_s"] and (r["speedup"] or 0) >= goal.get("min_speedup", 0)


def merge(path: Path, new: list[dict[str, Any]], command: str) -> dict[str, Any]:
    """`path`'s results with `new` rows in place of those with the same model, GPUs, degrees and tier."""
    results = json.loads(path.read_text()) if path.is_file() else {"rows": [], "commands": []}

    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return r["model"], r["gpus"], r["cfg_degree"], r["context_degree"], r["tier"], r["frames"], r["steps"]

    fresh = {key(r) for r in new}
    rows = [r for r in results["rows"] if key(r) not in fresh] + new
    rows.sort(key=lambda r: (r["model"], r["tier"], r["gpus"]))
    compare(rows)
    return {
        "what": "Cosmos 3 text-to-video through tuning.several_gpus (torchrun), SPEED as in each row",
        "published_720p": PUBLISHED_720P,
        "rows": rows,
        "commands": [*results["commands"], command],
    }


def table(results: dict[str, Any]) -> str:
    lines = [
        "| model | tier | GPUs | CFG x context | decode | seconds | 1 GPU (s) | speedup | goal met |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        lines.append(
            f"| {r['model']} | {r['tier']} | {r['gpus']} | {r['cfg_degree']} x {r['context_degree']} | "
            f"{r['vae_decode']} | {r['seconds']} | {r['single_gpu_s'] or ''} | {r['speedup'] or ''} | "
            f"{r.get('meets_goal', '')} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="nano-random")
    parser.add_argument("--gpus", default="1,2", help="comma-separated GPU counts, one torchrun command each")
    parser.add_argument("--tiers", default="256p,480p,720p")
    parser.add_argument("--frames", type=int, default=189)
    parser.add_argument("--steps", type=int, default=35)
    parser.add_argument("--speed", default="fast")
    parser.add_argument("--decode", default="split", help="split: every rank decodes rows; rank0: rank 0 alone")
    parser.add_argument("--device", default="cuda", help="cuda, or cpu for a smoke check with --model tiny")
    parser.add_argument("--media-dir", default="", help="where the runs write their videos (default: a temp dir)")
    parser.add_argument("--out", default="parallel_benchmark.json")
    args = parser.parse_args(argv)

    out = Path(args.out)
    with tempfile.TemporaryDirectory(prefix="parallel-benchmark-") as scratch:
        media = Path(args.media_dir or scratch)
        for gpus in [int(n) for n in args.gpus.split(",") if n.strip()]:
            request = request_for(args, gpus, media)
            started = time.perf_counter()
            run_dir = run_parallel(request)
            new = rows_of(run_dir, request, time.perf_counter() - started)
            results = merge(out, new, " ".join(sys.argv))
            out.write_text(json.dumps(results, indent=1))
            for row in new:
                print(json.dumps(row), flush=True)
    print(table(json.loads(out.read_text())))


if __name__ == "__main__":
    main()
