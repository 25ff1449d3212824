"""The suite on two pytest-xdist workers (scripts/test.sh): the hooks of tests/conftest.py keep every test that talks
to the session's servers on one worker, so that each server starts once, and make a session run once for both.

A small suite of its own runs here under `-n 2 --dist loadgroup` with those hooks, and a stand-in for the session
server that only says which worker made it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

CONFTEST = """
import os

import pytest

from tests.conftest import (
    _once,
    pytest_collection_finish,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_unconfigure,
    pytest_xdist_make_scheduler,
)


@pytest.fixture(scope="session")
def omni_server():
    return os.environ["PYTEST_XDIST_WORKER"]


@pytest.fixture(scope="session")
def made(tmp_path_factory):
    return _once(tmp_path_factory, "made", lambda folder: os.environ["PYTEST_XDIST_WORKER"])
"""

TESTS = """
import os
import time
from pathlib import Path

import pytest

OUT = Path(os.environ["WORKERS_OUT"])


@pytest.mark.parametrize("i", range(6))
def test_served(omni_server, i):
    (OUT / f"served-{i}").write_text(f"{os.environ['PYTEST_XDIST_WORKER']} {omni_server}")


@pytest.mark.parametrize("fixture", ["omni_server"])
def test_asks_by_name(request, fixture):
    (OUT / "by-name").write_text(f"{os.environ['PYTEST_XDIST_WORKER']} {request.getfixturevalue(fixture)}")


@pytest.mark.parametrize("i", range(6))
def test_free(made, i):
    time.sleep(0.5)  # long enough that the free worker takes some
    (OUT / f"free-{i}").write_text(f"{os.environ['PYTEST_XDIST_WORKER']} {made}")
"""


@pytest.mark.slow  # two workers start: seconds
def test_the_servers_tests_share_one_worker_and_a_session_run_is_made_once(tmp_path: Path) -> None:
    suite, out, base = tmp_path / "suite", tmp_path / "out", tmp_path / "base"
    suite.mkdir()
    out.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_suite.py").write_text(TESTS)
    environment = {**os.environ, "WORKERS_OUT": str(out), "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [*command, f"--basetemp={base}", "-q", str(suite)], cwd=suite, env=environment, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ran = {path.name: path.read_text().split() for path in out.iterdir()}
    served = [ran[f"served-{i}"] for i in range(6)] + [ran["by-name"]]
    assert len({worker for worker, _ in served}) == 1, served  # one worker ran every test of the server...
    assert {server for _, server in served} == {served[0][0]}  # ...and made the server itself
    free = [ran[f"free-{i}"] for i in range(6)]
    assert {worker for worker, _ in free} == {"gw0", "gw1"}, free  # the rest went to both workers
    assert len({maker for _, maker in free}) == 1, free  # the run they read was made once, by one of them
    assert len(list(base.glob("made-*"))) == 1
