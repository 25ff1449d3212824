"""The vLLM-Omni side: error handling around the notebooks' HTTP calls (`omni_http`), launch commands for a real
server (`recipes`), the launcher `scripts/serve_vllm_omni.sh` runs (`launcher`), the server a notebook starts for
BASE_URL="auto" (`server`), and the room's limits (`room_limits`)."""
