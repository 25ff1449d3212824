#!/usr/bin/env bash
# Regenerate the two pip constraint files scripts/setup.sh installs with, from PyPI, with a pinned uv:
#   support/locks/gpu.txt  torch 2.11.0 (its PyPI build is the CUDA 13.0 one) and the versions the GPU results in
#                        docs/performance.md were measured with; base install and every extra, FlashAttention-4 too
#   support/locks/cpu.txt  torch 2.13.0, whose CPU build setup.sh installs without a GPU; base, dev and benchmarks
# Both are universal resolutions (Python >= 3.11, any platform): a package whose version differs between Python
# versions gets one line per version with its marker. The CPU lock is resolved against PyPI's torch 2.13.0, whose
# dependencies are the CPU build's plus CUDA's runtime (nvidia-*, cuda-*, triton); those are dropped from it, and
# nvidia-modelopt and nvidia-ml-py, which are not part of it, kept.
# Existing pins are kept where they still fit; pass --upgrade (or --upgrade-package NAME) to move them.
set -euo pipefail
cd "$(dirname "$0")/.."

uv_version=0.13.9
# What the GPU results were measured with (their JSON files name these versions): the libraries the cookbook calls.
gpu_pins=(
  "torch==2.11.0" "transformers==5.17.0" "diffusers==0.42.1" "accelerate==1.15.0" "tokenizers==0.23.2"
  "huggingface-hub==1.33.0" "safetensors==0.8.0" "opencv-python-headless==5.0.0.93" "pillow==12.3.0"
  "flash-attn-4==4.0.0b36" "nvidia-cutlass-dsl==4.8.1" "torchao==0.18.0" "fa3-fwd==0.0.3"
)
cpu_pins=("torch==2.13.0")

python=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m venv "$work/uv"
"$work/uv/bin/python" -m pip install --quiet "uv==$uv_version"

compile() {  # compile LOCK PINS_FILE [uv arguments...]
  local lock=$1 pins=$2
  shift 2
  # uv prefers the versions already in its output file, so an unchanged pyproject.toml gives an unchanged lock.
  if [ -f "$lock" ]; then cp "$lock" "$work/out.txt"; else : > "$work/out.txt"; fi
  "$work/uv/bin/uv" --quiet pip compile pyproject.toml "$pins" --universal --python-version 3.11 \
    --default-index https://pypi.org/simple --prerelease if-necessary-or-explicit \
    --no-header --no-annotate -o "$work/out.txt" "$@"
}

header() {  # header WHAT
  echo "# $1"
  echo "# Pip constraints (pip install -c THIS_FILE ...): one pin per package, a marker where Python versions differ."
  echo "# Made by \`bash scripts/lock.sh\` (uv $uv_version pip compile --universal --python-version 3.11, from PyPI);"
  echo "# tests/test_environment_file.py checks it against pyproject.toml. Do not edit by hand."
}

printf '%s\n' "${gpu_pins[@]}" > "$work/gpu-pins.txt"
compile support/locks/gpu.txt "$work/gpu-pins.txt" --all-extras "$@"
{
  header "With an NVIDIA GPU: torch 2.11.0 with CUDA 13.0 and the base install with every extra (scripts/setup.sh)."
  cat "$work/out.txt"
} > support/locks/gpu.txt

printf '%s\n' "${cpu_pins[@]}" > "$work/cpu-pins.txt"
compile support/locks/cpu.txt "$work/cpu-pins.txt" --extra dev --extra benchmarks "$@"
{
  header "Without an NVIDIA GPU: torch 2.13.0, CPU build, and the base install with the dev and benchmarks extras."
  # NVIDIA's Python packages that are not CUDA's runtime stay: ModelOpt and its NVML binding.
  awk '!/^(nvidia-|cuda-|triton==)/ || /^nvidia-(modelopt|ml-py)==/' "$work/out.txt"
} > support/locks/cpu.txt
for lock in support/locks/gpu.txt support/locks/cpu.txt; do echo "lock: wrote $lock, $(grep -vc '^#' "$lock") pins"; done
