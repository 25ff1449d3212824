"""Random-weight Cosmos 3 checkpoints, built offline from the real diffusers classes.

The cookbook must run where no weights can be downloaded (CI, laptops, workshops, a GPU runner). Every one copies
the published checkpoints' configuration in everything but size (`published.json` holds it, with its sources):

- `tiny`: Nano's `Cosmos3OmniPipeline`, sound and action heads included, whose components are the real classes at
  toy sizes (a few MB), for CPUs; `tiny-edge`, `tiny-nosound` and `tiny-distilled` are the published variants that
  behave differently, at the same size, and `tiny-fp8` is `tiny` in the FP8 revisions' ModelOpt format (below);
- `nano-random`: Cosmos 3 Nano's own architecture (15.2 B parameters, and the real-size Wan 2.2 VAE) with the exact
  Qwen tokenizer, built on a GPU in bf16 (about 31 GB), for real speed and memory; `nano-random-fp8` is the same
  weights in the FP8 revisions' format.

Each is built once, saved with `save_pretrained` into the cookbook's cache and handed back as a folder, so it is
loaded through the same `from_pretrained` path as real weights. Building is deterministic; the outputs are noise,
but every shape, file and code path is the real one.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checkpoints.names import NANO_MODEL_NAME, NANO_VARIANTS, TINY_MODEL_NAME, TINY_VARIANTS

if TYPE_CHECKING:
    from diffusers import Cosmos3OmniPipeline

# Bump when a recipe below changes so that stale caches are rebuilt instead of reused.
RECIPE_VERSION = 4
SEED = 20261130
NANO_SEED = 1234
# What `nano-random` needs: Nano's bf16 weights (28 GiB) and a 256p video's activations; and room on disk for it.
NANO_MIN_GPU_GIB = 40
NANO_DISK_GIB = 32
PUBLISHED_FILE = Path(__file__).with_name("published.json")
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@functools.cache
def published() -> dict[str, Any]:
    """The published configuration the checkpoints copy (`published.json`, with its sources)."""
    return json.loads(PUBLISHED_FILE.read_text())


def config_for(component: str, variant: str | None, sizes: dict[str, Any]) -> dict[str, Any]:
    """A component's constructor arguments: its published fixed fields, a variant's changes, then `sizes` (only
    fields published.json lists as sizes). `rope_scaling.mrope_section` sets the nested field."""
    section = published()[component]
    unlisted = sorted(set(sizes) - set(section["size"]))
    if unlisted:
        raise ValueError(f"{component}: {unlisted} are not size fields of published.json; change them there.")
    config = copy.deepcopy(section["fixed"])
    config.update((published()["variants"].get(variant) or {}).get(component) or {})
    for name, value in sizes.items():
        outer, _, inner = name.partition(".")
        if inner:
            config[outer] = {**config[outer], inner: value}
        else:
            config[name] = value
    return config


def cache_root() -> Path:
    """Where built checkpoints are kept: `$COSMOS3_COOKBOOK_CACHE`, else `~/.cache/cosmos3-cookbook`."""
    return Path(os.environ.get("COSMOS3_COOKBOOK_CACHE", Path.home() / ".cache" / "cosmos3-cookbook"))


def _cache_key(name: str = TINY_MODEL_NAME) -> str:
    import diffusers
    import transformers

    # A checkpoint saved by one major version of transformers may not reload under another.
    return f"{name}-v{RECIPE_VERSION}-diffusers{diffusers.__version__}-transformers{transformers.__version__}"


def _tokenizer_specials() -> list[str]:
    return list(published()["text_tokenizer"]["special_tokens"])


def _build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    # Byte-level BPE with no merges: every byte is a token, so any prompt tokenizes, offline. Qwen3-VL's special
    # tokens follow in Qwen's order (their ids are smaller than Qwen's: the vocabulary is a size).
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    backend = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(_tokenizer_specials())
    backend.add_tokens(published()["text_tokenizer"]["added_tokens"])
    return _wrap_tokenizer(backend)


def _wrap_tokenizer(backend):
    from transformers import PreTrainedTokenizerFast

    spec = published()["text_tokenizer"]
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token=spec["eos_token"], pad_token=spec["pad_token"], chat_template=CHAT_TEMPLATE
    )


def _scheduler(variant: str | None):
    from diffusers import FlowMatchEulerDiscreteScheduler, UniPCMultistepScheduler

    if variant != "distilled":
        return UniPCMultistepScheduler(**config_for("scheduler", variant, {}))
    fields = published()["variants"]["distilled"]["scheduler"]
    # The distilled list rides in the config as the converter writes it; diffusers keeps fields it does not read.
    extra = {k: fields[k] for k in ("fixed_step_sampler_config", "fixed_step_requires_explicit_sigmas")}
    scheduler = FlowMatchEulerDiscreteScheduler(**{k: v for k, v in fields.items() if k not in extra})
    scheduler.register_to_config(**extra)
    return scheduler


def _assemble(
    transformer, tokenizer, vae, sound_tokenizer, variant: str | None, **overrides: Any
) -> Cosmos3OmniPipeline:
    """The pipeline as the converter builds it, with a variant's pipeline fields (and `overrides` of them, as
    `from_pretrained` takes them)."""
    from diffusers import Cosmos3OmniPipeline

    fields = {
        **published()["pipeline"]["fixed"],
        **(published()["variants"].get(variant) or {}).get("pipeline", {}),
        **overrides,
    }
    return Cosmos3OmniPipeline(
        transformer=transformer,
        text_tokenizer=tokenizer,
        vae=vae,
        scheduler=_scheduler(variant),
        sound_tokenizer=sound_tokenizer,
        # Built without the checker (its package and gated weights are not needed to make a checkpoint); the
        # saved model_index.json still says `enable_safety_checker: true`, as the published ones do.
        enable_safety_checker=False,
        default_use_system_prompt=fields["default_use_system_prompt"],
        use_native_flow_schedule=fields["use_native_flow_schedule"],
    )


def _has_sound(variant: str | None) -> bool:
    return "sound_tokenizer" not in (published()["variants"].get(variant) or {})


def build_tiny_pipeline(variant: str | None = None) -> Cosmos3OmniPipeline:
    """A published variant's Cosmos 3 pipeline (None: Nano, with sound and action heads) with toy-sized random
    weights (deterministic)."""
    import torch
    from diffusers import AutoencoderKLWan
    from diffusers.models.autoencoders.autoencoder_cosmos3_audio import Cosmos3AVAEAudioTokenizer
    from diffusers.models.transformers.transformer_cosmos3 import Cosmos3OmniTransformer

    tokenizer = _build_tokenizer()
    latent_channels, patch = 16, 2
    sound = _has_sound(variant)
    sound_dim = 8
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        transformer = Cosmos3OmniTransformer(
            **config_for(
                "transformer",
                variant,
                {
                    "hidden_size": 32,
                    "intermediate_size": 64,
                    "num_hidden_layers": 2,
                    "num_attention_heads": 2,
                    "num_key_value_heads": 1,
                    "head_dim": 16,
                    "rope_scaling.mrope_section": [2, 3, 3],  # sums to head_dim // 2
                    "latent_channel": latent_channels,  # == vae z_dim
                    "patch_latent_dim": patch * patch * latent_channels,
                    "vocab_size": len(tokenizer) + 8,  # above every token id
                    "sound_dim": sound_dim if sound else None,  # == sound tokenizer vocoder_input_dim
                },
            )
        )
        vae = AutoencoderKLWan(
            **config_for(
                "vae",
                variant,
                {
                    # 4 channels at full resolution: the video autoencoder is most of a CPU generation's time (its
                    # 3-D convolutions take PyTorch's slow CPU path at these sizes). 9 frames at 320x192 decode in
                    # 0.65 s at 8 channels and 0.28 s at 4, on two cores.
                    "base_dim": 4,
                    "decoder_base_dim": 4,
                    "z_dim": latent_channels,
                    "num_res_blocks": 1,
                    "latents_mean": [0.0] * latent_channels,
                    "latents_std": [1.0] * latent_channels,
                },
            )
        )
        sound_tokenizer = None
        if sound:
            sound_tokenizer = Cosmos3AVAEAudioTokenizer(
                **config_for(
                    "sound_tokenizer",
                    variant,
                    {
                        "vocoder_input_dim": sound_dim,
                        "dec_dim": 4,
                        "dec_c_mults": [1, 1, 1, 1, 1],
                        "enc_dim": 4,
                        "enc_intermediate_dim": 8,
                        "enc_num_layers": 1,
                        "enc_num_blocks": 1,
                        "enc_latent_dim": 2 * sound_dim,
                        "enc_c_mults": [1, 1, 1],
                    },
                )
            )
    return _assemble(transformer, tokenizer, vae, sound_tokenizer, variant)


# Qwen's pre-tokenizer pattern (public in Qwen's tokenizer files).
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Qwen's BPE ranks, committed with their licence (VOCAB_LICENSE says what the file is and where it comes from).
QWEN_VOCAB_FILE = "qwen_vocab.tiktoken.xz"


def qwen_bpe_ranks() -> dict[bytes, int]:
    """Qwen's 151,643 ordinary tokens (their bytes) and ranks, which are their ids, from the package's
    `qwen_vocab.tiktoken.xz` (tiktoken's format: a base64 token, a space, its rank, a line each)."""
    import base64
    import lzma
    from importlib.resources import files

    text = lzma.decompress((files(__package__) / QWEN_VOCAB_FILE).read_bytes())
    ranks = {}
    for line in text.splitlines():
        token, rank = line.split()
        ranks[base64.b64decode(token, validate=True)] = int(rank)
    return ranks


def _bpe_from_ranks(ranks: dict[bytes, int]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """tiktoken ranks as byte-level BPE's vocabulary and merges, derived as transformers' `TikTokenConverter` does
    (whose loader needs tiktoken and a plain file): every split of a token into two tokens is a merge, ordered by the
    merged token's rank, then by the halves' ranks. The tokenizer.json it gives equals the converter's byte for byte."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    byte_encoder = bytes_to_unicode()

    def as_text(token: bytes) -> str:
        return "".join(byte_encoder[b] for b in token)

    merges = []
    for token in sorted(ranks, key=ranks.__getitem__):
        splits = [(token[:i], token[i:]) for i in range(1, len(token)) if token[:i] in ranks and token[i:] in ranks]
        merges += sorted(splits, key=lambda pair: (ranks[pair[0]], ranks[pair[1]]))
    return {as_text(token): rank for token, rank in ranks.items()}, [(as_text(a), as_text(b)) for a, b in merges]


def qwen_tokenizer():
    """Qwen3-VL's tokenizer, exact and offline: Qwen's BPE vocabulary (committed beside this module) plus the ChatML
    and vision special tokens at Qwen's ids."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors

    vocab, merges = _bpe_from_ranks(qwen_bpe_ranks())
    # ignore_merges: a piece that is itself a token stays whole, as tiktoken encodes it.
    backend = Tokenizer(models.BPE(vocab, merges, fuse_unk=False, ignore_merges=True))
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    backend.post_processor = processors.ByteLevel(trim_offsets=False)
    backend.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in _tokenizer_specials()])
    backend.add_tokens(published()["text_tokenizer"]["added_tokens"])
    first = published()["text_tokenizer"]["first_special_id"]
    if backend.token_to_id(_tokenizer_specials()[0]) != first or backend.token_to_id("<|vision_start|>") != 151652:
        raise RuntimeError(f"{QWEN_VOCAB_FILE} changed: Qwen's special tokens no longer start at {first}.")
    return _wrap_tokenizer(backend)


