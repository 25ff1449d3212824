"""Shared fixtures. Built checkpoints live in a per-session folder so tests never touch ~/.cache, unless
`$COSMOS3_TEST_CACHE` names one to keep (the GPU runner does: its nano-random checkpoint is 31 GB)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from omni_standin.launcher import LocalServer


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
    from cookbook_tools.pipelines import load_pipeline

    pipe, info = load_pipeline("tiny", device="cpu")
    return pipe, info


@pytest.fixture(scope="module")
def server(_isolated_cache: Path) -> Iterator[LocalServer]:
    """A stand-in server on the tiny checkpoint, one per test module (a module may override it)."""
    with LocalServer.start("tiny", device="cpu") as running:
        yield running


@pytest.fixture(scope="module")
def http(server: LocalServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=120) as client:
        yield client
