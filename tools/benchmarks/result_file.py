"""Where a benchmark's result goes: a JSON file (its folder made if need be), also printed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write(result: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(result, indent=2)
    path.write_text(text + "\n")
    print(text)