def build_nano_pipeline(
    device: str = "cuda", tokenizer=None, variant: str | None = None, **overrides: Any
) -> Cosmos3OmniPipeline:
    """Cosmos 3 Nano's architecture (sound and action heads included) with random weights, built in place on
    `device` (bf16 on CUDA, else float32), in the published configuration; `overrides` are pipeline fields as the
    cookbook loads them (`use_native_flow_schedule=True`).

    The weights are drawn on the device itself, so a 15 B-parameter model builds in seconds on a GPU.
    """
    import torch
    from diffusers import AutoencoderKLWan
    from diffusers.models.autoencoders.autoencoder_cosmos3_audio import Cosmos3AVAEAudioTokenizer
    from diffusers.models.transformers.transformer_cosmos3 import Cosmos3OmniTransformer

    sizes = {name: published()[name]["nano_size"] for name in ("transformer", "vae", "sound_tokenizer")}
    z_dim = sizes["vae"]["z_dim"]
    dtype = torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.random.fork_rng(devices=[torch.device(device)] if torch.device(device).type == "cuda" else []):
            torch.manual_seed(NANO_SEED)
            with torch.device(device):
                transformer = Cosmos3OmniTransformer(**config_for("transformer", variant, sizes["transformer"]))
                sound_tokenizer = (
                    Cosmos3AVAEAudioTokenizer(**config_for("sound_tokenizer", variant, sizes["sound_tokenizer"]))
                    if _has_sound(variant)
                    else None
                )
                vae = AutoencoderKLWan(
                    **config_for(
                        "vae", variant, {**sizes["vae"], "latents_mean": [0.0] * z_dim, "latents_std": [1.0] * z_dim}
                    )
                )
    finally:
        torch.set_default_dtype(default_dtype)
    return _assemble(
        transformer.eval(),
        tokenizer or qwen_tokenizer(),
        vae.eval(),
        sound_tokenizer.eval() if sound_tokenizer is not None else None,
        variant,
        **overrides,
    )


