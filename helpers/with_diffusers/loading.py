"""Resolve `MODEL` to a checkpoint folder and choose the device, dtype and guardrails for `from_pretrained`.

The notebook calls `Cosmos3OmniPipeline.from_pretrained(checkpoint.path, dtype=checkpoint.dtype, ...)` itself;
this module does what comes before it and must not be the lesson: building the offline random-weight checkpoints,
downloading a Hugging Face id (with advice when that fails), and checking that the guardrails can load. Each check
fails before any weights are read, with a message that names the parameter and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helpers import models
from helpers.errors import GuardrailsUnavailableError, InvalidSettingError, ModelUnavailableError
from helpers.presets import check_guardrails
from random_checkpoints import NANO_MODEL_NAME, TINY_MODEL_NAME, ensure_nano_checkpoint, ensure_tiny_checkpoint

if TYPE_CHECKING:
    import torch

DEFAULT_MODEL = "nvidia/Cosmos3-Nano"


@dataclass(frozen=True)
class Checkpoint:
    """What `resolve` found: a folder `from_pretrained` can read, and where and how to run it."""

    model: str  # MODEL as given
    source: str  # "tiny", "nano-random", "local" or "hub"
    path: str
    device: torch.device
    dtype: torch.dtype
    guardrails: bool

    def info(self) -> dict[str, Any]:
        """For the run's manifest and the notebook's report."""
        return {
            "model": self.model,
            "source": self.source,
            "path": self.path,
            "device": str(self.device),
            "dtype": str(self.dtype).removeprefix("torch."),
            "guardrails": self.guardrails,
        }


def choose_device(device: str = "auto") -> torch.device:
    """`auto` picks CUDA when present, else Apple's MPS, else the CPU."""
    import torch

    if device != "auto":
        try:
            chosen = torch.device(device)
        except RuntimeError as exc:
            raise InvalidSettingError(
                f"DEVICE={device!r} is not a device: use 'auto', 'cuda', 'cuda:N', 'mps' or 'cpu'."
            ) from exc
        if chosen.type == "cuda" and not torch.cuda.is_available():
            raise InvalidSettingError(f"DEVICE={device!r} but this machine has no CUDA GPU: use 'auto' or 'cpu'.")
        return chosen
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def choose_dtype(device: torch.device) -> torch.dtype:
    """bf16 on CUDA (what the checkpoints are trained and published in), float32 elsewhere."""
    import torch

    return torch.bfloat16 if device.type == "cuda" else torch.float32


def guardrails_wanted(guardrails: str | bool | None, source: str) -> bool:
    """GUARDRAILS "auto" (or None) is on for real checkpoints and off for the random-weight ones."""
    if isinstance(guardrails, bool):
        return guardrails
    if guardrails is None or check_guardrails(guardrails) == "auto":
        return source not in (TINY_MODEL_NAME, NANO_MODEL_NAME)
    return guardrails == "on"


def _unavailable_message(model: str, reason: str) -> str:
    return (
        f"Could not load MODEL={model!r}: {reason}\n"
        "MODEL must be a Hugging Face id this machine can download, a local checkpoint folder, 'tiny' or "
        "'nano-random'.\n"
        "To use real weights: accept the license on https://huggingface.co/nvidia/Cosmos3-Nano, then run\n"
        "    hf auth login\n"
        "    hf download nvidia/Cosmos3-Nano --local-dir ~/models/Cosmos3-Nano\n"
        "and set MODEL='~/models/Cosmos3-Nano' (or keep the id when the machine is online).\n"
        "To try the cookbook without weights or a GPU, set MODEL='tiny'."
    )


def _check_guardrails_available(model: str) -> None:
    from diffusers.utils import is_cosmos_guardrail_available

    if not is_cosmos_guardrail_available():
        raise GuardrailsUnavailableError(
            f"Guardrails are on for MODEL={model!r}, but the `cosmos_guardrail` package is not installed.\n"
            "NVIDIA's license requires the guardrails for real use: `pip install cosmos_guardrail` and accept the "
            "gated model nvidia/Cosmos-1.0-Guardrail on Hugging Face.\n"
            'For a research run without them, set GUARDRAILS="off" (the notebook parameter) or pass guardrails=False.'
        )


def _hub_folder(model: str) -> str:
    """Download (or find in the local cache) what `from_pretrained` reads; failures become advice."""
    from diffusers import DiffusionPipeline

    models.variant(model)  # a revision the checkpoint does not publish fails here, with the ones it does
    model_id, revision = models.split(model)
    try:
        return str(DiffusionPipeline.download(model_id, revision=revision))
    except Exception as exc:  # noqa: BLE001 - the hub raises many types; each becomes the same advice
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelUnavailableError(_unavailable_message(model, reason)) from exc


def resolve(model: str = DEFAULT_MODEL, *, device: str = "auto", guardrails: str | bool | None = "auto") -> Checkpoint:
    """MODEL as a folder for `from_pretrained` (random-weight ones built once, hub ids downloaded), with the device,
    dtype and guardrail setting to load it with; guardrails are checked last, once MODEL is known to load."""
    target = choose_device(device)
    guardrails_wanted(guardrails, "hub")  # a bad value fails before any build or download
    if model == TINY_MODEL_NAME:
        source, path = TINY_MODEL_NAME, str(ensure_tiny_checkpoint())
    elif model == NANO_MODEL_NAME:
        source, path = NANO_MODEL_NAME, str(ensure_nano_checkpoint(target))
    elif Path(model).expanduser().exists():
        local = Path(model).expanduser()
        if not (local / "model_index.json").is_file():
            raise ModelUnavailableError(
                f"MODEL={model!r} is a local path but has no model_index.json: point MODEL at the folder that "
                "`hf download nvidia/Cosmos3-Nano --local-dir <folder>` created."
            )
        source, path = "local", str(local)
    else:
        source, path = "hub", _hub_folder(model)
    use_guardrails = guardrails_wanted(guardrails, source)
    if use_guardrails:
        _check_guardrails_available(model)
    return Checkpoint(model, source, path, target, choose_dtype(target), use_guardrails)
