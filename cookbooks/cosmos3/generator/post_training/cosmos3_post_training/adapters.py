"""A trained adapter as others use it: its card, and its copy under vLLM-Omni's module names.

diffusers and vLLM-Omni 0.30.0 name Cosmos 3's layers differently. In diffusers each decoder layer holds both towers
(`layers.N.self_attn.add_q_proj` is the generation tower's query, `layers.N.self_attn.to_q` the text tower's); vLLM-Omni
splits them (`gen_layers.N.cross_attention.to_q`, `language_model.layers.N.self_attn.to_q`), with the same weights
(its `Cosmos3OmniDiffusersPipeline` renames a diffusers checkpoint's keys the same way when it loads one). A PEFT
adapter saved by diffusers therefore loads in vLLM-Omni only with its keys and `target_modules` renamed:
`for_vllm_omni` does it. No tensor changes: neither side packs q, k and v into one layer.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from helpers.errors import MediaError

WEIGHTS, CONFIG, CARD = "adapter_model.safetensors", "adapter_config.json", "README.md"
# A decoder layer's linear projection, by its diffusers name, and the module vLLM-Omni 0.30.0 gives it.
VLLM_OMNI_NAMES: dict[str, str] = {
    "self_attn.to_q": "language_model.layers.{layer}.self_attn.to_q",
    "self_attn.to_k": "language_model.layers.{layer}.self_attn.to_k",
    "self_attn.to_v": "language_model.layers.{layer}.self_attn.to_v",
    "self_attn.to_out": "language_model.layers.{layer}.self_attn.to_out",
    "mlp.gate_proj": "language_model.layers.{layer}.mlp.gate_proj",
    "mlp.up_proj": "language_model.layers.{layer}.mlp.up_proj",
    "mlp.down_proj": "language_model.layers.{layer}.mlp.down_proj",
    "self_attn.add_q_proj": "gen_layers.{layer}.cross_attention.to_q",
    "self_attn.add_k_proj": "gen_layers.{layer}.cross_attention.to_k",
    "self_attn.add_v_proj": "gen_layers.{layer}.cross_attention.to_v",
    "self_attn.to_add_out": "gen_layers.{layer}.cross_attention.to_out",
    "mlp_moe_gen.gate_proj": "gen_layers.{layer}.mlp.gate_proj",
    "mlp_moe_gen.up_proj": "gen_layers.{layer}.mlp.up_proj",
    "mlp_moe_gen.down_proj": "gen_layers.{layer}.mlp.down_proj",
}
_KEY = re.compile(r"^(?:base_model\.model\.)?(?:transformer\.)?layers\.(\d+)\.(.+)\.(lora_[AB]\.weight)$")


def vllm_omni_key(key: str) -> str:
    """A diffusers adapter's tensor name as vLLM-Omni names it (`base_model.model.` + its module + `lora_A.weight`)."""
    found = _KEY.match(key)
    if found is None or found.group(2) not in VLLM_OMNI_NAMES:
        raise MediaError(
            f"The adapter's tensor {key!r} is not on a decoder layer's projection, the only layers vLLM-Omni takes a "
            "LoRA on: train the adapter on those (target_modules)."
        )
    layer, module, tail = found.groups()
    return f"base_model.model.{VLLM_OMNI_NAMES[module].format(layer=layer)}.{tail}"


def for_vllm_omni(adapter: str | os.PathLike[str], target: str | os.PathLike[str]) -> Path:
    """The PEFT adapter folder `adapter` (diffusers' names) written again to `target` under vLLM-Omni's names, its
    `target_modules` those modules' names; returns `target`."""
    from safetensors.torch import load_file, save_file

    source, target = Path(adapter), Path(target)
    if not (source / WEIGHTS).is_file() or not (source / CONFIG).is_file():
        raise MediaError(f"{source} is not a PEFT adapter: it needs {WEIGHTS} and {CONFIG}.")
    weights = {vllm_omni_key(k): v for k, v in load_file(source / WEIGHTS).items()}
    config = json.loads((source / CONFIG).read_text())
    config["target_modules"] = sorted(
        {k.removesuffix(".lora_A.weight").rsplit(".", 1)[1] for k in weights if "lora_A" in k}
    )
    target.mkdir(parents=True, exist_ok=True)
    save_file(weights, target / WEIGHTS)
    (target / CONFIG).write_text(json.dumps(config, indent=2, sort_keys=True))
    return target


def twin_run(output_dir: str | os.PathLike[str], adapter: str | os.PathLike[str]) -> Path | None:
    """The newest run folder of run_with_diffusers.ipynb in `output_dir` that saved `adapter`, or None."""
    folders = sorted(Path(output_dir).expanduser().glob("diffusers-*/manifest.json"), key=lambda p: p.stat().st_mtime)
    for manifest in reversed(folders):
        if json.loads(manifest.read_text())["info"].get("adapter") == str(Path(adapter).resolve()):
            return manifest.parent
    return None


def write_card(folder: str | os.PathLike[str], **facts: Any) -> Path:
    """A short README for the adapter: the base model, the data, the training and how to load it in both runtimes."""
    path = Path(folder) / CARD
    rows = "\n".join(f"| {name.replace('_', ' ')} | {value} |" for name, value in facts.items())
    path.write_text(
        f"""# A LoRA adapter for Cosmos 3

Trained by the cookbook's `post_training/run_with_diffusers.ipynb` on the generation pathway's projections.

| | |
|---|---|
{rows}

In 🤗 Diffusers:

```python
pipe.transformer.load_lora_adapter("{Path(folder).name}", weight_name="{WEIGHTS}", prefix=None, adapter_name="lora")
pipe.transformer.set_adapters("lora", weights=1.0)  # 0.5: half its effect
```

In vLLM-Omni 0.30.0, under its module names (`cosmos3_post_training.adapters.for_vllm_omni`), per request: the form
field `lora` = `{{"name": "lora", "path": "<that folder on the server>", "scale": 1.0}}`.
"""
    )
    return path
