"""Resolve `MODEL` to a checkpoint folder and choose the device, dtype and guardrails for `from_pretrained`.

The notebook calls `Cosmos3OmniPipeline.from_pretrained(checkpoint.path, dtype=checkpoint.dtype, ...)` itself;
this module does what comes before it and must not be the lesson: building the offline random-weight checkpoints,
downloading a Hugging Face id (with advice when that fails), and checking that the guardrails can load. Each check
fails before any weights are read, with a message that names the parameter and the fix.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import checkpoints
import checkpoints.fp8
from checkpoints import NANO_MODEL_NAME, TINY_MODEL_NAME
from checkpoints.model_names import Source, source_of
from helpers import models
from helpers.audiovisual_settings import check_guardrails
from helpers.errors import GuardrailsUnavailableError, InvalidSettingError, ModelUnavailableError

if TYPE_CHECKING:
    import torch

DEFAULT_MODEL = "nvidia/Cosmos3-Nano"
# What a distilled checkpoint's folder names (diffusers' Cosmos 3 modular blocks).
DISTILLED_PIPELINE = "Cosmos3DistilledModularPipeline"
DISTILLED_SCHEDULER = "FlowMatchEulerDiscreteScheduler"
# The notebook parameter that takes a 4-step checkpoint (audiovisual/run_with_diffusers.ipynb).
DISTILLED_PARAMETER = "DISTILLED_MODEL"


@dataclass(frozen=True)
class Checkpoint:
    """What `resolve` found: a folder `from_pretrained` can read, and where and how to run it."""

    model: str  # MODEL as given
    source: str  # "tiny", "nano-random", "local" or "hub"
    path: str
    device: torch.device
    dtype: torch.dtype
    guardrails: bool

    @property
    def fp8(self) -> bool:
        """An FP8 revision (ModelOpt's format: `@fp8`, `tiny-fp8`)."""
        return checkpoints.fp8.is_fp8_checkpoint(self.path)

    def info(self) -> dict[str, Any]:
        """For the run's manifest and the notebook's report."""
        return {
            "model": self.model,
            "source": self.source,
            "path": self.path,
            "device": str(self.device),
            "dtype": str(self.dtype).removeprefix("torch."),
            "guardrails": self.guardrails,
            "fp8": self.fp8,
        }

    def check_steps(self, steps: Iterable[int]) -> None:
        """An FP8 revision on a CPU runs only its weight-only (W8A16) steps in diffusers: the published schedule's
        first and last three. Its FP8 matrix products (W8A8, the steps between) are ModelOpt's CUDA kernels."""
        if not self.fp8 or self.device.type == "cuda":
            return
        from diffusers.pipelines.cosmos.mixed_precision import Cosmos3MixedPrecisionConfig

        schedule = Cosmos3MixedPrecisionConfig.resolve(
            quantization_config=checkpoints.published()["fp8"]["quantization_config"]
        )
        for count in sorted(set(steps)):
            if {schedule.precision_name(step, count) for step in range(count)} != {"W8A16"}:
                raise InvalidSettingError(
                    f"MODEL={self.model!r} is an FP8 (ModelOpt) checkpoint and DEVICE is {self.device.type}: there, "
                    f"only its weight-only steps run (the first and last three of a call), and a call of {count} "
                    f"step{'s' if count != 1 else ''} has FP8 matrix products, which ModelOpt runs on CUDA GPUs only. "
                    "Use 2 to 6 steps (PRESET='smoke'), a GPU, or the bf16 checkpoint."
                )


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


def _unavailable_message(model: str, reason: str, parameter: str = "MODEL") -> str:
    return (
        f"Could not load {parameter}={model!r}: {reason}\n"
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
            "NVIDIA's license requires the guardrails for real use: `pip install cosmos_guardrail`, and accept the "
            f"licences of {' and '.join(GUARDRAIL_REPOS)} on Hugging Face.\n"
            'For a research run without them, set GUARDRAILS="off" (the notebook parameter) or pass guardrails=False.'
        )


# What `CosmosSafetyChecker` downloads when the pipeline is built: both are gated or may be, and a refusal there
# would come only after the checkpoint's own 30 GB.
GUARDRAIL_REPOS = ("nvidia/Cosmos-1.0-Guardrail", "Qwen/Qwen3Guard-Gen-0.6B")


def _check_access(model: str, model_id: str, guardrails: bool) -> None:
    """Ask the Hub whether this machine's token may read the checkpoint (and the guardrail models) before anything
    is downloaded. Only a definite "no" stops here: offline, or with the Hub unreachable, the download (which may
    find everything in the local cache) decides."""
    from huggingface_hub import auth_check, constants
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    if constants.HF_HUB_OFFLINE:
        return
    for repo in (model_id, *(GUARDRAIL_REPOS if guardrails else ())):
        try:
            auth_check(repo)
        except (GatedRepoError, RepositoryNotFoundError) as exc:
            gated = isinstance(exc, GatedRepoError)
            reason = (
                "it is gated and this machine's token has not been granted access"
                if gated
                else ("the Hub has no such repository, or this machine's token may not see it")
            )
            fix = (
                f"Accept the licence on https://huggingface.co/{repo} with the account whose token this machine uses, "
                "then run `hf auth login` (or set $HF_TOKEN)."
            )
            if repo == model_id:
                raise ModelUnavailableError(_unavailable_message(model, f"{repo}: {reason}. {fix}")) from exc
            raise GuardrailsUnavailableError(
                f"Guardrails are on for MODEL={model!r}, and they load {repo}, but {reason}.\n{fix}\n"
                'For a research run without them, set GUARDRAILS="off".'
            ) from exc
        except Exception:  # noqa: BLE001 - no answer (no network, a proxy): the download below reports it
            return


def _hub_folder(model: str, model_id: str, revision: str | None, parameter: str) -> str:
    """Download (or find in the local cache) what `from_pretrained` reads; failures become advice."""
    from diffusers import Cosmos3OmniPipeline

    try:
        # The pipeline's own class: `DiffusionPipeline.download` would first resolve whatever class model_index.json
        # names, which a checkpoint made for another pipeline (or a newer diffusers) may not have here.
        return str(Cosmos3OmniPipeline.download(model_id, revision=revision))
    except Exception as exc:  # noqa: BLE001 - the hub raises many types; each becomes the same advice
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelUnavailableError(_unavailable_message(model, reason, parameter)) from exc


def _distilled_folder(local: Path) -> str | None:
    """How a checkpoint folder shows that it is 4-step distilled, or None when it is not."""
    scheduler = local / "scheduler" / "scheduler_config.json"
    named = json.loads(scheduler.read_text()).get("_class_name") if scheduler.is_file() else None
    modular = local / "modular_model_index.json"
    pipeline = json.loads(modular.read_text()).get("_class_name") if modular.is_file() else None
    if pipeline == DISTILLED_PIPELINE or named == DISTILLED_SCHEDULER:
        return f"its folder names {pipeline if pipeline == DISTILLED_PIPELINE else named}"
    return None


def _check_kind(model: str, parameter: str, distilled: str | None) -> None:
    """`DISTILLED_MODEL` takes 4-step checkpoints only, and every other parameter takes none."""
    if parameter == DISTILLED_PARAMETER and distilled is None:
        raise InvalidSettingError(
            f"{parameter}={model!r} is not a 4-step distilled checkpoint. Use "
            "'nvidia/Cosmos3-Super-Text2Image-4Step', 'nvidia/Cosmos3-Super-Image2Video-4Step', a folder of one, or "
            "'tiny-distilled' (offline, CPU); leave it empty to skip the section. Full checkpoints go in MODEL."
        )
    if parameter != DISTILLED_PARAMETER and distilled is not None:
        raise InvalidSettingError(
            f"{parameter}={model!r} is a 4-step distilled checkpoint ({distilled}). diffusers 0.42 runs those only "
            "through `Cosmos3DistilledModularPipeline` (Euler steps on the checkpoint's own sigmas, no guidance); "
            "`Cosmos3OmniPipeline` would give wrong pictures without an error. In audiovisual/run_with_diffusers.ipynb "
            f"set DISTILLED_MODEL={model!r} (the section 'Four steps: the distilled checkpoints' loads it) and keep "
            "MODEL a full checkpoint such as nvidia/Cosmos3-Nano; or serve it with vLLM-Omni."
        )


def _check_folder(model: str, local: Path, parameter: str) -> None:
    """A local checkpoint this notebook can load: one with model_index.json, of the kind `parameter` takes."""
    if not (local / "model_index.json").is_file():
        raise ModelUnavailableError(
            f"{parameter}={model!r} is a local path but has no model_index.json: point {parameter} at the folder "
            "that `hf download nvidia/Cosmos3-Nano --local-dir <folder>` created."
        )
    _check_kind(model, parameter, _distilled_folder(local))


def check(
    model: str = DEFAULT_MODEL,
    *,
    device: str = "auto",
    guardrails: str | bool | None = "auto",
    parameter: str = "MODEL",
) -> str:
    """Every check `resolve` makes before it builds or downloads anything, in this order: the device and the values,
    MODEL itself (a path that is not there, a distilled checkpoint where a full one is wanted or the other way
    round), the guardrail package, and access to the gated repositories. Returns where MODEL comes from ("tiny",
    "nano-random", "local" or "hub"). `parameter` is the notebook parameter that named it: `DISTILLED_MODEL` takes
    the 4-step checkpoints."""
    target = choose_device(device)
    guardrails_wanted(guardrails, "hub")  # a bad value fails before any build or download
    local = Path(model).expanduser()
    named = source_of(model)
    if named is Source.OFFLINE:
        source = TINY_MODEL_NAME if model in checkpoints.TINY_VARIANTS else NANO_MODEL_NAME
        variant = checkpoints.TINY_VARIANTS.get(model)
        _check_kind(model, parameter, "the offline 4-step checkpoint" if variant == "distilled" else None)
    elif named is Source.LOCAL and local.exists():
        source = "local"
        _check_folder(model, local, parameter)
    elif named is Source.LOCAL:
        raise ModelUnavailableError(
            f"{parameter}={model!r} is written as a path, and there is no folder at {local.absolute()}. Check the "
            "spelling and the working directory (a notebook runs in its own folder), or download the checkpoint "
            "there first: `hf download nvidia/Cosmos3-Nano --local-dir <folder>`. Without weights, set MODEL='tiny'."
        )
    else:
        source = "hub"
        if device == "auto" and target.type != "cuda":
            raise ModelUnavailableError(models.needs_a_gpu(model, "it", parameter))
        found = models.variant(model)  # a revision the checkpoint does not publish fails here, with the ones it has
        steps = found.fixed_steps if found is not None else None
        _check_kind(model, parameter, f"{steps} steps, no guidance" if steps else None)
    use_guardrails = guardrails_wanted(guardrails, source)
    if use_guardrails:
        _check_guardrails_available(model)
    if source == "hub":
        _check_access(model, models.split(model)[0], use_guardrails)
    return source


def resolve(
    model: str = DEFAULT_MODEL,
    *,
    device: str = "auto",
    guardrails: str | bool | None = "auto",
    parameter: str = "MODEL",
) -> Checkpoint:
    """MODEL as a folder for `from_pretrained` (random-weight ones built once, hub ids downloaded), with the device,
    dtype and guardrail setting to load it with, after every `check`."""
    source = check(model, device=device, guardrails=guardrails, parameter=parameter)
    target = choose_device(device)
    use_guardrails = guardrails_wanted(guardrails, source)
    if source == TINY_MODEL_NAME:
        path = str(checkpoints.ensure_tiny_checkpoint(variant=model))
    elif source == NANO_MODEL_NAME:
        path = str(checkpoints.ensure_nano_checkpoint(target, variant=model))
    elif source == "local":
        path = str(Path(model).expanduser())
    else:
        model_id, revision = models.split(model)
        path = _hub_folder(model, model_id, revision, parameter)
    return Checkpoint(model, source, path, target, choose_dtype(target), use_guardrails)
