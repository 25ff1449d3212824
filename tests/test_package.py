"""`import helpers` is this repository's package (a PyPI project is also called helpers), and importing any module
of the project loads no model, starts nothing and touches no file."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import helpers
from tests.source_imports import imported_modules

REPO = Path(__file__).resolve().parent.parent
# Every importable module of the project's packages; `tuning.several_gpus.__main__` runs a rank of a parallel run, by
# design. `helpers` is what the lessons import; the others are infrastructure, named for what they do.
PACKAGES = ("helpers", "checkpoints", "local_server", "tuning", "generation_form", "cookbook_tools")
INFRASTRUCTURE = ("checkpoints", "local_server", "tuning", "generation_form")


def test_import_helpers_resolves_to_this_repository():
    assert Path(helpers.__file__).resolve() == REPO / "helpers" / "__init__.py"


def test_importing_every_module_loads_no_model_and_touches_no_files(tmp_path):
    code = (
        "import importlib, os, pkgutil, sys\n"
        f"packages = {PACKAGES!r}\n"
        "names = []\n"
        "for name in packages:\n"
        "    package = importlib.import_module(name)\n"
        "    names += [m.name for m in pkgutil.walk_packages(package.__path__, name + '.')]\n"
        "names = [n for n in names if not n.endswith('__main__')]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "assert len(names) > 20, names\n"
        "assert 'torch' not in sys.modules, 'importing the project must not import torch'\n"
        "assert 'diffusers' not in sys.modules\n"
        "assert os.listdir('.') == [], os.listdir('.')\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "COSMOS3_COOKBOOK_CACHE": str(tmp_path / "cache")}
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, check=True)
    assert not (tmp_path / "cache").exists()


def _imported_modules(source: str) -> set[str]:
    return imported_modules(
        compile(source, "<source>", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    )


def test_helpers_holds_what_the_notebooks_import_and_no_formatting_golf():
    """Every module of `helpers/` is reached from a notebook's imports (directly or through another helpers module),
    and none is squeezed with `# fmt: skip` (a line cap once led to that)."""
    modules = {
        ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): p
        for p in (REPO / "helpers").rglob("*.py")
    }
    reached: set[str] = set()
    frontier: set[str] = set()
    for notebook in (REPO / "cookbooks").rglob("*.ipynb"):
        cells = json.loads(notebook.read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        # IPython's magics are not Python: each becomes a `pass` at its indentation.
        lines = [re.sub(r"^(\s*)[%!].*", r"\1pass", line) for line in code.splitlines()]
        frontier |= _imported_modules("\n".join(lines))
    while frontier:
        name = frontier.pop()
        if name in modules and name not in reached:
            reached.add(name)
            frontier |= _imported_modules(modules[name].read_text())
    # A package's `__main__` is reached by `python -m` (the several-GPU runner's, by torchrun), not by an import.
    reached |= {name for name in modules if name.endswith(".__main__") and name.removesuffix(".__main__") in reached}
    packages = {name for name, path in modules.items() if path.name == "__init__.py"}
    assert set(modules) - packages - reached == set(), "helpers/ modules no notebook imports: move them out"
    marker = "fmt: " + "skip"
    tracked = subprocess.run(["git", "ls-files", "*.py", "*.ipynb"], cwd=REPO, capture_output=True, text=True).stdout
    golf = [
        f"{name}:{n}"
        for name in tracked.split()
        for n, line in enumerate((REPO / name).read_text().splitlines(), 1)
        if marker in line and name != "tests/test_package.py"
    ]
    assert not golf, f"let the formatter lay these out: {golf}"


# The layers of `helpers/`, lowest first. A module may import its own layer and the ones below, never one above.
LAYERS = [
    {"helpers.errors"},
    {
        "helpers.assets",
        "helpers.canvases",
        "helpers.media",
        "helpers.models",
        "helpers.speeds",
        "helpers.schedules",
        "helpers.long_video",
    },
    {
        "helpers.settings",
        "helpers.actions",
        "helpers.transfer_settings",
        "helpers.action_settings",
        "helpers.trajectories",
    },
    {"helpers.audiovisual_settings", "helpers.environment", "helpers.display"},
    {"helpers.prompts", "helpers.runs", "helpers.diffusers_pipe", "helpers.dataset_spec", "helpers.dataset_folder"},
]


def _layer(module: str) -> int:
    for level, members in enumerate(LAYERS):
        if module in members:
            return level
    raise AssertionError(f"{module} is in no layer of tests/test_package.py's LAYERS: add it where it belongs")


def _modules(package: str) -> dict[str, set[str]]:
    """Each module of a package and what it imports."""
    return {
        ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): _imported_modules(
            path.read_text()
        )
        for path in (REPO / package).rglob("*.py")
    }


def test_helpers_imports_only_downwards_and_never_the_infrastructure_or_tools_beside_it():
    wrong = []
    for module, imports in _modules("helpers").items():
        if module == "helpers":
            continue
        for imported in imports:
            if imported.split(".")[0] in (*INFRASTRUCTURE, "cookbook_tools"):
                wrong.append(f"{module} imports {imported}, which is not part of the lesson package")
            elif imported.startswith("helpers.") and _layer(".".join(imported.split(".")[:2])) > _layer(module):
                wrong.append(f"{module} (layer {_layer(module)}) imports {imported}")
    assert not wrong, "\n".join(wrong)


def test_only_the_tuning_notebook_and_tuning_itself_import_tuning():
    """The cookbook's own speed patches and the several-GPU runner stay out of the main notebooks and of every
    package they import."""
    wrong = [
        f"{module} imports {imported}"
        for package in ("helpers", "checkpoints", "local_server", "generation_form")
        for module, imports in _modules(package).items()
        for imported in imports
        if imported.split(".")[0] == "tuning"
    ]
    for notebook in (REPO / "cookbooks").rglob("run_with_*.ipynb"):
        cells = json.loads(notebook.read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        lines = [re.sub(r"^(\s*)[%!].*", r"\1pass", line) for line in code.splitlines()]
        wrong += [f"{notebook.name} imports {m}" for m in _imported_modules("\n".join(lines)) if m.startswith("tuning")]
    assert not wrong, "\n".join(wrong)
