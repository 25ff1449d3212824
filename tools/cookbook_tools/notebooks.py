"""Execute the cookbook notebooks headlessly with papermill (used by the demo, the tests and the benchmarks)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import nbformat

from helpers.assets import notebook_path
from helpers.errors import InvalidSettingError

# The audiovisual pair, which teaches the calls, and its tuning notebook, which times the cookbook's speed patches
# (bare names: the audiovisual family); then the action and transfer pairs.
PAIR = ("run_with_diffusers.ipynb", "run_with_vllm_omni.ipynb")
TUNING = "make_it_fast_with_diffusers.ipynb"
ACTION_PAIR = ("action/run_with_diffusers.ipynb", "action/run_with_vllm_omni.ipynb")
TRANSFER_PAIR = ("transfer/run_with_diffusers.ipynb", "transfer/run_with_vllm_omni.ipynb")
NOTEBOOKS = (*PAIR, TUNING, *ACTION_PAIR, *TRANSFER_PAIR)
KERNEL = "python3"


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


def published(executed: str | os.PathLike[str]) -> dict[str, Any]:
    """Every fact the executed notebook published as output metadata (`helpers.display.publish`), merged in order."""
    from helpers.display import METADATA_KEY

    facts: dict[str, Any] = {}
    for cell in nbformat.read(str(executed), as_version=4).cells:
        for out in cell.get("outputs", []):
            facts.update(out.get("metadata", {}).get(METADATA_KEY, {}))
    return facts


def run_folder_from(executed: str | os.PathLike[str]) -> Path:
    """The run folder an executed notebook wrote to, from the `run_dir` it published."""
    run_dir = published(executed).get("run_dir")
    if run_dir is None:
        raise InvalidSettingError(f"{executed} did not publish the run folder it wrote to (no `run_dir` metadata).")
    return Path(run_dir)
