"""Repository rules that keep the notebooks runnable and reviewable: committed without outputs, kernel python3,
one parameters cell of documented literals, one title, and ruff-clean code and notebooks."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import papermill
import pytest

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "cookbooks").rglob("*.ipynb"))


def test_there_are_notebooks():
    assert [p.name for p in NOTEBOOKS if p.name == "run_with_diffusers.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_committed_clean_on_python3_with_its_parameters_first(path):
    nb = json.loads(path.read_text())
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    code = [cell for cell in nb["cells"] if cell["cell_type"] == "code"]
    for cell in code:
        assert cell["outputs"] == [] and cell["execution_count"] is None, "strip outputs before committing"
    assert code[0].get("metadata", {}).get("tags") == ["parameters"], "the parameters cell is the first code cell"
    titles = [c for c in nb["cells"] if c["cell_type"] == "markdown" and "".join(c["source"]).startswith("# ")]
    assert len(titles) == 1 and nb["cells"][0] is titles[0], "one H1 title, first"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_parameters_cell_holds_only_documented_literals(path):
    nb = json.loads(path.read_text())
    tagged = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1
    source = "".join(tagged[0]["source"])
    for node in ast.parse(source).body:
        assert isinstance(node, ast.AnnAssign), "parameters are `NAME: type = literal  # help`, nothing else"
        ast.literal_eval(node.value)
    for line in source.splitlines():
        assert "  # " in line, f"parameter without a help comment: {line}"
    # papermill parses the cell with its own regex: every assignment must come out as a parameter (an "=" inside
    # a help comment once hid one).
    declared = {node.target.id for node in ast.parse(source).body}
    assert declared == set(papermill.inspect_notebook(str(path)))


def test_ruff_lints_code_and_notebooks():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is a dev dependency"
    check = subprocess.run([ruff, "check", "."], cwd=REPO, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout[-4000:]
    fmt = subprocess.run([ruff, "format", "--check", "."], cwd=REPO, capture_output=True, text=True)
    assert fmt.returncode == 0, fmt.stdout[-4000:]


# A committed file must make sense on any machine: no path from the machines where it was written or run, and no
# reference to material outside the repository.
MACHINE_PATH = re.compile(r"\.\./shared\b|(?<![\w.<>:-])/(?:work|farm|opt|tmp|home|Users|root)/\S")


def test_committed_files_carry_no_machine_paths():
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    found = []
    for name in filter(None, listed.decode().split("\0")):
        try:
            text = (REPO / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        found += [
            f"{name}:{n}: {line.strip()[:120]}"
            for n, line in enumerate(text.splitlines(), 1)
            if MACHINE_PATH.search(line)
        ]
    assert not found, "replace these with paths relative to the repository:\n" + "\n".join(found[:20])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_notebook_opens_short_and_links_no_measurement_files(path):
    """What a reader meets before the parameters is a few hundred words: what Cosmos 3 is, what the notebook teaches,
    what it needs, and the no-GPU way in; measurements live in docs/performance.md, not in the lesson."""
    cells = json.loads(path.read_text())["cells"]
    first_code = next(i for i, c in enumerate(cells) if c["cell_type"] == "code")
    opening = " ".join("".join(c["source"]) for c in cells[:first_code] if c["cell_type"] == "markdown")
    assert len(re.findall(r"[A-Za-z0-9_`'-]+", opening)) <= 300
    assert "scripts/demo.sh" in opening and "Workshops" in opening
    assert not [c for c in cells if "support/benchmarks/results" in "".join(c["source"])]
