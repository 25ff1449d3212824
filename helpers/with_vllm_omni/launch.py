"""Commands that start a real vLLM-Omni server for Cosmos 3 (`vllm serve ... --omni`), plain or in Docker.

The notebook prints them; nothing here runs them. The parallel degrees multiply into the number of GPUs the
server needs (world size = tensor x CFG x Ulysses), which is checked against the GPUs given.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from helpers.errors import InvalidSettingError

MODELS: dict[str, str] = {"nano": "nvidia/Cosmos3-Nano", "super": "nvidia/Cosmos3-Super"}
DOCKER_IMAGE = "vllm/vllm-omni:cosmos3"
# The vLLM-Omni server flags that do on a real server what each SPEED choice does in the Diffusers notebook
# (the same names as `helpers.with_diffusers.speed.SPEEDS`; the local stand-in takes `--speed NAME` instead).
SPEED_FLAGS: dict[str, tuple[str, ...]] = {
    "none": ("--enforce-eager",),
    "fast": (),
    "turbo": ("--cache-backend", "sea_cache"),
    "low_vram": ("--quantization", "fp8", "--vae-use-tiling"),
    "min_vram": ("--quantization", "fp8", "--enable-layerwise-offload", "--vae-use-tiling"),
}


@dataclass(frozen=True)
class ServeOptions:
    """What `vllm serve` needs for Cosmos 3. `model` is "nano", "super", a Hugging Face id or a local folder."""

    model: str = "nano"
    gpus: int = 1
    port: int = 8000
    tensor_parallel_size: int = 1
    cfg_parallel_size: int = 1
    ulysses_degree: int = 1
    layerwise_offload: bool = False
    guardrails: bool = True
    init_timeout_s: int = 1800
    served_model_name: str | None = None
    speed: str = "fast"

    @property
    def model_id(self) -> str:
        return MODELS.get(self.model.lower(), self.model)

    @property
    def world_size(self) -> int:
        return self.tensor_parallel_size * self.cfg_parallel_size * self.ulysses_degree

    def check(self) -> None:
        degrees = {
            "gpus": self.gpus,
            "tensor_parallel_size": self.tensor_parallel_size,
            "cfg_parallel_size": self.cfg_parallel_size,
            "ulysses_degree": self.ulysses_degree,
        }
        for name, value in degrees.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidSettingError(f"{name} must be a whole number of at least 1, got {value!r}.")
        if self.cfg_parallel_size > 2:
            raise InvalidSettingError(
                f"cfg_parallel_size={self.cfg_parallel_size}: classifier-free guidance has two passes "
                "(conditional and unconditional), so use 1 or 2."
            )
        if self.world_size > self.gpus:
            raise InvalidSettingError(
                f"The parallel degrees need {self.world_size} GPUs (tensor {self.tensor_parallel_size} x CFG "
                f"{self.cfg_parallel_size} x Ulysses {self.ulysses_degree}) but gpus={self.gpus}. Lower a degree "
                "or give more GPUs."
            )
        if not 1 <= self.port <= 65535:
            raise InvalidSettingError(f"port={self.port} is not a TCP port (1-65535).")
        if self.speed not in SPEED_FLAGS:
            raise InvalidSettingError(
                f"SPEED={self.speed!r} is not allowed. Allowed values: {', '.join(map(repr, SPEED_FLAGS))}."
            )
        if self.init_timeout_s < 1:
            raise InvalidSettingError(f"init_timeout_s={self.init_timeout_s} must be positive (the recipes use 1800).")


def speed_flags(speed: str) -> tuple[str, ...]:
    """The `vllm serve` flags that give a real server the effect of `SPEED` (a stand-in started here gets `--speed`)."""
    ServeOptions(speed=speed).check()
    return SPEED_FLAGS[speed]


def recommended(model: str, gpus: int, speed: str = "fast") -> ServeOptions:
    """Nano fits one H200; Super (119 GiB in bf16) is split by tensor parallelism, with CFG parallel when it fits."""
    if model.lower() == "super":
        cfg = 2 if gpus >= 4 else 1
        return ServeOptions(
            model="super", gpus=gpus, tensor_parallel_size=max(1, gpus // cfg), cfg_parallel_size=cfg, speed=speed
        )
    return ServeOptions(model=model, gpus=gpus, cfg_parallel_size=2 if gpus >= 2 else 1, speed=speed)


def serve_args(options: ServeOptions) -> list[str]:
    """`vllm serve <model> --omni ...` as an argument list."""
    options.check()
    args = ["vllm", "serve", options.model_id, "--omni", "--port", str(options.port)]
    args += ["--init-timeout", str(options.init_timeout_s)]
    if options.tensor_parallel_size > 1:
        args += ["--tensor-parallel-size", str(options.tensor_parallel_size)]
    if options.cfg_parallel_size > 1:
        args += ["--cfg-parallel-size", str(options.cfg_parallel_size)]
    if options.ulysses_degree > 1:
        args += ["--ulysses-degree", str(options.ulysses_degree)]
    args += SPEED_FLAGS[options.speed]
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
        "docker", "run", "--rm",
        "--gpus", f'"device={devices}"',
        "--ipc=host",
        "-p", f"{options.port}:{options.port}",
        "-v", f"{Path(hf_cache).expanduser()}:/root/.cache/huggingface",
        "-e", "HF_TOKEN",
        image,
        *serve_args(options),
    ]  # fmt: skip


def as_shell(args: list[str]) -> str:
    """One copy-pasteable shell line (the `--gpus` value arrives already quoted, as Docker wants it)."""
    return " ".join(a if a.startswith('"') else shlex.quote(a) for a in args)
