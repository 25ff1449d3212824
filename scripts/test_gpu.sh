#!/usr/bin/env bash
# GPU runner: every notebook on CUDA, by papermill and by nbmake, with the tiny checkpoint (smoke) and Cosmos 3 Nano's
# architecture with random weights (MODEL=nano-random, draft, SPEED=fast), plus the FlashAttention-4 kernel test.
# Needs a CUDA GPU with at least 40 GiB and about 32 GB of free disk for the nano-random checkpoint, and the cookbook
# installed (scripts/setup.sh, which on a GPU machine installs support/locks/gpu.txt with FlashAttention-4). Here a
# test that cannot run fails instead of skipping. Writes outputs/gpu-runner/: junit.xml, results.jsonl (time and memory of each
# notebook run) and the executed notebooks. Extra arguments go to pytest. PYTHON picks the interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
"$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else "test_gpu: torch sees no CUDA device.")'
out=outputs/gpu-runner
mkdir -p "$out"
rm -f "$out/results.jsonl"
# The nano-random checkpoint (31 GB) is built once and kept in the cookbook's cache for the next run.
export COSMOS3_GPU_RUNNER=1 COSMOS3_GPU_RESULTS="$PWD/$out/results.jsonl"
export COSMOS3_TEST_CACHE="${COSMOS3_COOKBOOK_CACHE:-$HOME/.cache/cosmos3-cookbook}"
exec "$py" -m pytest -m gpu tests/test_gpu.py -v -rs --basetemp="$out/runs" --junitxml="$out/junit.xml" "$@"
