#!/usr/bin/env bash
# The quick tier, a few minutes on a laptop's CPU: every unit test that starts no vLLM-Omni server and takes seconds,
# plus one notebook end to end at smoke size on the tiny checkpoint (the test marked `quick`). It never needs the
# server's environment, so a fresh clone runs it after scripts/setup.sh alone. The full suite, which CI runs, is
# `bash scripts/test.sh`. Extra arguments go to pytest, e.g. `bash scripts/test_quick.sh -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/test_env.sh
exec .venv/bin/python -m pytest -n 2 --dist loadgroup -m "quick or not (slow or notebook or browser or gpu)" "$@"
