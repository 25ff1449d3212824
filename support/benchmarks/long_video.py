"""How long a long video takes: the audiovisual Diffusers notebook's "A long video" section at Nano's size.

    python support/benchmarks/long_video.py --out <folder>

On a CUDA GPU, with `MODEL="nano-random"` (the real 16 B architecture, random weights), `PRESET="published"`,
`TIER=480`, `SPEED="fast"` and `LONG_CHUNKS=4`: four chunks of 189 frames at 832x480 with sound, 35 steps each, joined
into 741 frames (30.9 s at 24 fps). The notebook's cells run in this process (`notebook_cells.py`) up to the cell
that makes the long video, so the numbers are the notebook's own: the quickstart (an uncompiled 480p video, which
also loads the pipeline) runs first; the first chunk then pays for compiling the transformer's layers, and the chunks
after it are warm. (The seams are measured on the CPU runs; on random weights they are noise.) Written to `--out`:
`long_video_gpu.json`, and the notebook's `cells.json`, `printed.txt` and `manifest.json`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import notebook_cells
import result_file

from helpers import environment

REPOSITORY = Path(__file__).resolve().parents[2]
NOTEBOOK = REPOSITORY / "cookbooks/cosmos3/generator/audiovisual/run_with_diffusers.ipynb"
PARAMETERS = {
    "MODEL": "nano-random",
    "PRESET": "published",
    "TIER": 480,
    "SPEED": "fast",
    "MODES": "t2i",  # the t2i section comes after the long video, so no other generation runs before it
    "LONG_CHUNKS": 4,
    "PROGRESS": False,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "-p",
        "--parameter",
        action="append",
        default=[],
        type=notebook_cells.parameter,
        help="NAME=VALUE over the defaults above (a CPU check: -p MODEL=tiny -p PRESET=smoke ...)",
    )
    args = parser.parse_args()
    parameters = {**PARAMETERS, **dict(args.parameter)}
    # Up to the cell that makes the long video: the section's measurements of the seams follow it.
    arguments = [str(NOTEBOOK), "--out", str(args.out), "--last-cell", "long_video.write("]
    for name, value in {**parameters, "OUTPUT_DIR": str(args.out / "runs")}.items():
        arguments += ["-p", f"{name}={value!r}" if isinstance(value, str) else f"{name}={value}"]
    notebook_cells.main(arguments)
    manifest = json.loads((args.out / "manifest.json").read_text())
    long = next(o for o in manifest["outputs"] if o["mode"] == "long")
    result_file.write(
        {
            "what": "the audiovisual Diffusers notebook's long video at Nano's size (nano-random): 4 chunks of 189 "
            "frames at 832x480 with sound, 35 steps, SPEED='fast' (diffusers' own switches), each next chunk video "
            "to video on the last 5 pictures (2 latent frames) of the one before",
            "parameters": parameters,
            "machine": environment.report(),
            "frames": long["num_frames"],
            "seconds_of_video": round(long["num_frames"] / long["fps"], 2),
            "total_s": long["seconds"],
            "chunk_seconds": long["chunk_seconds"],
            "peak_memory_gib": long["peak_memory_gib"],
            "output": long,
        },
        args.out / "long_video_gpu.json",
    )


if __name__ == "__main__":
    main()
