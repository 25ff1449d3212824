"""A notebook's lesson cells run the way a reader takes them home: pasted into a fresh Python process in which none
of the cookbook's packages can be imported, with only the plain variables the cells name (a model folder or Hub id,
a URL, a folder to write into).

The lesson cells are the ones tagged `quickstart` (the published call, with its load and its save) and `call` (the
cell that defines the family's call: `generate`, `act` or `transfer`). They may use diffusers, torch, numpy, PIL and
the standard library, or httpx, openai, numpy and the standard library; `then` is the test's own code, run after
them, which ends by printing one line `RESULT <json>`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tuning.notebook_calls import cell

# What a reader who pastes a cell elsewhere does not have.
COOKBOOK_PACKAGES = (
    "helpers",
    "cosmos3_audiovisual",
    "cosmos3_action",
    "cosmos3_transfer",
    "cosmos3_dataset",
    "checkpoints",
    "local_server",
    "tuning",
    "generation_form",
    "cookbook_tools",
)
PRELUDE = f"""\
import sys
for _name in {COOKBOOK_PACKAGES!r}:
    sys.modules[_name] = None  # `import helpers` now raises ImportError, as on a machine without the cookbook
try:
    import helpers
except ImportError:
    pass
else:
    raise SystemExit("helpers is still importable")
"""


def _name(notebook: Path) -> str:
    """The name `notebook_path` takes: bare for the audiovisual family, `family/notebook` for the others."""
    return notebook.name if notebook.parent.name == "audiovisual" else f"{notebook.parent.name}/{notebook.name}"


def run_outside_the_cookbook(
    notebook: Path, variables: dict[str, Any], then: str, timeout_s: float = 900
) -> dict[str, Any]:
    """Run the notebook's quickstart and call cells, then `then`, in a fresh interpreter without the cookbook, in the
    notebook's own folder (where its assets are), and return what `then` printed after `RESULT `."""
    assignments = "".join(f"{name} = {value!r}\n" for name, value in variables.items())
    code = "\n".join([PRELUDE, assignments, cell(_name(notebook), "quickstart"), cell(_name(notebook), "call"), then])
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=notebook.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert done.returncode == 0, f"the lesson cells failed outside the cookbook:\n{done.stderr[-4000:]}"
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"`then` printed no RESULT line:\n{done.stdout[-2000:]}"
    return json.loads(lines[-1].removeprefix("RESULT "))
