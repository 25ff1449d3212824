"""Launch commands for a real vLLM-Omni server: flags from options, parallel degrees checked against the GPUs."""

from pathlib import Path

import pytest

from helpers import models, speeds
from helpers.errors import InvalidSettingError
from local_server import recipes as omni_launch


def test_nano_docker_command_runs_vllm_serve_omni_in_the_cosmos3_image() -> None:
    args = omni_launch.docker_args(omni_launch.ServeOptions(port=9000, guardrails=False, layerwise_offload=True))
    assert args[:3] == ["docker", "run", "--rm"] and "vllm/vllm-omni:cosmos3" in args and "9000:9000" in args
    serve = args[args.index("vllm/vllm-omni:cosmos3") + 1 :]
    assert serve[:4] == ["vllm", "serve", "nvidia/Cosmos3-Nano", "--omni"]
    assert {"--no-guardrails", "--enable-layerwise-offload"} <= set(serve) and "1800" in serve


def _flag(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


def test_super_on_eight_gpus_uses_its_recipes_layout() -> None:
    args = omni_launch.serve_args(omni_launch.recommended("super", gpus=8))
    assert "nvidia/Cosmos3-Super" in args and "--use-hsdp" in args
    assert (_flag(args, "--cfg-parallel-size"), _flag(args, "--ulysses-degree"), _flag(args, "--hsdp-shard-size")) == (
        "2",
        "4",
        "8",
    )


@pytest.mark.parametrize("model_id", sorted(models.VARIANTS))
def test_every_published_variant_gets_a_command_at_its_smallest_layout(model_id: str) -> None:
    variant = models.VARIANTS[model_id]
    gpus = min(variant.layouts)
    args = omni_launch.serve_args(omni_launch.recommended(model_id, gpus=gpus))
    assert args[:4] == ["vllm", "serve", model_id, "--omni"]
    if variant.fixed_steps is not None:  # distilled: one pass a step, so no CFG parallelism
        assert _flag(args, "--cfg-parallel-size") is None
    if variant.fp8_revision:
        fp8 = omni_launch.serve_args(omni_launch.recommended(f"{model_id}@fp8", gpus=gpus))
        assert _flag(fp8, "--revision") == "fp8" and fp8[2] == model_id


def test_what_a_variant_cannot_do_is_refused_with_the_reason() -> None:
    with pytest.raises(InvalidSettingError, match="needs at least 2 GPUs"):
        omni_launch.recommended("super", gpus=1)
    with pytest.raises(InvalidSettingError, match="has no revision 'fp8'"):
        omni_launch.recommended("nvidia/Cosmos3-Edge@fp8", gpus=1)
    distilled = omni_launch.ServeOptions(model="nvidia/Cosmos3-Super-Image2Video-4Step", gpus=4, cfg_parallel_size=2)
    with pytest.raises(InvalidSettingError, match="distilled"):
        omni_launch.serve_args(distilled)


@pytest.mark.parametrize("speed", speeds.offered("audiovisual", served=True))
def test_each_speed_the_notebooks_serve_has_its_flags_in_the_launch_command(speed: str) -> None:
    flags = speeds.SPEEDS[speed].server
    args = omni_launch.serve_args(omni_launch.recommended("nano", gpus=1, speed=speed))
    assert flags is not None and all(flag in args for flag in flags)


def test_a_speed_without_server_flags_is_refused_naming_those_with_them() -> None:
    with pytest.raises(InvalidSettingError, match="SPEED='fp8' is not one of this notebook's speeds.*'turbo'"):
        omni_launch.serve_args(omni_launch.ServeOptions(speed="fp8"))


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


def test_replicas_become_a_deploy_file_of_that_many_engines_one_per_gpu() -> None:
    import yaml

    from local_server import launcher

    flags = launcher.with_replicas(["--no-guardrails", "--replicas", "3", "--port", "8000"], gpu=True)
    assert flags[:3] == ["--no-guardrails", "--port", "8000"] and flags[3] == "--deploy-config"
    deploy = yaml.safe_load(open(flags[4]).read())
    (stage,) = deploy["stages"]
    assert (deploy["pipeline"], deploy["distributed_executor_backend"]) == ("cosmos3_omni_deploy", "mp")
    assert (stage["num_replicas"], stage["devices"], stage["model_config"]["guardrails"]) == (3, "0,1,2", False)
    on_cpu = yaml.safe_load(open(launcher.with_replicas(["--replicas=2"], gpu=False)[-1]).read())
    # On a CPU the engines run their worker in-process: the default `mp` worker's CUDA stream thread hangs there.
    assert on_cpu["distributed_executor_backend"] == "uni" and "devices" not in on_cpu["stages"][0]
    assert on_cpu["stages"][0]["model_config"]["guardrails"] is True  # the server's guardrails, unless turned off
    assert launcher.with_replicas(["--replicas", "1", "--port", "1"], gpu=True) == ["--port", "1"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--replicas", "0"], r"--replicas 0: give the number of engines"),
        (["--replicas", "2", "--tensor-parallel-size", "2"], r"--tensor-parallel-size spreads one engine over several"),
        (["--replicas", "2", "--deploy-config", "mine.yaml"], r"set num_replicas \(and devices\) in your file"),
    ],
)
def test_replicas_that_cannot_be_served_are_refused_with_the_fix(flags: list[str], message: str) -> None:
    from local_server import launcher

    with pytest.raises(launcher.ServeError, match=message):
        launcher.with_replicas(flags, gpu=True)


def test_a_room_server_takes_adapters_from_one_folder_that_must_exist(tmp_path: Path) -> None:
    from local_server import launcher, room_limits

    flags, env, line = launcher.with_room_limits(["--adapters", str(tmp_path), "--port", "1"], gpu=False)
    assert flags[:2] == ["--port", "1"] and "--adapters" not in flags
    assert env[room_limits.ADAPTERS_ENV] == str(tmp_path.resolve()) and f"LoRA adapters from {tmp_path}" in line
    assert launcher.with_room_limits(["--port", "1"], gpu=False)[1][room_limits.ADAPTERS_ENV] == ""
    with pytest.raises(launcher.ServeError, match="--adapters .*no such folder"):
        launcher.with_room_limits(["--adapters", str(tmp_path / "nope")], gpu=False)
