#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite: unit tests, then every notebook end to end on the tiny
# checkpoint. Extra arguments go to pytest, e.g. `bash scripts/test.sh -k presets`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
