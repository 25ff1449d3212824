"""Shared fixtures. Built checkpoints live in a per-session folder so tests never touch ~/.cache, unless
`$COSMOS3_TEST_CACHE` names one to keep (the GPU runner does: its nano-random checkpoint is 31 GB)."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import httpx
import pytest
from filelock import FileLock

from local_server.server import LocalServer

# The session server asks for a key, as a shared server should; every test that talks to it sends this one.
SERVER_KEY = "cookbook-test-key"
# The session's servers, and what asks for each: its fixture and the session runs made against it. Under
# pytest-xdist every test that asks for one, or for the session server's adapters folder, runs on one worker
# (`_write_groups`), so that each server is started once; and a server stops after the last test
# that asks for it, since an idle vLLM-Omni server keeps a sixth of a core busy polling.
NEEDS = {
    "omni_server": frozenset(
        {"omni_server", "http", "audiovisual_vllm_run", "action_vllm_run", "transfer_vllm_run", "dataset_vllm_run"}
    ),
    "omni_server_nosound": frozenset({"omni_server_nosound", "action_vllm_run"}),
}
ON_THE_SERVERS_WORKER = frozenset().union(*NEEDS.values(), {"room_adapters", "post_training_vllm_run"})
_users_left: dict[str, int] = {}
_running: dict[str, LocalServer] = {}
T = TypeVar("T")


def _shared_folder(factory: pytest.TempPathFactory) -> Path:
    """The folder every worker of this test run sees: the parent of a pytest-xdist worker's own temporary folder,
    or the run's own without workers."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _once(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], T]) -> T:
    """`make(folder)` once per test run, whichever worker asks first; the others wait for it and read its result.
    A failed `make` records nothing, so the next worker to ask makes it again, in a folder of its own, and fails with
    its own error."""
    shared = _shared_folder(factory)
    done = shared / f"{name}.pickle"
    with FileLock(shared / f"{name}.lock"):
        if done.exists():
            return pickle.loads(done.read_bytes())
        result = make(Path(tempfile.mkdtemp(prefix=f"{name}-", dir=shared)))
        done.write_bytes(pickle.dumps(result))
        return result


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    kept = os.environ.get("COSMOS3_TEST_CACHE")
    # one cache for all workers: a checkpoint is built in a folder of its own and renamed into place when whole
    cache = Path(kept) if kept else _shared_folder(tmp_path_factory) / "cosmos3-cache"
    cache.mkdir(parents=True, exist_ok=True)
    os.environ["COSMOS3_COOKBOOK_CACHE"] = str(cache)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return cache


@pytest.fixture(scope="session")
def tiny_pipe(_isolated_cache: Path):
    """The tiny checkpoint loaded through `from_pretrained`, on the CPU in float32."""
    from tuning.pipelines import load_pipeline

    pipe, info = load_pipeline("tiny", device="cpu")
    return pipe, info


def notebook_call(pipe):
    """The audiovisual Diffusers notebook's own `generate`, defined by running its `call` cell on `pipe`."""
    from tuning import notebook_calls

    return notebook_calls.define("run_with_diffusers.ipynb", pipe=pipe)["generate"]


