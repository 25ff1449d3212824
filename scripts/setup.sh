#!/usr/bin/env bash
# Create .venv and install the cookbook (helpers + notebook runners + the dev tools) into it, every package at the
# version pinned in support/locks/: gpu.txt with an NVIDIA GPU, cpu.txt without one (scripts/lock.sh makes both).
# Safe to run again: it only reinstalls when pyproject.toml, the lock or the torch choice change.
#   COSMOS3_TORCH=cpu|cuda   choose the torch build instead of asking nvidia-smi (e.g. a GPU env on a build box)
#   COSMOS3_TORCH_CPU_INDEX  where the CPU build of torch comes from (default: PyTorch's CPU index)
#   bash scripts/setup.sh --plan   print the choice and where torch would come from, install nothing
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "setup: Python 3.11 or newer is needed (found: $("$python" --version 2>&1)). Set PYTHON=/path/to/python3.11." >&2
  exit 1
fi

torch_choice() {
  case "${COSMOS3_TORCH:-}" in
    cpu | cuda) echo "$COSMOS3_TORCH" ;;
    "") if nvidia-smi -L >/dev/null 2>&1; then echo cuda; else echo cpu; fi ;;
    *)
      echo "setup: COSMOS3_TORCH must be cpu or cuda (got '$COSMOS3_TORCH')." >&2
      return 1
      ;;
  esac
}

# Succeeds when the index answers within a few seconds. A thread bounds the whole probe, name lookup included, which
# urllib's own timeout does not cover; an offline or filtered network must never stall setup.
index_reachable() {
  "$python" - "$1" <<'PY'
import sys, threading, urllib.request
answered = []
def probe():
    try:
        with urllib.request.urlopen(sys.argv[1].rstrip("/") + "/torch/", timeout=3) as response:
            answered.append(response.status == 200)
    except Exception:
        pass
thread = threading.Thread(target=probe, daemon=True)
thread.start()
thread.join(4)
sys.exit(0 if answered and answered[0] else 1)
PY
}

choice=$(torch_choice)
lock=support/locks/gpu.txt
[ "$choice" = cuda ] || lock=support/locks/cpu.txt
torch_version=$(sed -n 's/^torch==\([^ ;]*\).*/\1/p' "$lock")
cpu_index=${COSMOS3_TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}

torch_source=pip
if [ "$choice" = cpu ] && index_reachable "$cpu_index"; then torch_source=$cpu_index; fi
if [ "${1:-}" = --plan ]; then
  echo "torch=$choice version=$torch_version lock=$lock source=$torch_source"
  exit 0
fi

[ -x .venv/bin/python ] || "$python" -m venv .venv
stamp=.venv/.cookbook-installed
want=$(cat pyproject.toml "$lock" | sha256sum | cut -d' ' -f1)-$choice
[ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || exit 0

pip=(.venv/bin/python -m pip install --quiet)
.venv/bin/python -m pip install --quiet --upgrade pip
if [ "$torch_source" != pip ]; then
  # Only torch comes from PyTorch's index; its dependencies follow below from the usual index, at the locked versions.
  "${pip[@]}" --no-deps --index-url "$torch_source" "torch==$torch_version"
fi
# With a GPU, FlashAttention-4 too: `SPEED="fast"` uses it on Hopper and Blackwell and leaves it alone elsewhere.
extras=dev
[ "$choice" = cpu ] || extras=dev,flash-attention,fp8
"${pip[@]}" -c "$lock" -e ".[$extras]"

# One line on the torch that was installed: on PyPI (and so wherever PyTorch's CPU index is out of reach) torch for
# Linux is the CUDA build, which runs on the CPU as well but brings some 4 GB of NVIDIA libraries.
.venv/bin/python - "$choice" "$torch_source" "$cpu_index" <<'PY'
import sys
from importlib.metadata import requires, version

choice, source, cpu_index = sys.argv[1:]
cuda = any(r.startswith(("nvidia-", "cuda-toolkit")) for r in requires("torch") or [])
where = "PyTorch's CPU index" if source != "pip" else "pip's usual index"
line = f"setup: torch {version('torch')}, {'CUDA' if cuda else 'CPU'} build, from {where}"
if cuda and choice == "cpu":
    line += (
        f"; it works without a GPU but takes some 4 GB more on disk. For the CPU build, make {cpu_index}"
        " reachable (or set COSMOS3_TORCH_CPU_INDEX to a mirror of it), delete .venv and run this again."
    )
print(line)
PY
echo "$want" > "$stamp"
