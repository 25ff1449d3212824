"""Execute the cookbook notebooks headlessly with papermill (used by the demo, the tests and the benchmarks)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import nbformat

from helpers.assets import notebook_path
from helpers.errors import InvalidSettingError
from helpers.runs import MANIFEST_NAME

# The audiovisual pair, which teaches the calls, and its tuning notebook, which times the cookbook's speed patches
# (bare names: the audiovisual family); then the action, transfer, dataset and post-training pairs.
PAIR = ("run_with_diffusers.ipynb", "run_with_vllm_omni.ipynb")
TUNING = "make_it_fast_with_diffusers.ipynb"
ACTION_PAIR = ("action/run_with_diffusers.ipynb", "action/run_with_vllm_omni.ipynb")
TRANSFER_PAIR = ("transfer/run_with_diffusers.ipynb", "transfer/run_with_vllm_omni.ipynb")
DATASET_PAIR = ("dataset/run_with_diffusers.ipynb", "dataset/run_with_vllm_omni.ipynb")
POST_TRAINING_PAIR = ("post_training/run_with_diffusers.ipynb", "post_training/run_with_vllm_omni.ipynb")
NOTEBOOKS = (*PAIR, TUNING, *ACTION_PAIR, *TRANSFER_PAIR, *DATASET_PAIR, *POST_TRAINING_PAIR)
KERNEL = "python3"
_RUN_NAME = re.compile(r"-(\d{8}-\d{6})-(\d+)$")


def available() -> list[str]:
    return [name for name in NOTEBOOKS if notebook_path(name).is_file()]


def parameter_names(name: str) -> set[str]:
    import papermill

    return set(papermill.inspect_notebook(str(notebook_path(name))))


def execute(
    name: str,
    output: str | os.PathLike[str],
    parameters: dict[str, Any],
    *,
    progress: bool = False,
    timeout_s: int = 1800,
) -> Path:
    """Run a notebook from a fresh `python3` kernel with `parameters`; the executed copy goes to `output`.

    Unknown parameter names are rejected here, because papermill would only warn and run with the defaults.
    """
    import papermill

    unknown = sorted(set(parameters) - parameter_names(name))
    if unknown:
        raise InvalidSettingError(f"{name} has no parameter(s) {unknown}; it has {sorted(parameter_names(name))}.")
    source = notebook_path(name)
    target = Path(output)
    target.parent.mkdir(parents=True, exist_ok=True)
    papermill.execute_notebook(
        str(source),
        str(target),
        parameters=parameters,
        kernel_name=KERNEL,
        cwd=str(source.parent),
        progress_bar=progress,
        execution_timeout=timeout_s,
    )
    return target


def run_folder_from(executed: str | os.PathLike[str]) -> Path:
    """The run folder an executed notebook wrote to: the newest one in the `OUTPUT_DIR` it was given (papermill
    records a notebook's parameters in it, and `tests/notebook_checks.run_nbmake` parameterizes the same way), or
    the one dataset folder a dataset notebook made there (`OUTPUT_DIR/<spec name>`, resumed by each run)."""
    parameters = nbformat.read(str(executed), as_version=4).metadata.get("papermill", {}).get("parameters", {})
    if "OUTPUT_DIR" not in parameters:
        raise InvalidSettingError(f"{executed} was run without an OUTPUT_DIR parameter; pass one to find its run.")
    root = Path(parameters["OUTPUT_DIR"]).expanduser()
    if not root.is_absolute():
        raise InvalidSettingError(
            f"OUTPUT_DIR={str(root)!r}: give the notebook an absolute OUTPUT_DIR to find its run."
        )
    # Run folders are `<backend>-<YYYYmmdd-HHMMSS>-<n>` (`Run.create`): the newest has the latest stamp, then the
    # highest n.
    stamped = [
        (m.groups(), p.parent) for p in root.glob(f"*/{MANIFEST_NAME}") if (m := _RUN_NAME.search(p.parent.name))
    ]
    datasets = [p.parent for p in root.glob(f"*/{MANIFEST_NAME}") if not _RUN_NAME.search(p.parent.name)]
    if not stamped and len(datasets) == 1:
        return datasets[0]
    if not stamped:
        raise InvalidSettingError(f"{executed} wrote no run folder into OUTPUT_DIR={str(root)!r}.")
    return max(stamped, key=lambda item: (item[0][0], int(item[0][1])))[1]


def run_info(executed: str | os.PathLike[str]) -> dict[str, Any]:
    """What the executed notebook noted about its run (`Run.note`): the `info` of its `manifest.json`."""
    manifest = json.loads((run_folder_from(executed) / MANIFEST_NAME).read_text())
    return manifest["info"]
