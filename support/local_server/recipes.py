"""Commands that start a real vLLM-Omni server for Cosmos 3 (`vllm serve ... --omni`), plain or in Docker.

The notebook prints them; nothing here runs them. The parallel degrees multiply into the number of GPUs the
server needs (world size = tensor x CFG x Ulysses), which is checked against the GPUs given.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from helpers import models, speeds
from helpers.errors import InvalidSettingError

DOCKER_IMAGE = "vllm/vllm-omni:cosmos3"


@dataclass(frozen=True)
class ServeOptions:
    """What `vllm serve` needs for Cosmos 3. `model`: "nano", "super", a Hugging Face id (`@fp8` for that revision)
    or a local folder."""

    model: str = "nano"
    gpus: int = 1
    port: int = 8000
    tensor_parallel_size: int = 1
    cfg_parallel_size: int = 1
    ulysses_degree: int = 1
    hsdp_shard_size: int = 1  # weights sharded over this many GPUs (HSDP), on top of the degrees above
    vae_patch_parallel_size: int = 1
    layerwise_offload: bool = False
    guardrails: bool = True
    init_timeout_s: int = 1800
    served_model_name: str | None = None
    speed: str = "none"  # a value of `helpers.speeds.SPEEDS` with server flags, as the notebooks' SPEED

    @property
    def model_id(self) -> str:
        return models.split(self.model)[0]

    @property
    def world_size(self) -> int:
        return self.tensor_parallel_size * self.cfg_parallel_size * self.ulysses_degree

    def check(self) -> None:
        names = (
            "gpus",
            "tensor_parallel_size",
            "cfg_parallel_size",
            "ulysses_degree",
            "hsdp_shard_size",
            "vae_patch_parallel_size",
        )
        for name in names:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidSettingError(f"{name} must be a whole number of at least 1, got {value!r}.")
        variant = models.variant(self.model)
        problems = [
            (
                self.cfg_parallel_size > 2,
                f"cfg_parallel_size={self.cfg_parallel_size}: classifier-free guidance has "
                "two passes (conditional and unconditional), so use 1 or 2.",
            ),
            (
                self.world_size > self.gpus,
                f"The parallel degrees need {self.world_size} GPUs (tensor "
                f"{self.tensor_parallel_size} x CFG {self.cfg_parallel_size} x Ulysses {self.ulysses_degree}) but "
                f"gpus={self.gpus}. Lower a degree or give more GPUs.",
            ),
            (
                max(self.hsdp_shard_size, self.vae_patch_parallel_size) > self.gpus,
                f"Sharding over more GPUs than gpus={self.gpus} is not possible; lower it.",
            ),
            (
                self.hsdp_shard_size > 1 and self.tensor_parallel_size > 1,
                "HSDP weight sharding cannot be combined with tensor parallelism: use one.",
            ),
            (
                variant is not None and variant.fixed_steps is not None and self.cfg_parallel_size > 1,
                f"{self.model_id} is distilled (no guidance pass): set cfg_parallel_size=1.",
            ),
            (not 1 <= self.port <= 65535, f"port={self.port} is not a TCP port (1-65535)."),
            (self.init_timeout_s < 1, f"init_timeout_s={self.init_timeout_s} must be positive (recipes use 1800)."),
        ]
        for failed, message in problems:
            if failed:
                raise InvalidSettingError(message)
        speeds.server_flags(self.speed)  # a SPEED without server flags is refused, naming those with them


def recommended(model: str, gpus: int, speed: str = "none") -> ServeOptions:
    """The layout its recipes give a published checkpoint on `gpus` GPUs (the largest that fits); others: one GPU."""
    variant = models.variant(model)
    layouts = variant.layouts if variant is not None else {1: {}}
    fitting = [n for n in layouts if n <= gpus]
    if not fitting:
        raise InvalidSettingError(
            f"{models.split(model)[0]} needs at least {min(layouts)} GPUs ({variant.gpus if variant else ''}); "
            f"gpus={gpus}."
        )
    degrees = layouts[max(fitting)]
    return ServeOptions(model=model, gpus=gpus, speed=speed, **degrees)  # type: ignore[arg-type]


def serve_args(options: ServeOptions) -> list[str]:
    """`vllm serve <model> --omni ...` as an argument list."""
    options.check()
    args = ["vllm", "serve", options.model_id, "--omni", "--port", str(options.port)]
    args += ["--init-timeout", str(options.init_timeout_s)]
    if revision := models.split(options.model)[1]:
        args += ["--revision", revision]
    for flag, value in (
        ("--tensor-parallel-size", options.tensor_parallel_size),
        ("--cfg-parallel-size", options.cfg_parallel_size),
        ("--ulysses-degree", options.ulysses_degree),
        ("--vae-patch-parallel-size", options.vae_patch_parallel_size),
    ):
        if value > 1:
            args += [flag, str(value)]
    if options.hsdp_shard_size > 1:
        args += ["--use-hsdp", "--hsdp-shard-size", str(options.hsdp_shard_size)]
    args += speeds.server_flags(options.speed)
    if options.layerwise_offload and "--enable-layerwise-offload" not in args:
        args.append("--enable-layerwise-offload")
    if not options.guardrails:
        args.append("--no-guardrails")
    if options.served_model_name:
        args += ["--served-model-name", options.served_model_name]
    return args


def docker_args(
    options: ServeOptions, *, image: str = DOCKER_IMAGE, hf_cache: str = "~/.cache/huggingface"
) -> list[str]:
    """`docker run ... vllm/vllm-omni:cosmos3 vllm serve ...`, with the GPUs, port and Hugging Face cache mapped."""
    options.check()
    devices = ",".join(str(i) for i in range(options.gpus))
    return [
        "docker",
        "run",
        "--rm",
        "--gpus",
        f'"device={devices}"',
        "--ipc=host",
        "-p",
        f"{options.port}:{options.port}",
        "-v",
        f"{Path(hf_cache).expanduser()}:/root/.cache/huggingface",
        "-e",
        "HF_TOKEN",
        image,
        *serve_args(options),
    ]


def as_shell(args: list[str]) -> str:
    """One copy-pasteable shell line (the `--gpus` value arrives already quoted, as Docker wants it)."""
    return " ".join(a if a.startswith('"') else shlex.quote(a) for a in args)


def family() -> list[dict[str, str]]:
    """One row per published checkpoint: what it makes, on which GPUs, and the command at its smallest layout, with
    `SPEED="fast"` (vLLM-Omni compiles)."""
    return [
        {
            "model": model_id + (" (also @fp8)" if v.fp8_revision else ""),
            "size": v.size,
            "GPUs": v.gpus,
            "modes": ", ".join(v.modes) if v.modes else "all",
            "command": as_shell(serve_args(recommended(model_id, gpus=min(v.layouts), speed="fast"))),
        }
        for model_id, v in models.VARIANTS.items()
    ]
