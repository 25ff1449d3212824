"""Execute the cookbook notebooks headlessly with papermill (used by the demo, the tests and the benchmark)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from helpers.assets import notebook_path
from helpers.errors import InvalidSettingError

NOTEBOOKS = ("run_with_diffusers.ipynb", "run_with_vllm_omni.ipynb")
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


def run_folder_from(executed: str | os.PathLike[str]) -> Path:
    """The run folder an executed notebook wrote to, read from its `Writing to <folder>` line."""
    nb = json.loads(Path(executed).read_text())
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            for line in "".join(out.get("text", "")).splitlines():
                if line.startswith("Writing to "):
                    return Path(line.removeprefix("Writing to ").strip())
    raise InvalidSettingError(f"{executed} does not say which run folder it wrote to.")
