"""The notebooks' calls, run from their tagged cells, so that whatever makes a call outside a notebook makes the
notebook's own.

Each `run_with_*` notebook tags two code cells: `quickstart` (the published call, with its load and its save) and
`call` (the definition of the family's call: `generate`, `act` or `transfer`). The benchmarks, the generation form's
tests and the lesson tests take the call from the notebook here instead of keeping a copy of it.
"""

from __future__ import annotations

import json
from typing import Any

from helpers.assets import notebook_path

LESSON_TAGS = ("quickstart", "call")


def cell(name: str, tag: str) -> str:
    """The source of the one code cell of notebook `name` tagged `tag`."""
    path = notebook_path(name)
    cells = [
        "".join(c["source"])
        for c in json.loads(path.read_text())["cells"]
        if c["cell_type"] == "code" and tag in c.get("metadata", {}).get("tags", [])
    ]
    if len(cells) != 1:
        raise ValueError(f"{path.name} has {len(cells)} code cells tagged {tag!r}; a lesson has exactly one")
    return cells[0]


def define(name: str, tag: str = "call", **names: Any) -> dict[str, Any]:
    """Run the cell tagged `tag` in a namespace that holds `names` (the plain variables the cell reads: `pipe`, or
    `BASE_URL`, `API_KEY` and `MODEL`) and return the namespace, where the cell's functions now are. They read those
    variables at call time: `namespace["pipe"] = other` points them at another pipeline."""
    namespace: dict[str, Any] = dict(names)
    exec(compile(cell(name, tag), f"{name} [{tag}]", "exec"), namespace)  # noqa: S102 - the cookbook's own cell
    return namespace


def omni_fields(guardrails: str = "auto") -> Any:
    """run_with_vllm_omni.ipynb's own `fields(s, negative_prompt="", extra_params=None)`, from its `call` cell: the
    request fields its calls (and the generation form) send for settings `s`, so that code without the notebook sends
    what the notebook sends. `guardrails` is the notebook's GUARDRAILS."""
    return define("run_with_vllm_omni.ipynb", BASE_URL="", API_KEY="", MODEL="", GUARDRAILS=guardrails)["fields"]
