#!/usr/bin/env bash
# Set up (if needed), then run the cookbook notebooks on the offline tiny checkpoint, writing real media files.
# Executed notebooks and media land in outputs/demo/. Override with MODEL=... PRESET=... bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The vLLM-Omni notebook starts the real server: its environment is made here, with progress, on first use.
bash scripts/serve_vllm_omni.sh --install
exec .venv/bin/python -m cookbook_tools.demo --model "${MODEL:-tiny}" --preset "${PRESET:-smoke}" --output-dir outputs/demo
