"""The tuning notebook's `SPEED` values against NVIDIA's fastest published Cosmos 3: a row per configuration, each a
whole 35-step video compared with the bf16 reference over the same 35 steps.

    python support/benchmarks/speed_table.py --rows none,fp8_turbo --reference REF.safetensors --out RESULT.json
    python support/benchmarks/speed_table.py --arch tiny --device cpu --tier 256 --frames 9 --steps 6 \\
        --rows none,fp8_turbo,none:seed=1 --reference ref.safetensors --out check.json   # the plumbing, on a CPU

Each row runs in a process of its own (switches cannot be undone), on Nano's architecture with random weights built
on the GPU (the same weights in every process), and makes its video with the tuning notebook's own call
(`pipelines.notebook_call`, the `generate` that make_it_fast_with_diffusers.ipynb times) after the switches its cells
turn on (`pipelines.apply`, by name). A row is a `SPEED` value, `-switch` and `+switch` drop or add one, and
`:threshold=T` sets the step cache's threshold; `:seed=N` adds N to the seed (`none:seed=1` is a seed's effect, for
scale). Examples: `fp8_turbo` is NVIDIA's configuration; `fp8-cuda_graphs+sea_cache` the same at diffusers' cache
defaults; `fp8_turbo:threshold=0.5` a larger cache budget.

The reference is the `none` row (diffusers as it comes, bf16, eager). Its final latents are saved in bf16 to
`--reference` (16 MB at 720p), so that later runs, on this machine or another, compare with the same video: a row's
first call, two steps at the row's size (which also compiles), ends with the saved latents put in place of its own at
its last step (`callback_on_step_end`), so the pipeline decodes the reference with its own decoder.

Columns: `first_call_s` (those two steps, the compiling and the decode), `sampling_s` (call start to the last step's
end, as NVIDIA times its 94.57 s), `decode_s`, `end_to_end_s`, `peak_gib`, `decoder_passes` (computed of calls: a step
cache answers the rest), `mean_abs_levels` and `psnr_db` of the decoded frames against the reference.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gpu_benchmark
import result_file

from helpers import audiovisual_settings, media, prompts, speeds
from tuning import patches, pipelines

# NVIDIA's published one-GPU Nano figures for 720p text to video, 189 frames, 35 steps (NVIDIA/cosmos
# inference_benchmarks/): PyTorch FP8 is sampling only, with the inference command's step cache on by default.
PUBLISHED_720P = {"nvidia_pytorch_fp8_h100_s": 94.01, "nvidia_pytorch_fp8_h200_s": 94.57, "nim_fp8_h200_s": 177.23}
REFERENCE_ROW = "none"


@dataclass(frozen=True)
class Row:
    """One configuration: a SPEED value, switches dropped and added, a step cache threshold, a seed offset."""

    text: str
    speed: str
    dropped: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    settings: dict[str, float] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> Row:
        head, *options = text.split(":")
        settings = {name: float(value) for name, value in (option.split("=", 1) for option in options)}
        unknown = set(settings) - {"threshold", "seed"}
        if unknown:
            raise SystemExit(f"row {text!r}: unknown option(s) {sorted(unknown)}; the options are threshold, seed")
        parts = head.replace("+", " +").replace("-", " -").split()
        dropped = tuple(p[1:] for p in parts[1:] if p.startswith("-"))
        added = tuple(p[1:] for p in parts[1:] if p.startswith("+"))
        if parts[0] not in speeds.offered("tuning"):
            raise SystemExit(f"row {text!r}: {parts[0]!r} is not one of {speeds.offered('tuning')}")
        return cls(text, parts[0], dropped, added, settings)

    def switches(self) -> tuple[str, ...]:
        names = [n for n in speeds.switches(self.speed, "tuning") if n not in self.dropped]
        return pipelines.check([*names, *self.added])

    @property
    def is_reference(self) -> bool:
        return self.speed == REFERENCE_ROW and not (self.dropped or self.added or self.settings)


def settings_for(args: argparse.Namespace, steps: int, seed_offset: int = 0):
    return audiovisual_settings.settings_for(
        "t2v",
        "published",
        seed=gpu_benchmark.SEED + seed_offset,
        tier=args.tier,
        num_frames=args.frames,
        num_inference_steps=steps,
    )


class LastStep:
    """A `callback_on_step_end` that marks the time each step ends (after a device sync) and, at the last step,
    keeps the latents or puts given ones in their place."""

    def __init__(self, sync, steps: int, replace: Any = None) -> None:
        self.sync, self.steps, self.replace = sync, steps, replace
        self.ended: float | None = None
        self.latents: Any = None

    def __call__(self, pipe, step: int, timestep, kwargs: dict[str, Any]) -> dict[str, Any]:
        if step == self.steps - 1:
            self.sync()
            self.ended = time.perf_counter()
            self.latents = kwargs["latents"]
            if self.replace is not None:
                kwargs["latents"] = self.replace.to(kwargs["latents"])
        return kwargs


def run_row(args: argparse.Namespace, row: Row) -> dict[str, Any]:
    """The row's pipeline, its first call (which decodes the reference) and its timed call, in this process."""
    import numpy as np
    import torch
    from diffusers import SeaCacheConfig
    from safetensors.torch import load_file, save_file

    cuda = torch.device(args.device).type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    pipe = gpu_benchmark.build_pipeline(args.arch, args.device)
    passes = patches.count_decoder_passes(pipe)  # a cache switch then counts inside itself
    switches = row.switches()
    pipelines.apply(pipe, switches)
    if "threshold" in row.settings:
        if not pipe.transformer.is_cache_enabled:
            raise SystemExit(f"row {row.text!r}: a threshold needs a step cache (sea_cache or nvidia_sea_cache)")
        base = pipelines.NVIDIA_SEA_CACHE if "nvidia_sea_cache" in switches else {}
        pipe.transformer.disable_cache()
        pipe.transformer.enable_cache(SeaCacheConfig(**{**base, "threshold": row.settings["threshold"]}))
    generate = pipelines.notebook_call(pipe)
    seed_offset = int(row.settings.get("seed", 0))
    s = settings_for(args, args.steps, seed_offset)
    prompt, negative = prompts.prompt_text(s), prompts.negative_prompt(s.mode)

    reference = None if row.is_reference else load_file(args.reference)["latents"]
    warm = LastStep(sync, 2, replace=reference)
    started = time.perf_counter()
    first = generate(settings_for(args, 2, seed_offset), prompt, negative, callback_on_step_end=warm)
    sync()
    first_call_s = time.perf_counter() - started
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    passes.reset()
    clock = LastStep(sync, args.steps)
    started = time.perf_counter()
    out = generate(s, prompt, negative, callback_on_step_end=clock)
    sync()
    ended = time.perf_counter()
    frames = media.to_uint8_frames(out.video).astype(np.float32)
    if row.is_reference:
        save_file({"latents": clock.latents.to(torch.bfloat16).contiguous().cpu()}, args.reference)
        want = frames
    else:
        want = media.to_uint8_frames(first.video).astype(np.float32)  # the reference, decoded here
    difference = np.abs(frames - want)
    mse = float(np.mean(difference**2))
    return {
        "row": row.text,
        "speed": row.speed,
        "switches": list(pipelines.applied(pipe)),
        "skipped": list(pipelines.skipped(pipe)),
        "cache": row.settings.get("threshold")
        or ("nvidia" if "nvidia_sea_cache" in switches else "diffusers" if "sea_cache" in switches else None),
        "seed": s.seed,
        "size": s.size,
        "frames": s.num_frames,
        "steps": s.num_inference_steps,
        "first_call_s": round(first_call_s, 2),
        "sampling_s": round(clock.ended - started, 2),
        "decode_s": round(ended - clock.ended, 2),
        "end_to_end_s": round(ended - started, 2),
        "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
        "decoder_passes": str(passes),
        "mean_abs_levels": round(float(difference.mean()), 3),
        "psnr_db": round(10 * float(np.log10(255.0**2 / mse)), 2) if mse > 0 else None,
    }


