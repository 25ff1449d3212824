"""Where code lives. `import helpers` is this repository's package (a PyPI project is also called helpers); it holds
what two or more families use, each family's own code sits beside its notebooks (`cosmos3_<family>`), and support/
holds the infrastructure. Importing any module of the project loads no model, starts nothing and touches no file,
no module imports one above it in the layout, and there is no import cycle."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import helpers
from tests.source_imports import FAMILIES, imported_modules, package_dir

REPO = Path(__file__).resolve().parent.parent
# Every importable module of the project's packages; `tuning.several_gpus.__main__` runs a rank of a parallel run, by
# design. `helpers` is what the families share, `cosmos3_<family>` one family's own; the others are infrastructure,
# named for what they do.
INFRASTRUCTURE = ("checkpoints", "local_server", "tuning", "generation_form")
PACKAGES = ("helpers", *FAMILIES, *INFRASTRUCTURE, "cookbook_tools")
SUPPORT = {"checkpoints", "local_server", "tuning", "generation_form", "cookbook_tools"}


def test_import_helpers_resolves_to_this_repository():
    assert Path(helpers.__file__).resolve() == REPO / "helpers" / "__init__.py"


def test_each_familys_package_sits_beside_its_notebooks_and_imports_from_any_folder(tmp_path):
    code = "import importlib\n" + "".join(f"print(importlib.import_module({name!r}).__file__)\n" for name in FAMILIES)
    found = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert found.stdout.split() == [str(REPO / folder / "__init__.py") for folder in FAMILIES.values()]
    for name, folder in FAMILIES.items():
        family = name.removeprefix("cosmos3_")
        assert (REPO / folder).parent == REPO / "cookbooks" / "cosmos3" / "generator" / family
        assert sorted((REPO / folder).parent.glob("run_with_*.ipynb")), f"{folder} has no notebooks beside it"


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


def _notebook_imports(notebook: Path) -> set[str]:
    cells = json.loads(notebook.read_text())["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    # IPython's magics are not Python: each becomes a `pass` at its indentation.
    lines = [re.sub(r"^(\s*)[%!].*", r"\1pass", line) for line in code.splitlines()]
    return _imported_modules("\n".join(lines))


def _modules(package: str) -> dict[str, Path]:
    """Each module of a package (`helpers`, a family's or a support/ one) by its dotted name."""
    folder = REPO / (package_dir(package) if package not in SUPPORT else f"support/{package}")
    return {
        ".".join((package, *path.relative_to(folder).with_suffix("").parts)).removesuffix(".__init__"): path
        for path in folder.rglob("*.py")
    }


def _graph() -> dict[str, set[str]]:
    """What each module of the project imports, limited to the project's own modules."""
    modules = {name: path for package in PACKAGES for name, path in _modules(package).items()}
    graph = {}
    for name, path in modules.items():
        imported = _imported_modules(path.read_text())
        # A package's own modules import it first by Python's rules, not by a choice of the code: no edge to it.
        graph[name] = {m for m in imported if m in modules and m != name and not name.startswith(m + ".")}
    return graph


def _family_of(notebook: Path) -> str:
    return notebook.parent.name


def test_helpers_holds_only_what_two_or_more_families_use_and_no_formatting_golf():
    """Every module of `helpers/` is reached from at least two families: from their notebooks' imports or their own
    package's, directly or through another helpers module. What one family alone uses belongs in its package."""
    helpers_modules = _modules("helpers")
    graph = _graph()
    reached: dict[str, set[str]] = {name: set() for name in helpers_modules}
    starts: dict[str, set[str]] = {}
    for notebook in (REPO / "cookbooks").rglob("*.ipynb"):
        starts.setdefault(_family_of(notebook), set()).update(_notebook_imports(notebook))
    for package in FAMILIES:
        family = package.removeprefix("cosmos3_")
        for imports in (graph[name] for name in _modules(package)):
            starts.setdefault(family, set()).update(imports)
    for family, frontier in starts.items():
        seen: set[str] = set()
        frontier = {m for m in frontier if m in helpers_modules}
        while frontier:
            name = frontier.pop()
            if name not in seen:
                seen.add(name)
                reached[name].add(family)
                frontier |= {m for m in graph[name] if m in helpers_modules}
    lonely = {name: sorted(families) for name, families in reached.items() if len(families) < 2 and name != "helpers"}
    assert not lonely, f"helpers/ modules fewer than two families use: move each into its family's package: {lonely}"
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
    {"helpers.assets", "helpers.canvases", "helpers.media", "helpers.models", "helpers.speeds"},
    {"helpers.settings", "helpers.environment"},
    {"helpers.audiovisual_settings", "helpers.display"},
    {"helpers.prompts", "helpers.runs"},
]


def _layer(module: str) -> int:
    for level, members in enumerate(LAYERS):
        if module in members:
            return level
    raise AssertionError(f"{module} is in no layer of tests/test_package.py's LAYERS: add it where it belongs")


