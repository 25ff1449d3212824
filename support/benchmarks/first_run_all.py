"""A reader's first "Run All": a notebook with its default parameters (only MODEL set), timed cell by cell.

    python support/benchmarks/first_run_all.py --notebook run_with_diffusers.ipynb --model nano-random \\
        --out support/benchmarks/results/first_run_all_h200.json

The notebook runs once through papermill, as `papermill <notebook> out.ipynb -p MODEL <model>` would, with every
other parameter at its default. The set-up cell builds a random-weight checkpoint the first time (`nano-random`:
about 31 GB written to the cookbook's cache, as a Hub id would be downloaded), so the result reports that cell apart
from the rest, and the time of each section, the outputs the run wrote (read back from its manifest) and the peak
GPU memory of each generation. `--target-s` is the time the rest must stay under; the result says whether it did.
Several notebooks may be given: each is run and reported in turn.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import nbformat
import result_file

from cookbook_tools import notebooks
from helpers import environment


def sections(executed: Path) -> tuple[list[dict], float]:
    """Seconds per section (a `## ` heading and the code cells under it), and the set-up cell's own seconds."""
    nb = nbformat.read(executed, as_version=4)
    rows: list[dict] = []
    setup_s = 0.0
    heading = "set-up"
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("## "):
            heading = cell.source.splitlines()[0][3:]
            continue
        seconds = (cell.metadata.get("papermill") or {}).get("duration") or 0.0
        if cell.cell_type != "code":
            continue
        if heading == "Parameters" and "parameters" not in cell.metadata.get("tags", []):
            setup_s = seconds  # the cell after the parameters: checks, and the checkpoint built or downloaded
        if rows and rows[-1]["section"] == heading:
            rows[-1]["seconds"] = round(rows[-1]["seconds"] + seconds, 2)
        else:
            rows.append({"section": heading, "seconds": round(seconds, 2)})
    return rows, setup_s


def run_one(name: str, model: str, folder: Path) -> dict:
    started = time.perf_counter()
    executed = notebooks.execute(name, folder / name, {"MODEL": model, "OUTPUT_DIR": str(folder / "media")})
    wall = time.perf_counter() - started
    per_section, setup_s = sections(executed)
    manifest = json.loads((notebooks.run_folder_from(executed) / "manifest.json").read_text())
    outputs = [
        {
            "mode": o["mode"],
            "file": o["path"],
            "size": f"{o['width']}x{o['height']}",
            "frames": o["num_frames"],
            "seconds": o["seconds"],
            "peak_memory_gib": o.get("peak_memory_gib"),
        }
        for o in manifest["outputs"]
        if o["kind"] != "audio"
    ]
    return {
        "notebook": name,
        "parameters": {"MODEL": model, "others": "defaults"},
        "wall_s": round(wall, 1),
        "setup_cell_s": round(setup_s, 1),
        "wall_after_setup_s": round(wall - setup_s, 1),
        "sections": per_section,
        "outputs": outputs,
        "noted": notebooks.run_info(executed),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notebook", action="append", choices=notebooks.NOTEBOOKS, required=True)
    parser.add_argument("--model", default="nano-random")
    parser.add_argument("--target-s", type=float, default=300.0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    import torch

    runs: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.notebook:
            runs.append(run_one(name, args.model, Path(tmp) / name.removesuffix(".ipynb")))
            runs[-1]["meets_target"] = runs[-1]["wall_after_setup_s"] < args.target_s
            # Written after each notebook, so that a run stopped part-way keeps what it measured.
            result_file.write(
                {
                    "what": 'a first "Run All" with the default parameters, MODEL set; the set-up cell apart',
                    "target_s": args.target_s,
                    "runs": runs,
                    "machine": {
                        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                        "python": platform.python_version(),
                        **{
                            k: v for k, v in environment.report().items() if k in ("torch", "diffusers", "transformers")
                        },
                    },
                    "measured": datetime.now(UTC).isoformat(timespec="seconds"),
                    "command": " ".join(["python support/benchmarks/first_run_all.py", *sys.argv[1:]]),
                },
                args.out,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
