"""A LoRA training step of Cosmos 3 on one GPU: the post-training Diffusers notebook's own cells, at each clip length,
until one does not fit.

    python support/benchmarks/lora_step.py --out <folder>                      # Nano's architecture, one GPU
    python support/benchmarks/lora_step.py --model tiny --frames 9,17 --steps 3 --out <folder>   # the plumbing, CPU

Each clip length runs in a process of its own: `notebook_cells.py` runs run_with_diffusers.ipynb's cells in order, up
to its training loop, with `MODEL` (nano-random: the real 16 B architecture with random weights, built once), the
published preset (480p, rank 16, gradient checkpointing on a GPU), `TRAIN_FRAMES` the length and `TRAIN_STEPS` the
steps timed. The clips are the bundled ones played back and forth to that length (random weights: what they show does
not change the time). Written to `--out`: `lora_step.json`, with a row per length: the notebook's median step,
tokens a step, the training's peak memory, and the time 1,000 steps would take; a length that runs out of memory is
a row that says so, and the ones after it are not tried.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import result_file

from cosmos3_post_training import clips
from helpers import media

REPOSITORY = Path(__file__).resolve().parents[2]
NOTEBOOK = REPOSITORY / "cookbooks/cosmos3/generator/post_training/run_with_diffusers.ipynb"
LAST_CELL = "def flow_matching_loss"  # the training loop's cell


def long_clips(folder: Path, frames: int) -> str:
    """The bundled clips, each played forwards and backwards until it has `frames` frames, with their captions."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in (clips.BUNDLED / clips.METADATA).read_text().splitlines()]
    for row in rows:
        source = media.read_frames(clips.BUNDLED / row["file_name"])
        cycle = np.concatenate([source, source[-2:0:-1]])
        media.write_video(folder / row["file_name"], np.resize(cycle, (frames, *cycle.shape[1:])), row["fps"])
    (folder / clips.METADATA).write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(folder)


def one_length(args: argparse.Namespace, frames: int, work: Path) -> dict:
    data = long_clips(work / f"clips-{frames}", frames)
    out = work / f"run-{frames}"
    parameters = {
        "MODEL": args.model,
        "PRESET": args.preset,
        "DATA": data,
        "TRAIN_FRAMES": frames,
        "TRAIN_STEPS": args.steps,
        "SAVE_EVERY": args.steps,
        "OUTPUT_DIR": str(out / "media"),
        "PROGRESS": False,
    }
    command = [sys.executable, str(Path(__file__).parent / "notebook_cells.py"), str(NOTEBOOK), "--out", str(out)]
    command += ["--last-cell", LAST_CELL, *(arg for k, v in parameters.items() for arg in ("-p", f"{k}={v}"))]
    done = subprocess.run(command, cwd=NOTEBOOK.parent, capture_output=True, text=True)
    row: dict = {"frames": frames}
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        row["error"] = "out of memory" if "OutOfMemory" in done.stderr or "out of memory" in done.stderr else last
        return row
    info = json.loads((out / "manifest.json").read_text())["info"]
    row.update(
        step_s=info["step_s"],
        tokens_per_step=info["tokens_per_step"],
        training_peak_gib=info["training_peak_gib"],
        hours_for_1000_steps=round(info["step_s"] * 1000 / 3600, 2),
        cells_s=json.loads((out / "cells.json").read_text())["cells"][-1]["seconds"],
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="nano-random")
    parser.add_argument("--preset", default="published")
    parser.add_argument("--frames", default="33,61,93,121,189", help="clip lengths, 4k + 1, in order")
    parser.add_argument("--steps", type=int, default=6, help="training steps timed at each length")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    import torch

    result = {
        "what": __doc__.split("\n\n")[0],
        "command": " ".join(sys.argv),
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "model": args.model,
        "preset": args.preset,
        "rows": [],
    }
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    with tempfile.TemporaryDirectory() as work:
        for frames in (int(f) for f in args.frames.split(",")):
            row = one_length(args, frames, Path(work))
            result["rows"].append(row)
            print(json.dumps(row), flush=True)
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "lora_step.json").write_text(
                json.dumps({**result, "versions": result_file.versions()}, indent=1)
            )
            if "error" in row:
                break


if __name__ == "__main__":
    main()
