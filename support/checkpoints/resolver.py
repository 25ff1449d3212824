"""`MODEL` resolved to a checkpoint folder, with the device, dtype and guardrails to load it with: the one resolver
of both backends (the Diffusers notebooks' `from_pretrained` and the vLLM-Omni server a notebook starts).

The notebook calls `Cosmos3OmniPipeline.from_pretrained(checkpoint.path, ...)` itself; this module does what comes
before it and must not be the lesson. MODEL goes one way: its kind is read here (`names`), every check that needs
no download is made here, then it goes to the one place that makes its folder: `random_weights` builds the
random-weight checkpoints, a local folder is taken as it is, and `hub` downloads a Hugging Face id. Each check fails
before any weights are read, with a message that names the parameter and the fix.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checkpoints import hub, random_weights
from checkpoints.names import NANO_VARIANTS, TINY_VARIANTS, Source
from helpers import models
from helpers.errors import GuardrailsUnavailableError, InvalidSettingError, ModelUnavailableError
from helpers.settings import check_guardrails

if TYPE_CHECKING:
    import torch

# What a distilled checkpoint's folder names (diffusers' Cosmos 3 modular blocks).
DISTILLED_PIPELINE = "Cosmos3DistilledModularPipeline"
DISTILLED_SCHEDULER = "FlowMatchEulerDiscreteScheduler"


@dataclass(frozen=True)
class Checkpoint:
    """What `resolve` found: a folder `from_pretrained` (or `vllm serve`) can read, and where and how to run it."""

    model: str  # MODEL as given
    source: Source
    path: str
    device: torch.device
    dtype: torch.dtype
    guardrails: bool

    @property
    def fp8(self) -> bool:
        """An FP8 revision (ModelOpt's format: `@fp8`, `tiny-fp8`)."""
        return random_weights.is_fp8_checkpoint(self.path)

    @property
    def served_name(self) -> str | None:
        """The name a server of this checkpoint answers to: MODEL for the cookbook's own and for a Hub id (without
        its revision); None for a folder, which vLLM names by its path."""
        if self.source is Source.LOCAL:
            return None
        return models.split(self.model)[0] if self.source is Source.HUB else self.model

    def info(self) -> dict[str, Any]:
        """For the run's manifest and the notebook's report."""
        return {
            "model": self.model,
            "source": str(self.source),
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
            quantization_config=random_weights.published()["fp8"]["quantization_config"]
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


def guardrails_wanted(guardrails: str | bool | None, source: Source) -> bool:
    """GUARDRAILS "auto" (or None) is on for real checkpoints and off for the random-weight ones."""
    if isinstance(guardrails, bool):
        return guardrails
    if guardrails is None or check_guardrails(guardrails) == "auto":
        return source is not Source.RANDOM
    return guardrails == "on"


def looks_like_a_path(model: str) -> bool:
    """A Hugging Face id is `name` or `owner/name`; anything written as a path is one, existing or not (Windows
    separators included)."""
    return model.startswith((".", "/", "~", "\\")) or "\\" in model or model.count("/") > 1 or model.endswith("/")


def source_of(model: str) -> Source:
    """Where MODEL comes from, by its name alone."""
    if model in TINY_VARIANTS or model in NANO_VARIANTS:
        return Source.RANDOM
    if looks_like_a_path(model) or Path(model).expanduser().exists():
        return Source.LOCAL
    return Source.HUB


def _wrong_kind(model: str, parameter: str, distilled: str) -> str:
    """The message for a checkpoint in the wrong parameter: `DISTILLED_MODEL` takes 4-step checkpoints only, and
    every other parameter takes none. `distilled` says how MODEL shows it is one ("" when it is not)."""
    if not distilled:
        return (
            f"{parameter}={model!r} is not a 4-step distilled checkpoint. Use "
            "'nvidia/Cosmos3-Super-Text2Image-4Step', 'nvidia/Cosmos3-Super-Image2Video-4Step', a folder of one, or "
            "'tiny-distilled' (offline, CPU); leave it empty to skip the section. Full checkpoints go in MODEL."
        )
    return (
        f"{parameter}={model!r} is a 4-step distilled checkpoint ({distilled}). diffusers 0.42 runs those only "
        "through `Cosmos3DistilledModularPipeline` (Euler steps on the checkpoint's own sigmas, no guidance); "
        "`Cosmos3OmniPipeline` would give wrong pictures without an error. In audiovisual/run_with_diffusers.ipynb "
        f"set {models.DISTILLED_PARAMETER}={model!r} (the section 'Four steps: the distilled checkpoints' loads it) "
        "and keep MODEL a full checkpoint such as nvidia/Cosmos3-Nano; or serve it with vLLM-Omni."
    )


def _distilled(model: str, source: Source) -> str:
    """How MODEL shows that it is a 4-step distilled checkpoint ("" when it is not): its name, or its folder's files."""
    if source is Source.RANDOM:
        return "the offline 4-step checkpoint" if TINY_VARIANTS.get(model) == "distilled" else ""
    if source is Source.HUB:
        name = model.partition("@")[0]
        found = models.VARIANTS.get(models.SHORT_NAMES.get(name.lower(), name))
        return f"{found.fixed_steps} steps, no guidance" if found is not None and found.fixed_steps else ""
    local = Path(model).expanduser()
    scheduler = local / "scheduler" / "scheduler_config.json"
    named = json.loads(scheduler.read_text()).get("_class_name") if scheduler.is_file() else None
    modular = local / "modular_model_index.json"
    pipeline = json.loads(modular.read_text()).get("_class_name") if modular.is_file() else None
    if pipeline == DISTILLED_PIPELINE or named == DISTILLED_SCHEDULER:
        return f"its folder names {pipeline if pipeline == DISTILLED_PIPELINE else named}"
    return ""


def _source(model: str, parameter: str, served: bool) -> Source:
    """Where MODEL comes from, with every check of its name and its folder: a path that is not there, a folder that
    is no checkpoint, and a 4-step checkpoint in the wrong parameter (a server takes either kind)."""
    source = source_of(model)
    local = Path(model).expanduser()
    if source is Source.LOCAL and not local.exists():
        raise ModelUnavailableError(
            f"{parameter}={model!r} is written as a path, and there is no folder at {local.absolute()}. Check the "
            "spelling and the working directory (a notebook runs in its own folder), or download the checkpoint "
            "there first: `hf download nvidia/Cosmos3-Nano --local-dir <folder>`. Without weights, set MODEL='tiny'."
        )
    if source is Source.LOCAL and not (local / "model_index.json").is_file():
        raise ModelUnavailableError(
            f"{parameter}={model!r} is a local path but has no model_index.json: point {parameter} at the folder "
            "that `hf download nvidia/Cosmos3-Nano --local-dir <folder>` created."
        )
    distilled = _distilled(model, source)
    if not served and bool(distilled) != (parameter == models.DISTILLED_PARAMETER):
        raise InvalidSettingError(_wrong_kind(model, parameter, distilled))
    return source


def _needs_a_gpu(model: str, parameter: str) -> str:
    """The message for a published checkpoint asked for on a machine without a GPU, before anything is downloaded."""
    offline = "tiny-distilled" if parameter == models.DISTILLED_PARAMETER else "tiny"
    return (
        f"{parameter}={model!r} is a published Cosmos 3 checkpoint (Nano alone is 16 B parameters, about 32 GB) and "
        f"it needs an NVIDIA GPU, but this machine has none. Nothing was downloaded. Without a GPU, set "
        f'{parameter} = "{offline}" and PRESET = "smoke": an offline random-weight checkpoint of the same design. '
        '(DEVICE = "cpu" would run the real one on the CPU anyway, at hours per video.)'
    )


def _check_guardrails_available(model: str) -> None:
    from diffusers.utils import is_cosmos_guardrail_available

    if not is_cosmos_guardrail_available():
        raise GuardrailsUnavailableError(
            f"Guardrails are on for MODEL={model!r}, but the `cosmos_guardrail` package is not installed.\n"
            "NVIDIA's license requires the guardrails for real use: `pip install cosmos_guardrail`, and accept the "
            f"licences of {' and '.join(hub.GUARDRAIL_REPOS)} on Hugging Face.\n"
            'For a research run without them, set GUARDRAILS="off" (the notebook parameter) or pass guardrails=False.'
        )


def _prepare(
    model: str, device: str, guardrails: str | bool | None, parameter: str, served: bool
) -> tuple[Any, Any, Source, bool, tuple[str, str | None]]:
    """Every check of `resolve` that needs no download or build, in this order: the device and the values, MODEL
    itself (a Hub id needs a GPU, unless DEVICE asks for the CPU on purpose), the guardrail package. Returns the
    device and dtype, where MODEL comes from, whether the guardrails are on, and a Hub id's repository and revision
    (a revision it does not publish is refused)."""
    target = choose_device(device)
    dtype = choose_dtype(target)
    guardrails_wanted(guardrails, Source.HUB)  # a bad value fails before any build or download
    source = _source(model, parameter, served)
    if source is Source.HUB and target.type != "cuda" and device == "auto":
        raise ModelUnavailableError(_needs_a_gpu(model, parameter))
    use_guardrails = guardrails_wanted(guardrails, source)
    if use_guardrails:
        _check_guardrails_available(model)
    published = models.published_id(model) if source is Source.HUB else (model, None)
    return target, dtype, source, use_guardrails, published


def check(
    model: str = models.DEFAULT_MODEL,
    *,
    device: str = "auto",
    guardrails: str | bool | None = "auto",
    parameter: str = "MODEL",
    served: bool = False,
) -> Source:
    """Every check `resolve` makes, without building or downloading anything (a notebook checks a second checkpoint
    before it fetches the first). Returns where MODEL comes from."""
    _, _, source, use_guardrails, (model_id, _) = _prepare(model, device, guardrails, parameter, served)
    if source is Source.HUB:
        hub.check_access(model_id, model=model, guardrails=use_guardrails)
    return source


def resolve(
    model: str = models.DEFAULT_MODEL,
    *,
    device: str = "auto",
    guardrails: str | bool | None = "auto",
    parameter: str = "MODEL",
    served: bool = False,
) -> Checkpoint:
    """MODEL as a folder for `from_pretrained` (random-weight ones built once, Hub ids downloaded), with the device,
    dtype and guardrail setting to load it with, after every `check`. `parameter` is the notebook parameter that
    named it: in a Diffusers notebook `DISTILLED_MODEL` takes the 4-step checkpoints, every other one the full ones;
    a vLLM-Omni server (`served`) takes either."""
    target, dtype, source, use_guardrails, (model_id, revision) = _prepare(model, device, guardrails, parameter, served)
    if source is Source.RANDOM:
        path = random_weights.ensure(model, target)
    elif source is Source.LOCAL:
        path = Path(model).expanduser()
    else:
        path = hub.fetch(model_id, revision, model=model, parameter=parameter, guardrails=use_guardrails)
    return Checkpoint(model, source, str(path), target, dtype, use_guardrails)
