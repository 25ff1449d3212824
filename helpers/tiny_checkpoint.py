"""A tiny random-weight Cosmos 3 checkpoint, built offline from the real diffusers classes.

The cookbook must run where no weights can be downloaded (CI, laptops, workshops). This module builds a
sound-capable `Cosmos3OmniPipeline` whose components are the real classes at toy sizes, saves it with
`save_pretrained`, and hands back the folder so that it is loaded through the same `from_pretrained` path as
real weights. Building is deterministic and cached; the outputs are noise, but every shape, file and code path
is the real one.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from diffusers import Cosmos3OmniPipeline

TINY_MODEL_NAME = "tiny"
# Bump when the recipe below changes so that stale caches are rebuilt instead of reused.
RECIPE_VERSION = 1
SEED = 20261130

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


def _cache_key() -> str:
    import diffusers
    import transformers

    # A checkpoint saved by one major version of transformers may not reload under another.
    return f"tiny-v{RECIPE_VERSION}-diffusers{diffusers.__version__}-transformers{transformers.__version__}"


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


def ensure_tiny_checkpoint(root: Path | None = None) -> Path:
    """The folder of the tiny checkpoint, built and saved on first use, reused afterwards.

    The folder appears atomically (built in a temporary folder, then renamed), so concurrent callers such as a
    notebook and a server started at the same time never see half a checkpoint.
    """
    root = root or cache_root()
    target = root / _cache_key()
    if (target / "model_index.json").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
    try:
        build_tiny_pipeline().save_pretrained(staging)
        try:
            staging.rename(target)
        except OSError:
            if not (target / "model_index.json").is_file():
                raise
            # Another process finished first; its copy is identical.
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
