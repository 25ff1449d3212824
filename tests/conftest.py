"""Shared fixtures. Built checkpoints live in a per-session folder so tests never touch ~/.cache, unless
`$COSMOS3_TEST_CACHE` names one to keep (the GPU runner does: its nano-random checkpoint is 31 GB)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from local_server.server import LocalServer

# The session server asks for a key, as a shared server should; every test that talks to it sends this one.
SERVER_KEY = "cookbook-test-key"


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    kept = os.environ.get("COSMOS3_TEST_CACHE")
    cache = Path(kept) if kept else tmp_path_factory.mktemp("cosmos3-cache")
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
        yield running


@pytest.fixture(scope="session")
def omni_server_nosound(_isolated_cache: Path) -> Iterator[LocalServer]:
    """A second real server, on `tiny-nosound` (the shape of nvidia/Cosmos3-Nano-Policy-DROID): the action
    notebook's policy is served there, as a reader's policy checkpoint is."""
    with LocalServer.start("tiny-nosound", api_key=SERVER_KEY, flags=["--no-guardrails"], progress=False) as running:
        yield running


@pytest.fixture(scope="session")
def http(omni_server: LocalServer) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {SERVER_KEY}"}
    with httpx.Client(base_url=omni_server.base_url, headers=headers, timeout=300) as client:
        yield client


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A test on the real server needs its environment and minutes: never in the quick tier, marked or not.
    for item in items:
        if "omni_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


# Each notebook runs once per session, at smoke size on the tiny checkpoints, and every test of it reads that run: its
# files, its manifest and what it printed (tests/notebook_checks). The vLLM-Omni notebooks use the session's servers,
# but for the post-training one, whose first Run All starts a server of its own after it has an adapter.
def _smoke_run(factory: pytest.TempPathFactory, name: str, **parameters: object) -> Path:
    from tests.notebook_checks import execute_smoke

    return execute_smoke(name, factory.mktemp(name.replace("/", "-").removesuffix(".ipynb")), **parameters)


def _served_run(factory: pytest.TempPathFactory, name: str, server: LocalServer, **parameters: object) -> Path:
    return _smoke_run(factory, name, BASE_URL=server.base_url, API_KEY=SERVER_KEY, **parameters)


@pytest.fixture(scope="session")
def audiovisual_diffusers_run(tmp_path_factory: pytest.TempPathFactory, _isolated_cache: Path) -> Path:
    """The audiovisual Diffusers notebook with every mode, the comparison section and the offline 4-step checkpoint:
    the executed notebook."""
    from tests.notebook_checks import SESSION

    return _smoke_run(tmp_path_factory, "run_with_diffusers.ipynb", **SESSION["run_with_diffusers.ipynb"])


@pytest.fixture(scope="session")
def audiovisual_vllm_run(tmp_path_factory: pytest.TempPathFactory, omni_server: LocalServer) -> Path:
    """The audiovisual vLLM-Omni notebook against the session's server, every mode, the comparison section, and the
    offline 4-step checkpoint on a server the notebook starts and stops itself (DISTILLED_BASE_URL="auto")."""
    from tests.notebook_checks import SESSION

    return _served_run(tmp_path_factory, "run_with_vllm_omni.ipynb", omni_server, **SESSION["run_with_vllm_omni.ipynb"])


@pytest.fixture(scope="session")
def action_diffusers_run(tmp_path_factory: pytest.TempPathFactory, _isolated_cache: Path) -> Path:
    return _smoke_run(tmp_path_factory, "action/run_with_diffusers.ipynb")


@pytest.fixture(scope="session")
def action_vllm_run(
    tmp_path_factory: pytest.TempPathFactory, omni_server: LocalServer, omni_server_nosound: LocalServer
) -> Path:
    name = "action/run_with_vllm_omni.ipynb"
    return _served_run(tmp_path_factory, name, omni_server, POLICY_BASE_URL=omni_server_nosound.base_url)


@pytest.fixture(scope="session")
def transfer_diffusers_run(tmp_path_factory: pytest.TempPathFactory, _isolated_cache: Path) -> Path:
    return _smoke_run(tmp_path_factory, "transfer/run_with_diffusers.ipynb")


@pytest.fixture(scope="session")
def transfer_vllm_run(tmp_path_factory: pytest.TempPathFactory, omni_server: LocalServer) -> Path:
    return _served_run(tmp_path_factory, "transfer/run_with_vllm_omni.ipynb", omni_server)


@pytest.fixture(scope="session")
def dataset_diffusers_run(tmp_path_factory: pytest.TempPathFactory, _isolated_cache: Path):
    """The dataset Diffusers notebook on the bundled spec, its kernel killed after a few jobs, then run again to the
    end in the same OUTPUT_DIR."""
    from tests.dataset_checks import killed_kernel_then_resumed

    return killed_kernel_then_resumed(tmp_path_factory.mktemp("dataset-diffusers"))


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

    return killed_at_the_first_save_then_resumed(tmp_path_factory.mktemp("post-training-resumed"))