def test_nothing_imports_a_module_above_it_in_the_layout():
    """helpers (in its layers) < a family's package < support/, and the notebooks over all: helpers imports no
    family's package and nothing of support/; a family's package imports helpers and itself, no other family's and
    nothing of support/."""
    wrong = []
    for module, imports in _graph().items():
        top = module.split(".")[0]
        for imported in imports:
            other = imported.split(".")[0]
            if top == "helpers" and other != "helpers":
                wrong.append(f"{module} imports {imported}: helpers holds what families share, and imports only itself")
            elif top == "helpers" and "helpers" not in (module, imported) and _layer(imported) > _layer(module):
                wrong.append(f"{module} (layer {_layer(module)}) imports {imported} (layer {_layer(imported)})")
            elif top in FAMILIES and other not in ("helpers", top):
                wrong.append(f"{module} imports {imported}: a family's package imports only helpers and itself")
    assert not wrong, "\n".join(wrong)


def test_there_is_no_import_cycle():
    graph = _graph()
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> list[str] | None:
        if name in path:
            return path[path.index(name) :] + [name]
        if name in done:
            return None
        for imported in sorted(graph[name]):
            cycle = visit(imported, [*path, name])
            if cycle:
                return cycle
        done.add(name)
        return None

    for name in sorted(graph):
        cycle = visit(name, [])
        assert cycle is None, " -> ".join(cycle)


def test_only_the_tuning_notebook_the_benchmarks_and_tuning_itself_import_tuning():
    """The cookbook's own speed patches and the several-GPU runner stay out of the main notebooks and of every
    package they import."""
    wrong = [
        f"{module} imports {imported}"
        for module, imports in _graph().items()
        for imported in imports
        if imported.split(".")[0] == "tuning" and module.split(".")[0] != "tuning"
    ]
    for notebook in (REPO / "cookbooks").rglob("run_with_*.ipynb"):
        wrong += [f"{notebook.name} imports {m}" for m in _notebook_imports(notebook) if m.startswith("tuning")]
    assert not wrong, "\n".join(wrong)


def _code_units() -> dict[str, str]:
    """The project's code a reader meets: every module of the packages, and each notebook code cell on its own."""
    units = {
        str(path.relative_to(REPO)): path.read_text() for package in PACKAGES for path in _modules(package).values()
    }
    units |= {str(path.relative_to(REPO)): path.read_text() for path in (REPO / "support" / "benchmarks").glob("*.py")}
    for notebook in (REPO / "cookbooks").rglob("*.ipynb"):
        for index, cell in enumerate(json.loads(notebook.read_text())["cells"]):
            if cell["cell_type"] == "code":
                units[f"{notebook.relative_to(REPO)}#{index}"] = "".join(cell["source"])
    return units


def _meaningful_lines(text: str) -> list[tuple[int, str]]:
    """(line number, text) of the lines that carry code, strings and numbers read as placeholders: no blank,
    comment, import or punctuation-only line, and no line that holds a literal alone (data, not code)."""
    kept = []
    for number, line in enumerate(text.splitlines(), 1):
        text = line.strip()
        if not text or text.startswith(("#", "import ", "from ")):
            continue
        text = re.sub(r"[rbfu]{0,2}('[^']*'|\"[^\"]*\")", "STR", text)
        text = re.sub(r"\b\d+(\.\d+)?\b", "NUM", text)
        if re.fullmatch(r"(?:STR|NUM|[\W_])*", text):
            continue
        kept.append((number, re.sub(r"\s+", " ", text)))
    return kept


def test_no_block_of_ten_lines_is_written_twice_but_in_a_familys_two_mirrored_notebooks():
    """A block of code is written once: no run of 10 lines (alike but for strings and numbers) stands in two modules,
    two notebook cells or one of each, except in a family's two notebooks, which mirror each other."""
    length = 10
    where: dict[tuple[str, ...], set[str]] = {}
    for name, text in _code_units().items():
        lines = _meaningful_lines(text)
        for start in range(len(lines) - length + 1):
            run = tuple(line for _, line in lines[start : start + length])
            where.setdefault(run, set()).add(f"{name}:{lines[start][0]}")

    def mirrored(a: str, b: str) -> bool:
        first, second = (Path(place.split("#")[0]) for place in (a, b))
        twins = {"run_with_diffusers.ipynb", "run_with_vllm_omni.ipynb"}
        return first.parent == second.parent and {first.name, second.name} == twins

    twice = set()
    for places in where.values():
        units = sorted({place.rsplit(":", 1)[0]: place for place in places}.items())
        for i, (unit, place) in enumerate(units):
            twice |= {(place, other) for other_unit, other in units[i + 1 :] if not mirrored(unit, other_unit)}
    assert not twice, "blocks written twice: write each once\n" + "\n".join(f"{a} ~ {b}" for a, b in sorted(twice))
