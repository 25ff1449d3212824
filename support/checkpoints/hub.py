"""A published checkpoint from the Hugging Face Hub: refused without a GPU, its access asked before anything is
downloaded, then downloaded (or found in the local cache) as the folder `from_pretrained` and `vllm serve` read.
Every failure becomes a message that names the parameter and the fix."""

from __future__ import annotations

from helpers.errors import GuardrailsUnavailableError, ModelUnavailableError

# What `CosmosSafetyChecker` downloads when the pipeline is built: both are gated or may be, and a refusal there
# would come only after the checkpoint's own 30 GB.
GUARDRAIL_REPOS = ("nvidia/Cosmos-1.0-Guardrail", "Qwen/Qwen3Guard-Gen-0.6B")


def unavailable_message(model: str, reason: str, parameter: str = "MODEL") -> str:
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


def fetch(model_id: str, revision: str | None, *, model: str, parameter: str, guardrails: bool) -> str:
    """The folder of `model_id` at `revision`, once this machine's access to it (and to the guardrail models) is
    asked."""
    check_access(model_id, model=model, guardrails=guardrails)
    return _download(model_id, revision, model=model, parameter=parameter)


def check_access(model_id: str, *, model: str, guardrails: bool) -> None:
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
                raise ModelUnavailableError(unavailable_message(model, f"{repo}: {reason}. {fix}")) from exc
            raise GuardrailsUnavailableError(
                f"Guardrails are on for MODEL={model!r}, and they load {repo}, but {reason}.\n{fix}\n"
                'For a research run without them, set GUARDRAILS="off".'
            ) from exc
        except Exception:  # noqa: BLE001 - no answer (no network, a proxy): the download below reports it
            return


def _download(model_id: str, revision: str | None, *, model: str, parameter: str) -> str:
    """Download (or find in the local cache) what `from_pretrained` reads; failures become advice."""
    from diffusers import Cosmos3OmniPipeline

    try:
        # The pipeline's own class: `DiffusionPipeline.download` would first resolve whatever class model_index.json
        # names, which a checkpoint made for another pipeline (or a newer diffusers) may not have here.
        return str(Cosmos3OmniPipeline.download(model_id, revision=revision))
    except Exception as exc:  # noqa: BLE001 - the hub raises many types; each becomes the same advice
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelUnavailableError(unavailable_message(model, reason, parameter)) from exc
