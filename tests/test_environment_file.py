"""environment.yml installs exactly what pyproject.toml declares, and the CPU constraint pins torch."""

import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent


def test_environment_yml_lists_the_package_dependencies():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = set(project["dependencies"]) | set(project["optional-dependencies"]["dev"])
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    listed = {line for line in pip_section if not line.startswith("-e")}
    assert listed == declared
    assert "-e ." in pip_section
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python="))
    assert python == f"python={project['requires-python'].removeprefix('>=')}"


def test_cpu_constraint_pins_the_local_torch_build_while_the_requirement_stays_loose():
    assert (REPO / "tools" / "constraints" / "cpu.txt").read_text().split() == ["torch==2.13.0"]
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    torch_req = next(d for d in project["dependencies"] if d.startswith("torch"))
    assert ">=" in torch_req and "==" not in torch_req
