"""The main notebooks of every family, in both runtimes, and every module of the project they import, use only the
public API of diffusers, transformers and vLLM-Omni: no private name imported, and no private attribute read or set
on an object that is not the project's own. The tuning package's private seams are listed and tested in
tests/test_diffusers_internals.py instead."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from tests.source_imports import FAMILIES, imported_modules, package_dir

REPO = Path(__file__).resolve().parent.parent
PROJECT_PACKAGES = ("helpers", *FAMILIES, "checkpoints", "local_server", "generation_form", "tuning")
LIBRARIES = ("diffusers", "transformers", "vllm", "vllm_omni")
MAIN_NOTEBOOKS = sorted((REPO / "cookbooks").rglob("run_with_*.ipynb"))


def _notebook_code(path: Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    return "\n".join(re.sub(r"^(\s*)[%!].*", r"\1pass", line) for line in code.splitlines())  # magics are not Python


def _module_path(name: str) -> Path | None:
    top, *rest = name.split(".")
    base = REPO.joinpath(package_dir(top), *rest)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _reached() -> dict[str, ast.AST]:
    """The notebooks and every project module they import, directly or through each other."""
    trees: dict[str, ast.AST] = {p.relative_to(REPO).as_posix(): ast.parse(_notebook_code(p)) for p in MAIN_NOTEBOOKS}
    frontier = set().union(*(imported_modules(t) for t in trees.values()))
    while frontier:
        name = frontier.pop()
        if name.split(".")[0] not in PROJECT_PACKAGES or (path := _module_path(name)) is None:
            continue
        key = path.relative_to(REPO).as_posix()
        if key not in trees:
            trees[key] = ast.parse(path.read_text())
            frontier |= imported_modules(trees[key])
    return trees


def _own_private_names() -> set[str]:
    """Private names the project defines itself (its own classes' attributes and functions)."""
    own = set()
    for package in PROJECT_PACKAGES:
        for path in (REPO / package_dir(package)).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name.startswith("_"):
                    own.add(node.name)
                stored = isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                if stored and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                    own.add(node.attr)
    return own


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(key: str, tree: ast.AST, own: set[str]) -> list[str]:
    wrong = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in LIBRARIES:
            names = [*node.module.split("."), *(a.name for a in node.names)]
            wrong += [f"{key}:{node.lineno} imports {node.module}.{n}" for n in names if _private(n)]
        elif isinstance(node, ast.Import):
            wrong += [
                f"{key}:{node.lineno} imports {a.name}"
                for a in node.names
                if a.name.split(".")[0] in LIBRARIES and any(_private(p) for p in a.name.split("."))
            ]
        elif isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in own:
            base = ast.unparse(node.value)
            if base not in ("self", "cls"):
                wrong.append(f"{key}:{node.lineno} uses {base}.{node.attr}")
    return wrong


def test_the_main_notebooks_and_what_they_import_use_no_private_library_name():
    trees = _reached()
    assert any(key.startswith("helpers/") for key in trees) and len(trees) > len(MAIN_NOTEBOOKS) == 10, sorted(trees)
    own = _own_private_names()
    wrong = [line for key, tree in trees.items() for line in private_uses(key, tree, own)]
    assert not wrong, "private library names on the main path:\n" + "\n".join(sorted(wrong))


def test_the_check_sees_private_names():
    """The check above can fail: reading or setting a pipeline's private attribute, or importing a private name."""
    code = "mean = pipe._vae_latents_mean\npipe._interrupt = True\nfrom diffusers.utils import _get_model_file\n"
    found = sorted(line.split(" ", 1)[1] for line in private_uses("cell", ast.parse(code), _own_private_names()))
    assert found == ["imports diffusers.utils._get_model_file", "uses pipe._interrupt", "uses pipe._vae_latents_mean"]
