"""The cookbook's CPU platform for vLLM-Omni (`vllm_omni_cpu`), inside the server's own environment: vLLM-Omni picks
it on a machine without a GPU, it reports host memory, and it refuses by name what a CPU cannot do."""

from __future__ import annotations

import json
import subprocess

import httpx
import pytest

from local_server import launcher
from local_server.server import LocalServer
from tests.conftest import SERVER_KEY

# Every test here talks to the session's real vLLM-Omni server.
pytestmark = pytest.mark.slow

# As in the server, vLLM-Omni comes first: importing it resolves the platform, which imports the plugin's module.
PROBE = """
import json, os, torch
from vllm_omni.platforms import current_omni_platform
from vllm_omni_cpu import ENABLE_ENV, PLATFORM, activate
from vllm_omni_cpu.platform import CpuOmniPlatform, CpuPlatformError

refused = {}
for name, call in {
    "cuda graphs": CpuOmniPlatform.get_graph_wrapper_cls,
    "flash attention": lambda: CpuOmniPlatform.get_diffusion_attn_backend_cls("FLASH_ATTN", 64),
    "autoregressive stages": CpuOmniPlatform.get_omni_ar_worker_cls,
    "a cuda device": lambda: CpuOmniPlatform.set_device(torch.device("cuda", 0)),
    "an unknown attribute": lambda: CpuOmniPlatform().no_such_device_call,
}.items():
    try:
        call()
        refused[name] = None
    except (CpuPlatformError, AttributeError) as exc:
        refused[name] = str(exc)
activated = activate()
os.environ[ENABLE_ENV] = "0"
print(json.dumps({
    "current": type(current_omni_platform).__name__,
    "activated": activated == PLATFORM,
    "switched_off": activate(),
    "attention": CpuOmniPlatform.get_diffusion_attn_backend_cls(None, 64),
    "sdpa_allowed": CpuOmniPlatform.get_diffusion_attn_backend_cls("TORCH_SDPA", 64),
    "refused": refused,
}))
"""


def test_vllm_omni_picks_the_cpu_platform_and_it_refuses_what_a_cpu_cannot_do(omni_server: LocalServer) -> None:
    python = launcher.environment_dir(False) / "bin" / "python"
    result = subprocess.run([str(python), "-c", PROBE], capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["current"] == "CpuOmniPlatform" and found["activated"] and found["switched_off"] is None
    assert found["attention"] == found["sdpa_allowed"] == "vllm_omni_cpu.attention.CpuSDPABackend"
    refused = found["refused"]
    assert all(message and "CPU platform for vLLM-Omni" in message for message in refused.values()), refused
    assert "--enforce-eager" in refused["cuda graphs"] and "TORCH_SDPA" in refused["flash attention"]
    assert "'no_such_device_call'" in refused["an unknown attribute"]


def test_a_request_reports_the_server_processs_peak_memory(omni_server: LocalServer) -> None:
    """On a CPU the device is the host: X-Peak-Memory-MB is the worker's peak resident memory for the request."""
    form = {"model": "tiny", "prompt": "a ball", "size": "64x64", "num_frames": "5", "num_inference_steps": "1"}
    headers = {"Authorization": f"Bearer {SERVER_KEY}"}
    response = httpx.post(f"{omni_server.base_url}/v1/videos/sync", data=form, headers=headers, timeout=300)
    assert response.status_code == 200, response.text
    assert 100 < float(response.headers["x-peak-memory-mb"]) < 24 * 1024


def test_the_fp8_revisions_format_is_served_with_its_schedule_and_fp8_products(tmp_path) -> None:
    """vLLM-Omni 0.30.0 on a CPU loads `tiny-fp8` (ModelOpt FP8, the `@fp8` revisions' format) as it is, applies the
    checkpoint's schedule, and runs all eight steps: three weight-only at each end, FP8 matrix products between."""
    from helpers import media

    with LocalServer.start("tiny-fp8", api_key=SERVER_KEY, flags=["--no-guardrails"], progress=False) as server:
        form = {"model": "tiny-fp8", "prompt": "a ball", "size": "160x96", "num_frames": "9"}
        form["num_inference_steps"] = "8"
        headers = {"Authorization": f"Bearer {SERVER_KEY}"}
        response = httpx.post(f"{server.base_url}/v1/videos/sync", data=form, headers=headers, timeout=300)
        assert response.status_code == 200, response.text
        log = server.log_text()
    assert "Cosmos3 mixed precision active (source=checkpoint): first_steps=3 last_steps=3 reasoner=a16" in log
    assert "FP8ScaledMMLinearKernel" in log  # vLLM's FP8 linear layers, not bf16 ones
    video = tmp_path / "fp8.mp4"
    video.write_bytes(response.content)
    info = media.probe(video)
    assert (info.width, info.height, info.num_frames) == (160, 96, 9)
