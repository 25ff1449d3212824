"""Time Cosmos 3 Nano (random weights) through the Diffusers pipeline, baseline against each `SPEED` value.

Builds the Nano architecture (`Cosmos3OmniTransformer()` defaults, 15.2 B parameters) and the real-size Wan 2.2 VAE
with random weights directly on the GPU in bf16, an exact Qwen tokenizer offline (from the Qwen vocabulary committed
in support/checkpoints/), and sends our real structured JSON prompts and negative prompt, so text lengths are
the cookbook's. Everything runs through the audiovisual Diffusers notebook's own `generate` (its `call` cell).

Per (mode, tier, SPEED value) it reports the total, the median step, the VAE decode, and peak GPU memory; it prints
NVIDIA's published H200 times beside ours. Tiers timed with fewer than the full steps are extrapolated:
total = setup + first step + (steps - 1) x median step + decode; the results mark them `extrapolated`.
The baseline runs first; `fast` and `turbo` add switches to the same model (their outputs are compared with the
baseline's); the memory values `low_vram` and `min_vram` each rebuild the same random weights (same seed) and run
under a memory cap (`torch.cuda.set_per_process_memory_fraction`).

    python support/benchmarks/gpu_benchmark.py --out results.json                   # on an H200, the published settings
    python support/benchmarks/gpu_benchmark.py --arch tiny --tiers 256p --frames 9 --plan 256p:3 --device cpu  # CPU
    python support/benchmarks/gpu_benchmark.py --table results.json [more.json ...] [--only fast]   # a markdown table
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import result_file

from checkpoints import random_weights
from cosmos3_audiovisual import modes
from helpers import audiovisual_settings, prompts, speeds
from tuning import notebook_calls
from tuning.pipelines import applied, apply, load_pipeline, skipped

# NVIDIA's published single-H200 Nano times (s), inference_benchmarks.md in NVIDIA/cosmos.
PUBLISHED = {
    ("t2v", "256p"): {"diffusers": 9.0, "vllm_omni": 6.79},
    ("t2v", "480p"): {"diffusers": 67.0, "vllm_omni": 58.14},
    ("t2v", "720p"): {"diffusers": 239.6, "vllm_omni": 208.36},
    ("t2i", "256p"): {"diffusers": 3.0, "vllm_omni": 1.57},
    ("t2i", "480p"): {"diffusers": 3.0, "vllm_omni": 1.52},
    ("t2i", "720p"): {"diffusers": 4.0, "vllm_omni": 2.60},
}
SEED = 1234
# The SPEED values that decide where the weights live: each runs on its own rebuilt pipeline under a memory cap.
MEMORY_SPEEDS = speeds.memory_values()


def build_pipeline(arch: str, device: str):
    """Nano's architecture with random weights built on `device`, or (`tiny`, for a CPU check) the tiny checkpoint."""
    if arch == "tiny":
        return load_pipeline("tiny", device=device)[0]
    # Loaded as the notebook loads a checkpoint: vLLM-Omni's schedule (the cost of a step does not depend on it).
    pipe = random_weights.build_nano_pipeline(device, use_native_flow_schedule=True)
    pipe.set_progress_bar_config(disable=True)
    return pipe


class StepClock:
    """Wall-clock marks (after a device sync) at the first transformer call and at the end of every step."""

    def __init__(self, pipe):
        import torch

        self.sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
        self.first_forward: float | None = None
        self.step_ends: list[float] = []
        pipe.transformer.register_forward_pre_hook(self._on_forward)

    def _on_forward(self, module, args):
        if self.first_forward is None:
            self.sync()
            self.first_forward = time.perf_counter()

    def on_step_end(self, pipe, step, timestep, kwargs):
        self.sync()
        self.step_ends.append(time.perf_counter())
        return kwargs

    def reset(self) -> None:
        self.first_forward, self.step_ends = None, []


def tier_of(label: str) -> int:
    """A tier as the results files name it ("480p"), as the settings take it (480)."""
    return int(str(label).removesuffix("p"))


def settings(mode: str, tier: str, frames: int | None, steps: int, seed: int = SEED):
    overrides: dict[str, Any] = {"tier": tier_of(tier), "num_inference_steps": steps}
    if mode != "t2i":
        overrides["num_frames"] = frames
    return audiovisual_settings.settings_for(mode, "published", seed=seed, **overrides)


