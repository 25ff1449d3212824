"""What the real vLLM-Omni server costs to install and start on this machine, from nothing.

Creates the server's environment in a new folder with pip's cache off (every package downloaded, as on a machine
that never had it), then starts `tiny` from it and times its readiness. Writes the install time, the environment's
size on disk and the start-up time to support/benchmarks/results/server_install_<cpu|cuda>.json.

    python support/benchmarks/server_install.py
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import result_file

RESULTS = Path(__file__).parent / "results"


def _size_gb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink()) / 1e9


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)

    from local_server import launcher
    from local_server.server import LocalServer

    gpu = launcher.wants_gpu()
    folder = Path(tempfile.mkdtemp(prefix="vllm-omni-env-"))
    os.environ[launcher.ENV_VAR] = str(folder / "env")
    os.environ["PIP_NO_CACHE_DIR"] = "1"
    try:
        started = time.perf_counter()
        subprocess.run(["bash", "scripts/serve_vllm_omni.sh", "--install"], cwd=launcher.REPOSITORY, check=True)
        install_s = time.perf_counter() - started
        size_gb = _size_gb(folder / "env")
        started = time.perf_counter()
        with LocalServer.start("tiny", flags=["--no-guardrails"], progress=False):
            ready_s = time.perf_counter() - started
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    result = {
        "what": "the vLLM-Omni server's environment created from nothing (pip cache off), then `tiny` started from it",
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "gpu": gpu},
        "install_s": round(install_s, 1),
        "environment_gb": round(size_gb, 2),
        "tiny_ready_s": round(ready_s, 1),
    }
    result_file.write(
        result, Path(args.out) if args.out else RESULTS / f"server_install_{'cuda' if gpu else 'cpu'}.json"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
