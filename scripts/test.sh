#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite: unit tests, then every notebook end to end on the tiny
# checkpoint, the vLLM-Omni one against the real server. Extra arguments go to pytest, e.g.
# `bash scripts/test.sh -k presets`. `bash scripts/test.sh --quick` runs the quick tier instead
# (scripts/test_quick.sh: unit tests and one notebook, no server).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --quick ]; then exec bash scripts/test_quick.sh "${@:2}"; fi
bash scripts/setup.sh
# The tests start the real vLLM-Omni server: its environment is made here, with progress, on first use.
bash scripts/serve_vllm_omni.sh --install
# Two pytest-xdist workers, each test one thread (scripts/test_env.sh); every test of the session's servers runs on
# one worker (tests/conftest.py). `-n 0` (or another count) after the script's name overrides the two.
source scripts/test_env.sh
# Every test's time goes to a JUnit file: `python support/benchmarks/test_file_times.py outputs/test-artifacts/junit.xml`
# tables them per test file.
exec .venv/bin/python -m pytest -n 2 --dist loadgroup --junitxml=outputs/test-artifacts/junit.xml "$@"