def generate(
    pipe, clock: StepClock, mode: str, tier: str, frames: int | None, steps: int, full_steps: int, seed: int = SEED
):
    """One timed generation; returns its measurements and the output frames."""
    import numpy as np
    import torch

    s = settings(mode, tier, frames, steps, seed)
    extra = {"image": _image()} if mode == "i2v" else {}
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    clock.reset()
    start = time.perf_counter()
    call = notebook_calls.define("run_with_diffusers.ipynb", pipe=pipe)["generate"]  # the notebook's own `generate`
    out = call(
        s,
        prompts.prompt_text(s),
        prompts.negative_prompt(s.mode),
        enable_sound=s.enable_sound,
        callback_on_step_end=clock.on_step_end,
        **extra,
    )
    clock.sync()
    end = time.perf_counter()
    setup = clock.first_forward - start
    steps_s = np.diff([clock.first_forward, *clock.step_ends]).tolist()
    median = statistics.median(steps_s[1:] or steps_s)
    decode = end - clock.step_ends[-1]
    total = end - start if steps == full_steps else setup + steps_s[0] + (full_steps - 1) * median + decode
    row = {
        "mode": mode,
        "tier": tier,
        "size": s.size,
        "frames": s.num_frames,
        "steps_timed": steps,
        "steps": full_steps,
        "extrapolated": steps != full_steps,
        "total_s": round(total, 2),
        "setup_s": round(setup, 2),
        "first_step_s": round(steps_s[0], 3),
        "second_step_s": round(steps_s[1], 3) if steps > 1 else None,
        "median_step_s": round(median, 4),
        "step_s": [round(x, 3) for x in steps_s],
        "decode_s": round(decode, 2),
        "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if torch.cuda.is_available() else None,
        "reserved_gib": round(torch.cuda.max_memory_reserved() / 2**30, 2) if torch.cuda.is_available() else None,
    }
    return row, np.asarray(out.video, dtype=np.float32)


def _image():
    from helpers import media

    return media.load_image(modes.conditioning("i2v"))


def token_counts(pipe, mode: str, tier: str, frames: int | None) -> dict[str, int]:
    s = settings(mode, tier, frames, 1)
    cond, uncond = pipe.tokenize_prompt(
        prompts.prompt_text(s),
        prompts.negative_prompt(s.mode),
        num_frames=s.num_frames,
        height=s.height,
        width=s.width,
        fps=float(s.fps),
        add_resolution_template=False,
        add_duration_template=False,
    )
    return {"prompt_tokens": len(cond), "negative_tokens": len(uncond)}


def deviation(got, want) -> dict[str, float]:
    import numpy as np

    diff = np.abs(got - want)
    mse = float(np.mean(diff**2))
    return {
        "max_abs_dev": round(float(diff.max()), 5),
        "mean_abs_dev": round(float(diff.mean()), 6),
        "psnr_db": round(10 * np.log10(1.0 / mse), 2) if mse > 0 else float("inf"),
    }


