"""Load a Cosmos 3 pipeline from a Hugging Face id, a local folder, or the offline tiny checkpoint."""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helpers import speed
from helpers.errors import GuardrailsUnavailableError, ModelUnavailableError
from helpers.tiny_checkpoint import TINY_MODEL_NAME, ensure_tiny_checkpoint

if TYPE_CHECKING:
    import torch
    from diffusers import Cosmos3OmniPipeline

DEFAULT_MODEL = "nvidia/Cosmos3-Nano"


@dataclass(frozen=True)
class LoadedModel:
    """What `load_pipeline` resolved, for the notebook's report and the run manifest."""

    name: str
    source: str  # "tiny", "local" or "hub"
    path: str
    device: str
    dtype: str
    guardrails: bool
    has_sound: bool
    seconds: float
    weights_gib: float


def choose_device(device: str = "auto") -> torch.device:
    """`auto` picks CUDA when present, else Apple's MPS, else the CPU."""
    import torch

    if device != "auto":
        try:
            chosen = torch.device(device)
        except RuntimeError as exc:
            raise ModelUnavailableError(
                f"Unknown device {device!r}: use 'auto', 'cuda', 'cuda:N', 'mps' or 'cpu'."
            ) from exc
        if chosen.type == "cuda" and not torch.cuda.is_available():
            raise ModelUnavailableError(f"DEVICE={device!r} but this machine has no CUDA GPU: use 'auto' or 'cpu'.")
        return chosen
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def choose_dtype(device: torch.device, dtype: str = "auto") -> torch.dtype:
    """bf16 on CUDA (what the checkpoints are trained and published in), float32 elsewhere."""
    import torch

    names = {
        "bfloat16": torch.bfloat16,
        "bf16": torch.bfloat16,
        "float16": torch.float16,
        "float32": torch.float32,
    }
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if dtype not in names:
        raise ModelUnavailableError(f"Unknown dtype {dtype!r}: use 'auto', {', '.join(repr(n) for n in names)}.")
    return names[dtype]


def resolve_model(model: str) -> tuple[str, str]:
    """(source, path or id) for `MODEL`: the tiny checkpoint, a local folder, or a Hugging Face id."""
    if model == TINY_MODEL_NAME:
        return "tiny", str(ensure_tiny_checkpoint())
    local = Path(model).expanduser()
    if local.exists():
        if not (local / "model_index.json").is_file():
            raise ModelUnavailableError(
                f"{model!r} is a local path but has no model_index.json: point MODEL at the folder that "
                f"`hf download nvidia/Cosmos3-Nano --local-dir <folder>` created."
            )
        return "local", str(local)
    return "hub", model


def _unavailable_message(model: str, reason: str) -> str:
    return (
        f"Could not load MODEL={model!r}: {reason}\n"
        "MODEL must be a Hugging Face id this machine can download, a local checkpoint folder, or 'tiny'.\n"
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
            'For a research run without them, set GUARDRAILS="off" (the notebook parameter) or pass '
            "guardrails=False."
        )


@contextlib.contextmanager
def _loading_progress(show: bool) -> Iterator[None]:
    """diffusers' "Loading pipeline components" bar has only a global switch: turn it off for the load, then back."""
    from diffusers.utils import logging as diffusers_logging

    was_on = diffusers_logging.is_progress_bar_enabled()
    if not show:
        diffusers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            diffusers_logging.enable_progress_bar()


def _weights_gib(pipe: Cosmos3OmniPipeline) -> float:
    import torch

    modules = [c for c in pipe.components.values() if isinstance(c, torch.nn.Module)]
    size = sum(p.numel() * p.element_size() for m in modules for p in m.parameters())
    return round(size / 2**30, 3)


def load_pipeline(
    model: str = DEFAULT_MODEL,
    *,
    device: str = "auto",
    dtype: str = "auto",
    guardrails: bool | None = None,
    progress: bool = True,
    speedups: tuple[str, ...] = (),
) -> tuple[Cosmos3OmniPipeline, LoadedModel]:
    """Load `Cosmos3OmniPipeline` with `from_pretrained` and move it to the device.

    `guardrails=None` means on for real checkpoints and off for the tiny one, which has no guardrail model.
    `speedups` (a preset's, e.g. `presets.get_preset("low_vram").speedups`) are applied before the weights move
    when they decide where weights live (float8 storage, layer streaming), so a 24 GiB card can load Nano.
    """
    from diffusers import Cosmos3OmniPipeline

    start = time.perf_counter()
    source, path = resolve_model(model)
    use_guardrails = (source != "tiny") if guardrails is None else guardrails
    if use_guardrails:
        _check_guardrails_available(model)
    target = choose_device(device)
    torch_dtype = choose_dtype(target, dtype)
    kwargs: dict[str, Any] = {"dtype": torch_dtype, "enable_safety_checker": use_guardrails}
    try:
        with warnings.catch_warnings(), _loading_progress(progress):
            # The audio decoder uses torch's older weight_norm; the deprecation is diffusers' to fix, not the user's.
            warnings.filterwarnings("ignore", message=".*weight_norm.*", category=FutureWarning)
            pipe = Cosmos3OmniPipeline.from_pretrained(path, **kwargs)
    except ImportError as exc:
        if use_guardrails:
            raise GuardrailsUnavailableError(
                f'Guardrails could not be loaded: {exc}. Set GUARDRAILS="off" (guardrails=False) to run without them.'
            ) from exc
        raise
    except (OSError, ValueError) as exc:
        if source == "hub":
            raise ModelUnavailableError(_unavailable_message(model, str(exc).splitlines()[0])) from exc
        raise ModelUnavailableError(f"Could not load the checkpoint in {path!r}: {exc}") from exc
    if speed.needs_early_apply(speedups):
        speed.apply(pipe, speedups, device=target)
    pipe.to(target)  # modules under group offloading are skipped: their hooks move them layer by layer
    pipe.set_progress_bar_config(disable=not progress)
    info = LoadedModel(
        name=model,
        source=source,
        path=path,
        device=str(target),
        dtype=str(torch_dtype).removeprefix("torch."),
        guardrails=use_guardrails,
        has_sound=pipe.sound_tokenizer is not None and bool(getattr(pipe.transformer.config, "sound_gen", False)),
        seconds=time.perf_counter() - start,
        weights_gib=_weights_gib(pipe),
    )
    return pipe, info
