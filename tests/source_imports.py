"""What a piece of source imports, for the tests that follow imports from the notebooks through the project."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path


def imported_modules(tree: ast.AST) -> set[str]:
    """Every module `tree` imports, and each `from` import as `module.name` too (it may name a submodule)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


# Where each installed package lives in the repository (pyproject.toml's package-dir); `helpers` is at the top.
PACKAGE_DIRS: dict[str, str] = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())[
    "tool"
]["setuptools"]["package-dir"]
# Each family's own package, beside its notebooks.
FAMILIES = {name: folder for name, folder in PACKAGE_DIRS.items() if name.startswith("cosmos3_")}


def package_dir(package: str) -> str:
    """The folder of a package, relative to the repository."""
    return PACKAGE_DIRS.get(package, package)
