#!/usr/bin/env bash
# Start the real vLLM-Omni server for Cosmos 3 in the foreground:
#   bash scripts/serve_vllm_omni.sh MODEL [vllm serve flags...]
# e.g. `bash scripts/serve_vllm_omni.sh tiny --port 8000 --no-guardrails`. MODEL is what the notebooks take (tiny,
# nano-random, a checkpoint folder, a Hugging Face id). The server gets an environment of its own on first use
# (support/local_server/launcher.py says what goes in it); the flags go to `vllm serve ... --omni` unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >&2
exec .venv/bin/python -m local_server.launcher "$@"
