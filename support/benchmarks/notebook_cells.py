"""Run a notebook's code cells in order, in this Python process, with papermill's parameters, and time each cell:
the notebook itself, on a machine without a Jupyter kernel (a GPU machine with PyTorch alone).

The parameters replace the parameters cell's values, as papermill injects them; every other cell runs as written.
Written to `--out`: `cells.json` (each cell's first line and the seconds since the start), the run folder's
`manifest.json` (the notebook's own record of its files, timings and peak memory) and `printed.txt`.

    python support/benchmarks/notebook_cells.py \\
        cookbooks/cosmos3/generator/audiovisual/make_it_fast_with_diffusers.ipynb \\
        -p MODEL=nano-random -p PRESET=published -p SPEED=fp8 -p MODES=t2v -p OUTPUT_DIR=runs --out results

`--last-cell TEXT` stops after the first code cell that contains TEXT: the cells up to one section.
"""

from __future__ import annotations

import argparse
import ast
import json
import shutil
import sys
import time
from pathlib import Path


def code_cells(path: Path) -> list[tuple[list[str], str]]:
    """(tags, source) of each code cell, in order."""
    document = json.loads(path.read_text())
    return [
        (c.get("metadata", {}).get("tags", []), "".join(c["source"]))
        for c in document["cells"]
        if c["cell_type"] == "code"
    ]


def parameter(text: str) -> tuple[str, object]:
    """`NAME=VALUE`, the value read as a Python literal where it is one (papermill's `-p` does the same)."""
    name, _, value = text.partition("=")
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


class Tee:
    """Writes to the terminal and keeps a copy."""

    def __init__(self, stream) -> None:
        self.stream, self.kept = stream, []

    def write(self, text: str) -> int:
        self.kept.append(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("-p", "--parameter", action="append", default=[], type=parameter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--last-cell", default="", help="stop after the first code cell whose source contains this text (one section)"
    )
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    given = dict(args.parameter)
    cells = code_cells(args.notebook)
    if not any("parameters" in tags for tags, _ in cells):
        raise SystemExit(f"{args.notebook} has no cell tagged `parameters`")
    tee = Tee(sys.stdout)
    sys.stdout = tee
    namespace: dict[str, object] = {"__name__": "__main__"}
    started, times = time.perf_counter(), []
    try:
        for index, (tags, source) in enumerate(cells):
            exec(compile(source, f"{args.notebook.name} [{index}]", "exec"), namespace)  # noqa: S102 - the notebook
            if "parameters" in tags:
                unknown = sorted(set(given) - set(namespace))
                if unknown:
                    raise SystemExit(f"{args.notebook.name} has no parameter(s) {unknown}")
                namespace.update(given)
            first = next((line for line in source.splitlines() if line.strip()), "")
            times.append({"cell": index, "first_line": first[:100], "seconds": round(time.perf_counter() - started, 2)})
            print(f"[{times[-1]['seconds']:8.1f} s] cell {index}: {first[:80]}", file=sys.__stdout__, flush=True)
            if args.last_cell and args.last_cell in source:
                break
    finally:
        sys.stdout = sys.__stdout__
        (args.out / "cells.json").write_text(json.dumps({"parameters": given, "cells": times}, indent=1, default=str))
        (args.out / "printed.txt").write_text("".join(tee.kept))
        run = namespace.get("run") or getattr(namespace.get("dataset"), "run", None)  # a dataset notebook's folder
        if run is not None:
            shutil.copy(run.manifest_path, args.out / "manifest.json")


if __name__ == "__main__":
    main()
