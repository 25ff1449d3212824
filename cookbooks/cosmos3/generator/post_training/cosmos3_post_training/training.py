"""What the fine-tuning loop stands on: each clip's inputs as the pipeline packs them for its transformer, cached
once, and the training state, saved whole every few steps so that a second "Run All" goes on from the last save.

The loop itself (the noise, the loss, the optimizer step) is written out in run_with_diffusers.ipynb.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helpers.errors import InvalidSettingError

if TYPE_CHECKING:
    import torch

CHECKPOINTS = "checkpoints"
CACHE = "cache"
STATE = "state.json"
KEEP = 2  # checkpoints kept: the newest, and the one before it in case a save is cut short


def transformer_inputs(pipe: Any, caption: str, width: int, height: int, num_frames: int, fps: int) -> dict[str, Any]:
    """The keyword arguments `pipe` gives its transformer for a text-to-video call of this caption and shape: the
    caption's tokens and every position and index of the packed sequence, as the pipeline builds them for inference.
    A training step replaces the two that change, `vision_tokens` (the noisy latents) and `vision_timesteps`. Caught
    from a one-step call with a hook on the transformer, so that training packs its inputs exactly as sampling
    does; the call returns its latents, nothing is decoded."""
    inputs: dict[str, Any] = {}
    hook = pipe.transformer.register_forward_pre_hook(
        lambda module, args, kwargs: inputs.update(kwargs) if not inputs else None, with_kwargs=True
    )
    try:
        pipe(
            prompt=caption,
            num_frames=num_frames,
            height=height,
            width=width,
            fps=fps,
            num_inference_steps=1,
            guidance_scale=1.0,  # one pass: the conditional one is the one trained
            output_type="latent",
            add_resolution_template=False,  # a structured caption states its own resolution and duration
            add_duration_template=False,
        )
    finally:
        hook.remove()
    return inputs


def cache_file(train_dir: str | os.PathLike[str], key: dict[str, Any]) -> Path:
    """Where the cached inputs of one clip at one setting live in the training folder (a new file when anything in
    `key` changes: the checkpoint, the caption, the canvas, the length)."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return Path(train_dir) / CACHE / f"{key.get('name', 'clip')}-{digest}.pt"


def save_state(
    train_dir: str | os.PathLike[str],
    step: int,
    transformer: Any,
    optimizer: torch.optim.Optimizer,
    losses: list[float],
    fingerprint: dict[str, Any],
) -> Path:
    """The adapter's weights, the optimizer's state and the losses so far, written whole: into a temporary folder,
    then renamed to `checkpoints/step-NNNNNN`, so a run stopped mid-save leaves the last whole checkpoint. Keeps the
    newest `KEEP`."""
    import torch
    from peft.utils import get_peft_model_state_dict
    from safetensors.torch import save_file

    root = Path(train_dir) / CHECKPOINTS
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step:06d}"
    partial = root / f".{final.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    weights = {k: v.detach().contiguous().cpu() for k, v in get_peft_model_state_dict(transformer).items()}
    save_file(weights, partial / "adapter.safetensors")
    torch.save(optimizer.state_dict(), partial / "optimizer.pt")
    (partial / STATE).write_text(json.dumps({"step": step, "losses": losses, "fingerprint": fingerprint}))
    shutil.rmtree(final, ignore_errors=True)
    os.replace(partial, final)
    for old in sorted(p for p in root.glob("step-*") if p.is_dir())[:-KEEP]:
        shutil.rmtree(old)
    return final


def resume(
    train_dir: str | os.PathLike[str], transformer: Any, optimizer: torch.optim.Optimizer, fingerprint: dict[str, Any]
) -> tuple[int, list[float]]:
    """The step and the losses of the newest whole checkpoint, its adapter weights and optimizer state loaded into
    `transformer` and `optimizer`; `(0, [])` when there is none. A checkpoint of other settings (`fingerprint`: the
    checkpoint, the data, the schedule, the rank) is refused, naming `ADAPTER_NAME`."""
    import torch
    from peft.utils import set_peft_model_state_dict
    from safetensors.torch import load_file

    saved = sorted(p for p in (Path(train_dir) / CHECKPOINTS).glob("step-*") if (p / STATE).is_file())
    if not saved:
        return 0, []
    state = json.loads((saved[-1] / STATE).read_text())
    if state["fingerprint"] != fingerprint:
        changed = sorted(k for k in fingerprint if state["fingerprint"].get(k) != fingerprint[k])
        raise InvalidSettingError(
            f"ADAPTER_NAME: {train_dir} holds a fine-tune with other {', '.join(changed)}; it would go on from there. "
            "Give this one another ADAPTER_NAME, or set the parameters back to go on with it."
        )
    set_peft_model_state_dict(transformer, load_file(saved[-1] / "adapter.safetensors"))
    optimizer.load_state_dict(torch.load(saved[-1] / "optimizer.pt", weights_only=True))
    return state["step"], state["losses"]
