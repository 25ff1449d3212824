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