@pytest.fixture(scope="session")
def room_adapters(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session server's adapters folder (`--adapters`): the post-training notebooks train theirs inside it."""
    return tmp_path_factory.mktemp("adapters")


@pytest.fixture(scope="session")
def omni_server(_isolated_cache: Path, room_adapters: Path) -> Iterator[LocalServer]:
    """The real vLLM-Omni server (`vllm serve <tiny> --omni`) on the tiny checkpoint, started once per test session
    the way the notebook starts it, taking LoRA adapters from `room_adapters` only. The first session on a machine
    also installs the server's environment (about 5 minutes); later ones reuse it and are ready in about half a
    minute."""
    flags = ["--no-guardrails", "--adapters", str(room_adapters)]
    with LocalServer.start("tiny", api_key=SERVER_KEY, flags=flags, progress=False) as running:
        _running["omni_server"] = running
        yield running


@pytest.fixture(scope="session")
def omni_server_nosound(_isolated_cache: Path) -> Iterator[LocalServer]:
    """A second real server, on `tiny-nosound` (the shape of nvidia/Cosmos3-Nano-Policy-DROID): the action
    notebook's policy is served there, as a reader's policy checkpoint is."""
    with LocalServer.start("tiny-nosound", api_key=SERVER_KEY, flags=["--no-guardrails"], progress=False) as running:
        _running["omni_server_nosound"] = running
        yield running


@pytest.fixture(scope="session")
def http(omni_server: LocalServer) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {SERVER_KEY}"}
    with httpx.Client(base_url=omni_server.base_url, headers=headers, timeout=300) as client:
        yield client


def _asked_for(item: pytest.Item) -> set[str]:
    """The fixtures `item` uses, and those it asks for by name (`request.getfixturevalue`): a test parametrized by a
    fixture's name, or one marked `served` with the names."""
    names = set(getattr(item, "fixturenames", ()))
    callspec = getattr(item, "callspec", None)
    names |= {value for value in (callspec.params.values() if callspec else ()) if isinstance(value, str)}
    served = item.get_closest_marker("served")
    return names | set(served.args if served else ())


def _module_fixtures(item: pytest.Item) -> bool:
    definitions = getattr(item, "_fixtureinfo", None)
    return definitions is not None and any(
        defs[-1].scope == "module" for defs in definitions.name2fixturedefs.values() if defs
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    on_servers = [item for item in items if _asked_for(item) & ON_THE_SERVERS_WORKER]
    for item in on_servers:
        # A test on the real server needs its environment and minutes: never in the quick tier, marked or not.
        item.add_marker(pytest.mark.slow)
    # The policy server's tests run one after another, from where the first of them was, so that it stops early.
    policy = [item for item in items if _asked_for(item) & NEEDS["omni_server_nosound"]]
    if policy:
        first = items.index(policy[0])
        rest = [item for item in items if item not in policy]
        items[:] = [*rest[:first], *policy, *rest[first:]]
    if os.environ.get("PYTEST_XDIST_WORKER"):
        _write_groups(items, on_servers)


# Two workers (scripts/test.sh: `-n 2 --dist loadgroup`) run a group of tests on one of them: every test of the
# session's servers, and a test module whose module-scoped fixtures would otherwise be made on each worker. Any other
# test goes to whichever worker is free, and the session's notebook runs are made once for both (`_once`).
# pytest-xdist 3.8.0's own loadgroup puts a test's group in a suffix of the test's id, which pytest 9.2 no longer
# lets a plugin change (pytest-xdist issue 1386): its groups silently come apart and each worker starts its own
# servers. Here each worker writes the groups to a file that the controller named, and the controller's scheduler
# reads them from it.
GROUPS_FILE = "COSMOS3_TEST_GROUPS"


def _module_fixtures(item: pytest.Item) -> bool:
    definitions = getattr(item, "_fixtureinfo", None)
    return definitions is not None and any(
        defs[-1].scope == "module" for defs in definitions.name2fixturedefs.values() if defs
    )


def _write_groups(items: list[pytest.Item], on_servers: list[pytest.Item]) -> None:
    served_modules = {item.module.__name__ for item in on_servers if _module_fixtures(item)}
    groups = {}
    for item in items:
        if item in on_servers or item.module.__name__ in served_modules:
            groups[item.nodeid] = "servers"
        elif _module_fixtures(item):
            groups[item.nodeid] = item.module.__name__
    path = Path(os.environ[GROUPS_FILE])
    written = path.with_name(f"{path.name}.{os.environ['PYTEST_XDIST_WORKER']}")
    written.write_text(json.dumps(groups))
    written.replace(path)  # whole, whichever worker writes it last: both collect the same tests


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("numprocesses", None) and not os.environ.get("PYTEST_XDIST_WORKER"):
        # the controller, before it starts the workers, which inherit its environment
        os.environ[GROUPS_FILE] = str(Path(tempfile.mkdtemp(prefix="cosmos3-test-groups-")) / "groups.json")


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.getoption("numprocesses", None) and not os.environ.get("PYTEST_XDIST_WORKER"):
        shutil.rmtree(Path(os.environ.pop(GROUPS_FILE)).parent, ignore_errors=True)


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileGroups(LoadScopeScheduling):
        """pytest-xdist's loadgroup, with each test's group read from the file the workers wrote."""

        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:
                self.groups = json.loads(Path(os.environ[GROUPS_FILE]).read_text())
            return self.groups.get(nodeid, nodeid)

    return FileGroups(config, log)


def pytest_collection_finish(session: pytest.Session) -> None:
    for server, needing in NEEDS.items():
        _users_left[server] = sum(1 for item in session.items if _asked_for(item) & needing)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    for server, needing in NEEDS.items():
        if _asked_for(item) & needing:
            _users_left[server] -= 1
            if _users_left[server] == 0 and server in _running:
                _running.pop(server).stop()  # its fixture's own stop at the session's end finds it stopped


# Each notebook runs once per session, at smoke size on the tiny checkpoints, and every test of it reads that run: its
# files, its manifest and what it printed (tests/notebook_checks). The vLLM-Omni notebooks use the session's servers,
# but for the post-training one, whose first Run All starts a server of its own after it has an adapter.
def _smoke_run(factory: pytest.TempPathFactory, name: str, **parameters: object) -> Path:
    from tests.notebook_checks import execute_smoke

    return execute_smoke(name, factory.mktemp(name.replace("/", "-").removesuffix(".ipynb")), **parameters)


def _shared_smoke_run(factory: pytest.TempPathFactory, name: str, **parameters: object) -> Path:
    """`_smoke_run` of a notebook that needs no server, once for all workers."""
    from tests.notebook_checks import execute_smoke

    folder = name.replace("/", "-").removesuffix(".ipynb")
    return _once(factory, folder, lambda out: execute_smoke(name, out, **parameters))


def _served_run(factory: pytest.TempPathFactory, name: str, server: LocalServer, **parameters: object) -> Path:
    return _smoke_run(factory, name, BASE_URL=server.base_url, API_KEY=SERVER_KEY, **parameters)


@pytest.fixture(scope="session")
def audiovisual_diffusers_run(tmp_path_factory: pytest.TempPathFactory, _isolated_cache: Path) -> Path:
    """The audiovisual Diffusers notebook with every mode, the comparison section and the offline 4-step checkpoint:
    the executed notebook."""
    from tests.notebook_checks import SESSION

    return _shared_smoke_run(tmp_path_factory, "run_with_diffusers.ipynb", **SESSION["run_with_diffusers.ipynb"])


@pytest.fixture(scope="session")
def audiovisual_vllm_run(tmp_path_factory: pytest.TempPathFactory, omni_server: LocalServer) -> Path:
    """The audiovisual vLLM-Omni notebook against the session's server, every mode, the comparison section, and the
    offline 4-step checkpoint on a server the notebook starts and stops itself (DISTILLED_BASE_URL="auto")."""
    from tests.notebook_checks import SESSION

    return _served_run(tmp_path_factory, "run_with_vllm_omni.ipynb", omni_server, **SESSION["run_with_vllm_omni.ipynb"])


@pytest.fixture(scope="session")
def action_diffusers_run(tmp_path_factory: pytest.TempPathFactory, _isolated_cache: Path) -> Path:
    return _shared_smoke_run(tmp_path_factory, "action/run_with_diffusers.ipynb")


@pytest.fixture(scope="session")
def action_vllm_run(
    tmp_path_factory: pytest.TempPathFactory, omni_server: LocalServer, omni_server_nosound: LocalServer
) -> Path:
    name = "action/run_with_vllm_omni.ipynb"
    return _served_run(tmp_path_factory, name, omni_server, POLICY_BASE_URL=omni_server_nosound.base_url)


@pytest.fixture(scope="session")
def transfer_diffusers_run(tmp_path_factory: pytest.TempPathFactory, _isolated_cache: Path) -> Path:
    return _shared_smoke_run(tmp_path_factory, "transfer/run_with_diffusers.ipynb")


@pytest.fixture(scope="session")
def transfer_vllm_run(tmp_path_factory: pytest.TempPathFactory, omni_server: LocalServer) -> Path:
    return _served_run(tmp_path_factory, "transfer/run_with_vllm_omni.ipynb", omni_server)


@pytest.fixture(scope="session")
def dataset_diffusers_run(tmp_path_factory: pytest.TempPathFactory, _isolated_cache: Path):
    """The dataset Diffusers notebook on the bundled spec, its kernel killed after a few jobs, then run again to the
    end in the same OUTPUT_DIR."""
    from tests.dataset_checks import killed_kernel_then_resumed

    return _once(tmp_path_factory, "dataset-diffusers", killed_kernel_then_resumed)


@pytest.fixture(scope="session")
def dataset_vllm_run(tmp_path_factory: pytest.TempPathFactory, omni_server: LocalServer):
    """The dataset vLLM-Omni notebook on the bundled spec over the session's server and a second one, which is killed
    while it runs a job."""
    from tests.dataset_checks import killed_server_mid_job

    return killed_server_mid_job(tmp_path_factory.mktemp("dataset-vllm"), omni_server, SERVER_KEY)


@pytest.fixture(scope="session")
def post_training_vllm_run(room_adapters: Path, _isolated_cache: Path):
    """The post-training vLLM-Omni notebook as a reader's first Run All: ADAPTER="auto" in an empty OUTPUT_DIR and
    BASE_URL="auto". It runs its Diffusers twin to train the adapter (the twin's unbroken run), then starts a server
    of its own on that adapter's folder and serves it. The OUTPUT_DIR is inside the session server's adapters
    folder, so that other tests send the same adapter to that server."""
    from tests.post_training_checks import served_with_its_twin

    return served_with_its_twin(room_adapters / "post-training-vllm")


@pytest.fixture(scope="session")
def post_training_resumed_run(tmp_path_factory: pytest.TempPathFactory, _isolated_cache: Path):
    """The post-training Diffusers notebook killed at its first save, then run again under nbmake to the end."""
    from tests.post_training_checks import killed_at_the_first_save_then_resumed

    return _once(tmp_path_factory, "post-training-resumed", killed_at_the_first_save_then_resumed)
