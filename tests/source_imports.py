"""What a piece of source imports, for the tests that follow imports from the notebooks through the project."""

from __future__ import annotations

import ast


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


# Each family's own package, beside its notebooks (pyproject.toml's package-dir maps the same folders).
FAMILIES = {
    "cosmos3_audiovisual": "cookbooks/cosmos3/generator/audiovisual/cosmos3_audiovisual",
    "cosmos3_action": "cookbooks/cosmos3/generator/action/cosmos3_action",
    "cosmos3_transfer": "cookbooks/cosmos3/generator/transfer/cosmos3_transfer",
    "cosmos3_dataset": "cookbooks/cosmos3/generator/dataset/cosmos3_dataset",
}


def package_dir(package: str) -> str:
    """The folder of `helpers` or of a family's package, relative to the repository."""
    return FAMILIES.get(package, package)
