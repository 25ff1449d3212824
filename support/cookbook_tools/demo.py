"""`python -m cookbook_tools.demo`: run every cookbook notebook on a model and list the media it wrote."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from cookbook_tools import gallery, notebooks
from helpers.audiovisual_settings import MODES
from helpers.runs import MANIFEST_NAME


def _describe(item: dict) -> str:
    if item["kind"] == "audio":
        audio = item["audio"]
        return f"audio, {audio['duration_s']:.2f} s, {audio['channels']} channels at {audio['sample_rate']} Hz"
    if item["kind"] == "actions":
        return f"actions, {item['num_frames']} steps ({item['settings']['domain_name']})"
    size = f"{item['kind']} {item['width']}x{item['height']}"
    if item["kind"] == "image":
        return size
    sound = " + AAC sound" if item["has_audio"] else ""
    return f"{size}, {item['num_frames']} frames @ {item['fps']:g} fps{sound}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="tiny", help="Hugging Face id, local folder, or 'tiny' (default)")
    parser.add_argument("--preset", default="smoke", help="smoke (default), draft, default or quality")
    parser.add_argument(
        "--modes", default=",".join(MODES), help="the main notebooks' MODES (the tuning one keeps its own)"
    )
    parser.add_argument("--output-dir", default="outputs/demo", help="where executed notebooks and media go")
    parser.add_argument(
        "--notebooks", default="", help="a comma-separated subset of the notebooks (names as in notebooks.NOTEBOOKS)"
    )
    args = parser.parse_args(argv)

    out = Path(args.output_dir).resolve()
    run_dirs = []
    chosen = [n for n in args.notebooks.split(",") if n] or notebooks.available()
    unknown = sorted(set(chosen) - set(notebooks.available()))
    if unknown:
        parser.error(f"--notebooks: unknown {unknown}; available: {', '.join(notebooks.available())}")
    for name in chosen:
        start = time.perf_counter()
        executed = out / name.replace(".ipynb", ".executed.ipynb")
        print(f"Running {name} (MODEL={args.model}, PRESET={args.preset}) ...", flush=True)
        parameters = {"MODEL": args.model, "PRESET": args.preset, "OUTPUT_DIR": str(out / "media")}
        if name in notebooks.PAIR:
            parameters["MODES"] = args.modes
        if name in notebooks.ACTION_PAIR:
            parameters["ROLLOUT_CHUNKS"] = 1  # one chunk of the arm shows the rollout; the tour's default is five
        if (
            name in notebooks.DATASET_PAIR
        ):  # each its own dataset: with one OUTPUT_DIR the second would resume the first
            parameters["OUTPUT_DIR"] = str(out / "media" / name.replace("/", "-").removesuffix(".ipynb"))
        notebooks.execute(name, executed, parameters)
        run = notebooks.run_folder_from(executed)
        run_dirs.append(run)
        manifest = json.loads((run / MANIFEST_NAME).read_text())
        print(f"  done in {time.perf_counter() - start:.1f} s; executed notebook: {executed}")
        for item in manifest["outputs"]:
            print(f"  {run / item['path']}: {_describe(item)}")
    page = gallery.write_gallery(run_dirs, out / "gallery.html")
    print(f"Gallery of every output: {page} (open it in a browser)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
