#!/usr/bin/env bash
# Create .venv and install the cookbook (helpers + notebook runners) into it. Safe to run again: it only
# reinstalls when pyproject.toml or the constraints change.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "setup: Python 3.11 or newer is needed (found: $("$python" --version 2>&1)). Set PYTHON=/path/to/python3.11." >&2
  exit 1
fi
[ -x .venv/bin/python ] || "$python" -m venv .venv

# Without an NVIDIA GPU, pin the CPU build of torch: a loose requirement would pull a multi-GB CUDA build.
constraints=()
if ! command -v nvidia-smi >/dev/null 2>&1; then
  constraints=(-c tools/constraints/cpu.txt)
fi
stamp=.venv/.cookbook-installed
want=$(cat pyproject.toml tools/constraints/cpu.txt | sha256sum | cut -d' ' -f1)-${#constraints[@]}
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet "${constraints[@]}" -e ".[dev]"
  echo "$want" > "$stamp"
fi