def main(argv: list[str] | None = None) -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="none,fp8_turbo", help="comma-separated rows (see above), in order")
    parser.add_argument("--arch", choices=("nano", "tiny"), default="nano")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tier", type=int, default=720)
    parser.add_argument("--frames", type=int, default=189)
    parser.add_argument("--steps", type=int, default=35)
    parser.add_argument(
        "--reference", required=True, help="the reference latents: written by the none row, read by the rest"
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--one-row", help=argparse.SUPPRESS)  # a row in this process (the parent starts one per row)
    args = parser.parse_args(argv)
    if args.one_row:
        print(json.dumps(run_row(args, Row.parse(args.one_row))), flush=True)
        return

    rows = [Row.parse(text) for text in args.rows.split(",")]
    if not Path(args.reference).exists() and not rows[0].is_reference:
        raise SystemExit(f"--reference {args.reference} does not exist: put the row {REFERENCE_ROW!r} first")
    result: dict[str, Any] = {
        "what": __doc__.split("\n\n")[0],
        "command": " ".join(sys.argv),
        "arch": args.arch,
        "device": torch.cuda.get_device_name() if args.device == "cuda" else args.device,
        "tier": args.tier,
        "frames": args.frames,
        "steps": args.steps,
        "published": PUBLISHED_720P if args.tier == 720 else {},
        "rows": [],
    }
    base = [sys.executable, __file__, *(argv if argv is not None else sys.argv[1:])]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for row in rows:
        print(f"row {row.text}: switches {', '.join(row.switches()) or 'none'}", flush=True)
        done = subprocess.run([*base, "--one-row", row.text], env=env, capture_output=True, text=True)
        sys.stderr.write(done.stderr[-4000:])
        found = [line for line in done.stdout.splitlines() if line.startswith('{"row"')]
        result["rows"].append(
            json.loads(found[-1])
            if done.returncode == 0 and found
            else {"row": row.text, "error": (done.stderr.strip().splitlines() or ["no output"])[-1]}
        )
        print(json.dumps(result["rows"][-1]), flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({**result, "versions": result_file.versions()}, indent=1) + "\n")


if __name__ == "__main__":
    main()
