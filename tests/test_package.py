"""`import helpers` is this repository's package (a PyPI project is also called helpers), and importing any module
of the project loads no model, starts nothing and touches no file."""

import subprocess
import sys
from pathlib import Path

import helpers

REPO = Path(__file__).resolve().parent.parent
# Every importable module of the project's packages; `omni_standin.__main__` starts a server and
# `parallel_diffusers.__main__` a rank of a parallel run, by design.
PACKAGES = ("helpers", "cookbook_ui", "random_checkpoints", "omni_standin", "cookbook_tools", "parallel_diffusers")


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


def test_the_helpers_package_stays_small():
    # The notebooks' package holds what they import; the server, the tools and the benchmarks live elsewhere.
    lines = sum(len(p.read_text().splitlines()) for p in (REPO / "helpers").rglob("*.py"))
    assert lines <= 2500, f"helpers/ has {lines} lines of Python"
