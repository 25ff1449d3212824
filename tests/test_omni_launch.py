"""Launch commands for a real vLLM-Omni server: flags from options, parallel degrees checked against the GPUs."""

import pytest

from helpers.errors import InvalidSettingError
from helpers.with_vllm_omni import launch as omni_launch


def test_nano_docker_command_runs_vllm_serve_omni_in_the_cosmos3_image() -> None:
    args = omni_launch.docker_args(omni_launch.ServeOptions(port=9000, guardrails=False, layerwise_offload=True))
    assert args[:3] == ["docker", "run", "--rm"] and "vllm/vllm-omni:cosmos3" in args and "9000:9000" in args
    serve = args[args.index("vllm/vllm-omni:cosmos3") + 1 :]
    assert serve[:4] == ["vllm", "serve", "nvidia/Cosmos3-Nano", "--omni"]
    assert {"--no-guardrails", "--enable-layerwise-offload"} <= set(serve) and "1800" in serve


def test_super_on_eight_gpus_uses_tensor_and_cfg_parallelism() -> None:
    args = omni_launch.serve_args(omni_launch.recommended("super", gpus=8))
    assert "nvidia/Cosmos3-Super" in args
    assert args[args.index("--tensor-parallel-size") + 1] == "4" and args[args.index("--cfg-parallel-size") + 1] == "2"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (omni_launch.ServeOptions(gpus=2, tensor_parallel_size=2, cfg_parallel_size=2), "need 4 GPUs"),
        (omni_launch.ServeOptions(gpus=8, cfg_parallel_size=4), "use 1 or 2"),
        (omni_launch.ServeOptions(gpus=0), "at least 1"),
        (omni_launch.ServeOptions(port=70000), "not a TCP port"),
    ],
)
def test_impossible_options_are_explained(options, message) -> None:
    with pytest.raises(InvalidSettingError, match=message):
        omni_launch.serve_args(options)
