"""The published FP8 revisions' format, offline: a ModelOpt FP8 transformer as NVIDIA's revisions carry it.

The decoder layers' linear layers are quantised with NVIDIA ModelOpt (`modelopt.torch.quantization`): an FP8 (e4m3)
quantiser on each weight and each input, scales calibrated on one generation ("max"), then the weights compressed
to float8 with their scale. `save_pretrained` with ModelOpt's checkpointing turned on writes the weights, their
quantiser scales (`_amax`, `_scale`) and `modelopt_state.pth`, which ModelOpt reads back to rebuild the quantised
layers. Beside them go the same scales under the names of ModelOpt's Hugging Face export (`weight_scale`, and
`input_scale` = amax / 448), which vLLM's ModelOpt FP8 layers read: one folder serves both backends, each ignoring
the other's names (diffusers says so in a warning). config.json gets the published `quantization_config`
(published.json, `fp8`), which tells both that the weights are already quantised and carries the mixed-precision
schedule they apply.

Loading it in diffusers is the published way: `enable_huggingface_checkpointing()`, then `from_pretrained` with a
`dtype`. vLLM-Omni loads it as it is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from diffusers import Cosmos3OmniPipeline

STATE_FILE = "modelopt_state.pth"
E4M3_MAX = 448.0
_E4M3 = {"num_bits": (4, 3), "axis": None}
# The decoder layers' weights and inputs in FP8, one scale per tensor; everything else (embeddings, heads, the
# time embedder) as it was. diffusers' mixed precision expects exactly this: one tensorwise scale per FP8 weight.
MODELOPT_CONFIG: dict[str, Any] = {
    "quant_cfg": {"*": {"enable": False}, "*layers.*weight_quantizer": _E4M3, "*layers.*input_quantizer": _E4M3},
    "algorithm": "max",
}


def quantize(pipe: Cosmos3OmniPipeline) -> None:
    """Quantise `pipe.transformer` in place as the FP8 revisions are, calibrated on one small generation."""
    import modelopt.torch.quantization as mtq
    import torch

    def calibrate(_model: Any) -> None:
        pipe(
            prompt="A red ball rolls across a wooden table.",
            num_frames=9,
            height=96,
            width=160,
            num_inference_steps=2,
            guidance_scale=6.0,
            generator=torch.Generator("cpu").manual_seed(0),
            output_type="latent",
        )

    mtq.quantize(pipe.transformer, MODELOPT_CONFIG, forward_loop=calibrate)
    mtq.compress(pipe.transformer)


def enable_loading() -> None:
    """ModelOpt's patch of `from_pretrained` and `save_pretrained` (process-wide): restore or write
    `modelopt_state.pth` beside a model's weights."""
    from modelopt.torch.opt import enable_huggingface_checkpointing

    enable_huggingface_checkpointing()


def finish_export(folder: Path, quantization_config: dict[str, Any]) -> None:
    """What the saved transformer needs beyond `save_pretrained`: the export's scale names, in the shard of the
    scales they copy (and in the shard index, where the weights are sharded), and the published
    `quantization_config` in its config.json."""
    from safetensors.torch import load_file, save_file

    transformer = folder / "transformer"
    added: dict[str, str] = {}
    for shard in sorted(transformer.glob("*.safetensors")):
        tensors = load_file(shard)
        exported = {}
        for name, value in tensors.items():
            if name.endswith(".weight_quantizer._scale"):
                exported[name.removesuffix(".weight_quantizer._scale") + ".weight_scale"] = value.float().clone()
            elif name.endswith(".input_quantizer._amax"):
                exported[name.removesuffix(".input_quantizer._amax") + ".input_scale"] = value.float() / E4M3_MAX
        save_file({**tensors, **exported}, shard, metadata={"format": "pt"})
        added.update(dict.fromkeys(exported, shard.name))
    for index in transformer.glob("*.safetensors.index.json"):
        content = json.loads(index.read_text())
        content["weight_map"].update(added)
        index.write_text(json.dumps(content, indent=2, sort_keys=True) + "\n")
    path = transformer / "config.json"
    config = json.loads(path.read_text())
    config["quantization_config"] = quantization_config
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def is_fp8_checkpoint(folder: str | Path) -> bool:
    """A checkpoint folder whose transformer ModelOpt saved (an FP8 revision or `tiny-fp8`)."""
    return (Path(folder) / "transformer" / STATE_FILE).is_file()