def save_checkpoint(pipe: Cosmos3OmniPipeline, folder: Path, variant: str | None = None) -> None:
    """`save_pretrained`, then what the published checkpoints carry beyond it: `enable_safety_checker: true` in
    model_index.json, a variant's fields for other runtimes (Edge's `backbone_type`, which vLLM-Omni reads), and the
    modular pipeline's index."""
    if variant == "fp8":
        enable_loading()  # save_pretrained then writes ModelOpt's state beside the weights
    pipe.save_pretrained(folder)
    if variant == "fp8":
        finish_export(folder, published()["fp8"]["quantization_config"])
    extra = published()["variants"].get(variant) or {}
    index = _update_json(
        folder / "model_index.json",
        {
            "enable_safety_checker": published()["pipeline"]["fixed"]["enable_safety_checker"],
            **extra.get("model_index_saved", {}),
        },
    )
    if extra.get("transformer_saved"):
        _update_json(folder / "transformer" / "config.json", extra["transformer_saved"])
    (folder / "modular_model_index.json").write_text(json.dumps(modular_index(index, variant), indent=2) + "\n")


def _update_json(path: Path, fields: dict[str, Any]) -> dict[str, Any]:
    content = {**json.loads(path.read_text()), **fields}
    path.write_text(json.dumps(content, indent=2, sort_keys=True) + "\n")
    return content


