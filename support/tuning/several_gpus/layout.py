"""How the processes of a parallel run split the work, and the process groups each part talks over.

Ranks form a grid of `cfg` rows and `context` columns (rank = row * context + column). The ranks of one row run one
guidance pass together, each on 1/context of its tokens (context parallelism); the ranks of one column hold the same
tokens of different passes and swap their predictions once per step (CFG parallelism). CFG comes first when GPUs
are shared out: its ranks exchange one prediction per step, while context parallelism exchanges activations in
every layer.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from helpers.errors import InvalidSettingError

if TYPE_CHECKING:
    import torch

# Classifier-free guidance has two passes per step, so at most two ranks can share them.
MAX_CFG = 2


@dataclass(frozen=True)
class Degrees:
    """How many ranks share the guidance passes (`cfg`) and how many share one pass's tokens (`context`)."""

    cfg: int
    context: int

    @property
    def world_size(self) -> int:
        return self.cfg * self.context

    def info(self) -> dict[str, int]:
        """For the run's manifest."""
        return {"processes": self.world_size, "cfg_degree": self.cfg, "context_degree": self.context}


def degrees_for(gpus: int, cfg: int | None = None, context: int | None = None) -> Degrees:
    """The split of `gpus` processes: CFG 2 when the count is even, context parallelism for the rest.

    Either degree may be given; the other is then what makes the product `gpus`. 1: no split; 2: CFG 2;
    4: CFG 2 x context 2; 8: CFG 2 x context 4.
    """
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1:
        raise InvalidSettingError(f"GPUS={gpus!r} is not allowed: use a whole number of GPUs, 1 or more.")
    for name, value in (("cfg", cfg), ("context", context)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise InvalidSettingError(f"The {name} degree must be a whole number from 1 up, got {value!r}.")
    if cfg is not None and cfg > MAX_CFG:
        raise InvalidSettingError(
            f"cfg={cfg} is not allowed: classifier-free guidance has two passes, so use cfg 1 or 2 "
            "and give the other GPUs to context parallelism."
        )
    if cfg is None and context is None:
        cfg = MAX_CFG if gpus % MAX_CFG == 0 else 1
    if cfg is None:
        cfg = gpus // context
    if context is None:
        context = gpus // cfg
    if cfg * context != gpus:
        raise InvalidSettingError(
            f"cfg={cfg} x context={context} is {cfg * context} processes, but GPUS={gpus}: choose degrees whose "
            f"product is {gpus}, or leave them out to get CFG 2 x context {max(gpus // 2, 1)}."
        )
    return Degrees(cfg, context)


@dataclass(frozen=True)
class Layout:
    """This process's place in the grid, its device, and the process groups of its row and column."""

    degrees: Degrees
    rank: int
    device: torch.device
    cfg_group: Any  # the ranks that hold the same tokens of the other guidance pass
    context_group: Any  # the ranks that run the same guidance pass
    backend: str

    @property
    def is_writer(self) -> bool:
        """Rank 0 writes the files and the manifest."""
        return self.rank == 0

    def info(self) -> dict[str, Any]:
        """For the run's manifest: how many GPUs (0 when the processes run on CPU cores), which, and the degrees."""
        import torch

        if self.device.type == "cuda":
            gpus = {"gpus": self.degrees.world_size, "gpu_name": torch.cuda.get_device_name(self.device)}
        else:
            gpus = {"gpus": 0}
        return {**gpus, **self.degrees.info(), "process_group": self.backend}


def join(degrees: Degrees, device: str = "cuda", timeout: datetime.timedelta | None = None) -> Layout:
    """Join the process group `torchrun` set up (its environment), and build the CFG and context groups.

    `device` "cuda": one GPU per process (its local rank), NCCL; "cpu": processes on CPU cores, gloo. `timeout`: how
    long a rank waits for the others in a collective (torch's default when None).
    """
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise InvalidSettingError(
            "The parallel runner is started by torchrun, which tells each process its rank: use "
            "`tuning.several_gpus.launch.torchrun_command(request)` (or "
            "`torchrun --nproc-per-node N -m tuning.several_gpus ...`)."
        )
    world = int(os.environ["WORLD_SIZE"])
    if world != degrees.world_size:
        raise InvalidSettingError(
            f"torchrun started {world} processes, but cfg={degrees.cfg} x context={degrees.context} needs "
            f"{degrees.world_size}: pass --nproc-per-node {degrees.world_size}, or degrees whose product is {world}."
        )
    if device == "cuda":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        if local >= torch.cuda.device_count():
            raise InvalidSettingError(
                f"Process {local} needs GPU {local}, but this machine shows {torch.cuda.device_count()} GPU(s): "
                "start no more processes than there are GPUs."
            )
        torch.cuda.set_device(local)
        target, backend = torch.device("cuda", local), "nccl"
    elif device == "cpu":
        target, backend = torch.device("cpu"), "gloo"
    else:
        raise InvalidSettingError(f"device={device!r} is not allowed: use 'cuda' (one GPU per process) or 'cpu'.")
    if not dist.is_initialized():
        options = {"timeout": timeout} if timeout else {}
        dist.init_process_group(backend, device_id=target if backend == "nccl" else None, **options)
    mesh = init_device_mesh(target.type, (degrees.cfg, degrees.context), mesh_dim_names=("cfg", "context"))
    return Layout(
        degrees=degrees,
        rank=dist.get_rank(),
        device=target,
        cfg_group=mesh.get_group("cfg"),
        context_group=mesh.get_group("context"),
        backend=backend,
    )
