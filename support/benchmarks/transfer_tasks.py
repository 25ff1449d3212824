"""Time and peak memory of a single-control and a multi-control transfer through Diffusers, eager and with
`SPEED="fast"`, and how far `fast` moves the output.

    python support/benchmarks/transfer_tasks.py --model nano-random --task edge \
        --out support/benchmarks/results/transfer_edge_h200.json

Each task runs through the transfer notebook's own `transfer` (its `call` cell, run by `tuning.notebook_calls`, on
the pipeline loaded and scheduled as the notebook's tour has it) at the `default` preset, NVIDIA's settings: 121
frames at 1280x720 in one chunk, guidance 3.0 and control guidance 1.5, so each step runs the transformer three
times. `edge` is the Canny edge map of the bundled source clip; `edge+depth` adds the bundled depth map. A step
costs the same at every step count, so the run is timed at two step counts and the line through them gives the time
per step and the fixed cost (encoding the controls, decoding the video); the time of NVIDIA's 50 steps is read off
that line. Each size is called once before it is timed. Then the same with the transformer's repeated layer compiled
(`compile_repeated_blocks(fullgraph=True)`, the notebook's `fast`), and its frames (0-255) compared with the eager
ones at the larger step count.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import result_file
from PIL import Image

import checkpoints
from cosmos3_transfer import transfer_settings
from cosmos3_transfer.schedules import NativeFlowUniPCMultistepScheduler
from helpers import assets, environment, media, prompts
from tuning import notebook_calls

PROMPT = "A city street on a rainy evening: wet asphalt mirrors the shop lights, cars wait at the curb."
TASKS = ("edge", "edge+depth")


def task_controls(task: str, s: transfer_settings.TransferSettings) -> dict[str, list]:
    folder = assets.assets_dir("transfer")
    size = s.canvas(832, 480)
    clip = [media.fit_frame(f, *size) for f in media.load_video(folder / "videos" / "street.mp4", s.num_frames)]
    given = {"edge": [Image.fromarray(cv2.Canny(np.asarray(f), 100, 200)).convert("RGB") for f in clip]}
    if "depth" in task:
        depth = transfer_settings.load_control(folder / "controls" / "street_depth.mp4", "depth", s.num_frames)
        given["depth"] = [media.fit_frame(f, *size) for f in depth]
    return given


def load(model: str, *, device: str = "auto", guardrails: str = "auto") -> Any:
    """The modular pipeline as the notebook's tour runs it: loaded as its set-up loads it, on the shifted flow
    schedule its quickstart turns on (`use_karras_sigmas=False`), with the cookbook's UniPC that answers with the
    native flow levels (the notebook's section on the scheduler says why)."""
    from diffusers import Cosmos3OmniModularPipeline

    checkpoint = checkpoints.resolve(model, device=device, guardrails=guardrails)
    pipe = Cosmos3OmniModularPipeline.from_pretrained(checkpoint.path)
    pipe.load_components(dtype=checkpoint.dtype)
    if checkpoint.guardrails:
        pipe.enable_safety_checker()
    else:
        pipe.disable_safety_checker()
    pipe.to(checkpoint.device)
    pipe.set_progress_bar_config(disable=True)
    pipe.update_components(
        scheduler=NativeFlowUniPCMultistepScheduler.from_config(pipe.scheduler.config, use_karras_sigmas=False)
    )
    return pipe


def timed(transfer, s: transfer_settings.TransferSettings, given: dict, steps: int) -> tuple[float, np.ndarray]:
    environment.peak_memory_gib(reset=True)
    started = time.perf_counter()
    video = transfer(dataclasses.replace(s, num_inference_steps=steps), given, PROMPT, prompts.negative_prompt())
    return time.perf_counter() - started, media.to_uint8_frames(video).astype(np.int16)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="nano-random")
    parser.add_argument("--task", default="edge", choices=TASKS)
    parser.add_argument("--preset", default="published", choices=list(transfer_settings.PRESETS))
    parser.add_argument("--tier", type=int, default=None, help="another resolution tier than the preset's (480)")
    parser.add_argument("--steps", type=int, nargs=2, default=(2, 4), help="the two step counts timed")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    low, high = sorted(args.steps)
    pipe = load(args.model, device=args.device)
    transfer = notebook_calls.define("transfer/run_with_diffusers.ipynb", pipe=pipe)["transfer"]
    s = transfer_settings.settings_for(args.task.split("+"), args.preset, tier=args.tier)
    given = task_controls(args.task, s)
    rows, reference = [], None
    for speed in ("none", "fast"):
        if speed == "fast":
            pipe.transformer.compile_repeated_blocks(fullgraph=True)
        first, _ = timed(transfer, s, given, low)
        seconds_low, _ = timed(transfer, s, given, low)
        seconds_high, frames = timed(transfer, s, given, high)
        per_step = (seconds_high - seconds_low) / (high - low)
        fixed = seconds_low - low * per_step
        reference = frames if reference is None else reference
        width, height = s.canvas(832, 480)
        row = {"speed": speed, "task": args.task, "frames": int(frames.shape[0]), "size": f"{width}x{height}"}
        row |= {"first_call_s": round(first, 2), f"seconds_{low}_steps": round(seconds_low, 2)}
        row |= {f"seconds_{high}_steps": round(seconds_high, 2), "seconds_per_step": round(per_step, 2)}
        row |= {
            "fixed_s": round(fixed, 2),
            f"seconds_{s.num_inference_steps}_steps": round(fixed + s.num_inference_steps * per_step, 1),
        }
        row |= {"peak_gib": round(environment.peak_memory_gib(), 2)}
        row["frame_difference"] = round(float(np.abs(frames - reference).mean()), 3)
        print(row, flush=True)
        rows.append(row)
    result = {
        "what": f"a {args.task} transfer through Diffusers at {args.preset}, eager and with SPEED='fast'",
        "model": args.model,
        "settings": s.to_dict(),
        "environment": environment.report(),
        "rows": rows,
    }
    result_file.write(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