# The pipeline fields the modular index copies from model_index.json (as NVIDIA's converter does).
MODULAR_COPIED = ("default_use_system_prompt", "enable_safety_checker", "use_native_flow_schedule", "native_flow_shift")


def modular_index(index: dict[str, Any], variant: str | None) -> dict[str, Any]:
    """modular_model_index.json for a checkpoint folder: the modular pipeline and its blocks, the pipeline fields,
    and per component its class and where `load_components` finds it (its subfolder of the same folder)."""
    modular: dict[str, Any] = {
        **published()["pipeline"]["modular"],
        **(published()["variants"].get(variant) or {}).get("modular", {}),
        "_diffusers_version": index["_diffusers_version"],
        **{name: index[name] for name in MODULAR_COPIED if name in index},
    }
    for name, entry in sorted(index.items()):
        if isinstance(entry, list) and entry[0] is not None:
            spec = {"pretrained_model_name_or_path": None, "subfolder": name, "type_hint": entry, "variant": None}
            modular[name] = [entry[0], entry[1], spec]
    return modular


def _ensure(name: str, build, root: Path | None, variant: str | None = None) -> Path:
    """The folder of a built checkpoint: built and saved on first use, reused afterwards.

    The folder appears atomically (built in a temporary folder, then renamed), so concurrent callers such as a
    notebook and a server started at the same time never see half a checkpoint.
    """
    root = root or cache_root()
    target = root / _cache_key(name)
    if (target / "model_index.json").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
    try:
        save_checkpoint(build(), staging, variant)
        try:
            staging.rename(target)
        except OSError:
            if not (target / "model_index.json").is_file():
                raise
            # Another process finished first; its copy is identical.
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def ensure_tiny_checkpoint(root: Path | None = None, variant: str = TINY_MODEL_NAME) -> Path:
    """The folder of the tiny checkpoint or one of its variants (`TINY_VARIANTS`), built on the CPU in about a
    second the first time."""
    if variant not in TINY_VARIANTS:
        raise ValueError(f"Unknown tiny checkpoint {variant!r}; the tiny ones are {', '.join(TINY_VARIANTS)}.")
    published_variant = TINY_VARIANTS[variant]

    def build() -> Cosmos3OmniPipeline:
        pipe = build_tiny_pipeline(published_variant)
        if published_variant == "fp8":
            quantize(pipe)
        return pipe

    return _ensure(variant, build, root, published_variant)


