"""Where a benchmark's result goes: a JSON file (its folder made if need be), also printed, stamped with the versions
it was measured with."""

from __future__ import annotations

import json
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from helpers import environment

# Beyond `helpers.environment.PACKAGES`: what the GPU results depend on.
MEASURED_WITH = ("accelerate", "flash-attn-4", "nvidia-cutlass-dsl", "torchao", "fa3-fwd")


def versions() -> dict[str, str]:
    """Python and the libraries a result depends on, and CUDA where torch was imported with it."""
    found = environment.versions()
    for name in MEASURED_WITH:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    torch = sys.modules.get("torch")
    if torch is not None and torch.version.cuda:
        found["cuda"] = torch.version.cuda
    return found


def write(result: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({**result, "versions": versions()}, indent=2)
    path.write_text(text + "\n")
    print(text)