def parse_plan(text: str) -> dict[str, int]:
    """`256p:35,480p:6` -> steps to time per tier."""
    return {tier: int(n) for tier, n in (item.split(":") for item in text.split(",") if item)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    device = args.device
    started = time.perf_counter()
    memory = [p for p in MEMORY_SPEEDS if p in args.speeds.split(",")]
    if memory:
        print(speeds.configure_allocator(memory[0]), flush=True)  # as the notebook does, before CUDA starts
    pipe = build_pipeline(args.arch, device)
    clock = StepClock(pipe)
    plan = parse_plan(args.plan)
    results: dict[str, Any] = {
        "arch": args.arch,
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "torch": torch.__version__,
        "diffusers": __import__("diffusers").__version__,
        "frames": args.frames,
        "fps": 24,
        "guidance_scale": 6.0,
        "seed": SEED,
        "command": " ".join(sys.argv),
        "versions": result_file.versions(),
        "rows": [],
    }
    out_path = Path(args.out)

    def save(row: dict[str, Any]) -> None:
        results["rows"].append(row)
        results["elapsed_s"] = round(time.perf_counter() - started, 1)
        out_path.write_text(json.dumps(results, indent=1))
        print(json.dumps(row), flush=True)

    def over_budget() -> bool:
        return time.perf_counter() - started > args.budget_s

    jobs = [(mode, tier) for mode in args.modes.split(",") for tier in args.tiers.split(",")]
    full = {mode: (50 if mode == "t2i" else args.steps) for mode in args.modes.split(",")}
    baseline: dict[tuple[str, str], Any] = {}
    wanted = args.speeds.split(",")
    # One short call first, so that one-time CUDA/cuBLAS set-up is not charged to the first measurement.
    generate(pipe, clock, jobs[0][0], jobs[0][1], args.frames, 1, 1)
    in_place = [p for p in wanted if p.split("-")[0] in ("baseline", "fast", "turbo")]
    warmed: set[tuple[str, str, tuple[str, ...]]] = set()
    full_speeds = set(args.full.split(",")) if args.full else set()
    for speed in in_place:
        apply(pipe, speed_switches(speed))
        for mode, tier in jobs:
            if over_budget():
                print(f"budget reached: skipping {speed} {mode} {tier}", flush=True)
                continue
            # A full-steps value runs the planned steps too, so its deviation is taken at the baseline's steps.
            # Images take seconds: always all their steps. Videos at the larger tiers: the planned steps.
            planned = full[mode] if mode == "t2i" else min(plan.get(tier, full[mode]), full[mode])
            timed = {planned, full[mode]} if speed in full_speeds else {planned}
            if speed == "turbo":
                timed = {full[mode]}  # step caching decides per step; only a full run measures it
            if not timed:
                continue
            # Compile for this shape outside the timing, once per set of switches; SeaCache's hooks run outside the
            # compiled layers, so `turbo` after `fast` finds its shapes ready.
            key = (mode, tier, tuple(s for s in applied(pipe) if s != "sea_cache"))
            if speed != "baseline" and "compile" in applied(pipe) and key not in warmed:
                generate(pipe, clock, mode, tier, args.frames, 2, 2)
                warmed.add(key)
            for steps in sorted(timed):
                row, video = generate(pipe, clock, mode, tier, args.frames, steps, full[mode])
                row.update(speed=speed, speedups=list(applied(pipe)), skipped=list(skipped(pipe)))
                row.update(token_counts(pipe, mode, tier, args.frames))
                if speed == "baseline":
                    baseline[(mode, tier, steps)] = video
                elif (mode, tier, steps) in baseline:
                    row.update(deviation(video, baseline[(mode, tier, steps)]))
                row.update(published(mode, tier, row["total_s"]))
                save(row)
    memory_speeds = [p for p in MEMORY_SPEEDS if p in wanted]
    if memory_speeds:
        del pipe, clock  # the memory values need the GPU memory back before they rebuild the weights
        for speed in memory_speeds:
            under_cap(speed, args, baseline, plan, full, save, over_budget)
    return results


def speed_switches(speed: str) -> tuple[str, ...]:
    """A SPEED value's switches in the tuning notebook; `fast-flash_attention` is `fast` without that switch (an
    ablation), `baseline` is `none`."""
    name, *dropped = speed.split("-")
    return tuple(s for s in speeds.switches("none" if name == "baseline" else name, "tuning") if s not in dropped)


def under_cap(speed: str, args, baseline, plan, full, save, over_budget) -> None:
    """Rebuild the same weights, apply a memory value of SPEED, and run each of its tiers under its memory cap."""
    import gc

    import torch

    caps = [cap.split(":")[1:] for cap in args.caps.split(",") if cap.split(":")[0] == speed]
    torch._dynamo.reset()  # compiled layers of the earlier values would otherwise keep their weights alive
    gc.collect()
    torch.cuda.empty_cache() if torch.cuda.is_available() else None
    if torch.cuda.is_available():
        left = torch.cuda.memory_allocated() / 2**30
        print(f"{speed}: {left:.2f} GiB still allocated before the rebuild", flush=True)
    pipe = build_pipeline(args.arch, args.device)
    clock = StepClock(pipe)
    apply(pipe, speeds.switches(speed, "tuning"))
    gc.collect()
    for tier, gib, *timed in caps:
        if over_budget():
            print(f"budget reached: skipping {speed} t2v {tier}", flush=True)
            continue
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
            total = torch.cuda.get_device_properties(0).total_memory
            torch.cuda.set_per_process_memory_fraction(float(gib) * 2**30 / total)
        steps = min(int(timed[0]) if timed else plan.get(tier, full["t2v"]), full["t2v"])
        try:
            row, video = generate(pipe, clock, "t2v", tier, args.frames, steps, full["t2v"])
        except torch.OutOfMemoryError as error:  # a row that says so, and the next cap still runs
            save({"mode": "t2v", "tier": tier, "speed": speed, "cap_gib": float(gib), "error": str(error)[:300]})
            continue
        row.update(speed=speed, speedups=list(applied(pipe)), cap_gib=float(gib))
        if (key := ("t2v", tier, steps)) in baseline:
            row.update(deviation(video, baseline[key]))
        row.update(published("t2v", tier, row["total_s"]))
        save(row)
    if torch.cuda.is_available():
        torch.cuda.set_per_process_memory_fraction(1.0)


def published(mode: str, tier: str, total: float) -> dict[str, float]:
    ref = PUBLISHED.get((mode, tier))
    if not ref:
        return {}
    return {
        "nvidia_diffusers_s": ref["diffusers"],
        "nvidia_vllm_omni_s": ref["vllm_omni"],
        "vs_nvidia_diffusers": round(total / ref["diffusers"], 3),
        "vs_nvidia_vllm_omni": round(total / ref["vllm_omni"], 3),
    }


def row_speed(row: dict[str, Any]) -> str:
    """The SPEED value a row timed (results written before the benchmarks said `speed` call it `preset`)."""
    return row.get("speed", row.get("preset", ""))


def table(paths: list[str], only: set[str] | None = None) -> str:
    """A markdown table of the rows in the given result files (of the SPEED values in `only`, when given)."""
    head = (
        "| mode | tier | SPEED | total (s) | step (s) | decode (s) | peak (GiB) | cap (GiB) | max dev | PSNR (dB) "
        "| NVIDIA Diffusers (s) | NVIDIA vLLM-Omni (s) | ours / vLLM-Omni |\n|" + "---|" * 13
    )
    lines = [head]
    for path in paths:
        for r in json.loads(Path(path).read_text())["rows"]:
            if only and row_speed(r) not in only:
                continue
            if "error" in r:
                lines.append(
                    f"| {r['mode']} | {r['tier']} | {row_speed(r)} | out of memory |  |  |  | {r['cap_gib']} |"
                    + " |" * 5
                )
                continue
            total = f"{r['total_s']}" + (f" (from {r['steps_timed']} steps)" if r["extrapolated"] else "")
            lines.append(
                f"| {r['mode']} | {r['tier']} | {row_speed(r)} | {total} | {r['median_step_s']} | {r['decode_s']} "
                f"| {r['peak_gib']} | {r.get('cap_gib', '')} | {r.get('max_abs_dev', '')} | {r.get('psnr_db', '')} "
                f"| {r.get('nvidia_diffusers_s', '')} | {r.get('nvidia_vllm_omni_s', '')} "
                f"| {r.get('vs_nvidia_vllm_omni', '')} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", choices=("nano", "tiny"), default="nano")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--modes", default="t2v", help="comma-separated: t2v, i2v, t2i")
    parser.add_argument("--tiers", default="256p,480p,720p")
    parser.add_argument("--frames", type=int, default=189)
    parser.add_argument("--steps", type=int, default=35, help="full video steps (t2i uses 50)")
    parser.add_argument("--plan", default="256p:35,480p:6,720p:3", help="steps actually timed per tier")
    parser.add_argument(
        "--speeds",
        default="baseline,fast,turbo,low_vram,min_vram",
        help="SPEED values, in this order (baseline: none); NAME-SWITCH drops a switch from one (fast-flash_attention)",
    )
    parser.add_argument("--full", default="", help="SPEED values also timed over all steps at every tier (fast)")
    parser.add_argument(
        "--caps",
        default="low_vram:720p:24,low_vram:480p:16,min_vram:256p:8:6",
        help="memory caps: speed:tier:GiB[:steps to time, else --plan's], ...",
    )
    parser.add_argument("--budget-s", type=float, default=480, help="skip what would start after this many seconds")
    parser.add_argument("--out", default="gpu_benchmark.json")
    parser.add_argument("--table", nargs="+", metavar="JSON", help="print the markdown table of result files")
    parser.add_argument("--only", default="", help="with --table: only these SPEED values' rows (comma-separated)")
    args = parser.parse_args(argv)
    if args.table:
        print(table(args.table, set(args.only.split(",")) - {""}))
        return
    results = run(args)
    print(table([args.out]))
    print(f"elapsed {results['elapsed_s']} s")


if __name__ == "__main__":
    main()