def _check_room_for_nano(device: Any) -> None:
    """A clear refusal where `nano-random` cannot be built: no CUDA GPU, too little memory, too little disk."""
    import torch

    from helpers.errors import InvalidSettingError

    if device.type != "cuda":
        raise InvalidSettingError(
            f"MODEL='nano-random' builds Cosmos 3 Nano's 15 B-parameter architecture on a CUDA GPU, and DEVICE is "
            f"{device.type}. Use MODEL='tiny' on a CPU, or run on a GPU with at least {NANO_MIN_GPU_GIB} GiB."
        )
    total = torch.cuda.get_device_properties(device).total_memory / 2**30
    if total < NANO_MIN_GPU_GIB:
        raise InvalidSettingError(
            f"MODEL='nano-random' needs a GPU with at least {NANO_MIN_GPU_GIB} GiB; "
            f"{torch.cuda.get_device_name(device)} has {total:.0f} GiB. Use MODEL='tiny', or a real checkpoint "
            "with SPEED='low_vram' on a 24 GiB card."
        )
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(root).free / 2**30
    if not any(p.name.startswith(NANO_MODEL_NAME) for p in root.iterdir()) and free < NANO_DISK_GIB:
        raise InvalidSettingError(
            f"MODEL='nano-random' saves a {NANO_DISK_GIB} GB checkpoint under {root}, which has {free:.0f} GB free. "
            "Free some space or point $COSMOS3_COOKBOOK_CACHE at a larger disk."
        )


def ensure_nano_checkpoint(device: Any = "cuda", root: Path | None = None, variant: str = NANO_MODEL_NAME) -> Path:
    """The `nano-random` (or `nano-random-fp8`) checkpoint's folder: built on `device` and saved the first time."""
    import torch

    if variant not in NANO_VARIANTS:
        raise ValueError(f"Unknown Nano-size checkpoint {variant!r}; they are {', '.join(NANO_VARIANTS)}.")
    device = torch.device(device)
    _check_room_for_nano(device)
    published_variant = NANO_VARIANTS[variant]

    def build() -> Cosmos3OmniPipeline:
        pipe = build_nano_pipeline(str(device))
        if published_variant == "fp8":
            quantize(pipe)
        return pipe

    return _ensure(variant, build, root, published_variant)


def ensure(model: str, device: Any = "cpu") -> Path:
    """The folder of a random-weight checkpoint by its MODEL name: a tiny one (on the CPU, in seconds), or a
    Nano-size one built on `device`."""
    if model in TINY_VARIANTS:
        return ensure_tiny_checkpoint(variant=model)
    return ensure_nano_checkpoint(device, variant=model)


# The published FP8 revisions' format, offline: a ModelOpt FP8 transformer as NVIDIA's revisions carry it.
#
# The decoder layers' linear layers are quantised with NVIDIA ModelOpt (`modelopt.torch.quantization`): an FP8 (e4m3)
# quantiser on each weight and each input, scales calibrated on one generation ("max"), then the weights compressed
# to float8 with their scale. `save_pretrained` with ModelOpt's checkpointing turned on writes the weights, their
# quantiser scales (`_amax`, `_scale`) and `modelopt_state.pth`, which ModelOpt reads back to rebuild the quantised
# layers. Beside them go the same scales under the names of ModelOpt's Hugging Face export (`weight_scale`, and
# `input_scale` = amax / 448), which vLLM's ModelOpt FP8 layers read: one folder serves both backends, each ignoring
# the other's names (diffusers says so in a warning). config.json gets the published `quantization_config`
# (published.json, `fp8`), which tells both that the weights are already quantised and carries the mixed-precision
# schedule they apply.
#
# Loading it in diffusers is the published way: `enable_huggingface_checkpointing()`, then `from_pretrained` with a
# `dtype`. vLLM-Omni loads it as it is.
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
