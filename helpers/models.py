"""The published Cosmos 3 checkpoints: what each can make, its defaults, and the GPUs and server layouts it needs.

`MODEL` may name any of them by Hugging Face id; `@fp8` after the id picks the FP8 revision (a branch of the same
repository) where one is published. Presets apply a variant's defaults and refuse what it cannot do; the launch
commands use its layouts. Sources: the model cards, vLLM-Omni 0.30's Cosmos 3 recipes and pipeline defaults, and
NVIDIA's Cosmos 3 cookbook; docs/model-family.md has the table with each source.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from helpers.errors import InvalidSettingError


@dataclass(frozen=True)
class Variant:
    """One checkpoint. `modes` None: every mode. `layouts` maps a GPU count to the `vllm serve` parallel degrees its
    recipes use (names as `local_server.recipes.ServeOptions` fields)."""

    model_id: str
    size: str
    gpus: str
    modes: tuple[str, ...] | None = None
    tiers: tuple[int, ...] = (256, 480, 720)  # the largest is its published tier
    max_frames: int | None = None  # None: NVIDIA's per-tier caps (`audiovisual_settings.TIER_MAX_FRAMES`)
    guidance_scale: float = 6.0
    flow_shift: float = 10.0
    image_size: tuple[int, int] = (1024, 1024)
    fixed_steps: int | None = None  # distilled checkpoints carry their own schedule and run without guidance
    fp8_revision: bool = True
    layouts: dict[int, dict[str, int]] = field(default_factory=lambda: {1: {}})


# Super's weights (119 GiB in bf16) are sharded over the GPUs (HSDP); CFG and Ulysses split the work.
_SUPER_LAYOUTS = {
    2: {"cfg_parallel_size": 2, "hsdp_shard_size": 2},
    8: {"cfg_parallel_size": 2, "ulysses_degree": 4, "hsdp_shard_size": 8},
}
# Distilled checkpoints refuse CFG parallelism (they run one pass a step); their recipe splits the weights instead.
_DISTILLED_LAYOUTS = {4: {"tensor_parallel_size": 4, "layerwise_offload": True}}
VARIANTS: dict[str, Variant] = {
    v.model_id: v
    for v in (
        # Nano: the presets' own defaults (helpers/audiovisual_settings.py cites each).
        Variant(
            "nvidia/Cosmos3-Nano",
            "16 B",
            "one H100/H200/B200 (80 GB); 24 GB with SPEED low_vram",
            layouts={
                1: {},
                2: {"cfg_parallel_size": 2},
                4: {"cfg_parallel_size": 2, "ulysses_degree": 2, "vae_patch_parallel_size": 4},
            },
        ),
        # Super: NVIDIA documents t2i, t2v and i2v, and recommends a video flow shift of 5.
        Variant(
            "nvidia/Cosmos3-Super",
            "64 B",
            "two H200/B200 at least, eight recommended",
            modes=("t2i", "t2v", "i2v"),
            flow_shift=5.0,
            layouts=_SUPER_LAYOUTS,
        ),
        Variant("nvidia/Cosmos3-Super-Text2Image", "64 B", "as Super", modes=("t2i",), layouts=_SUPER_LAYOUTS),
        Variant(
            "nvidia/Cosmos3-Super-Image2Video",
            "64 B",
            "as Super",
            modes=("i2v",),
            flow_shift=5.0,
            layouts=_SUPER_LAYOUTS,
        ),
        # Distilled: 4 steps of the checkpoint's own sigmas without guidance (its modular index; vLLM-Omni forces
        # guidance 1.0). The Diffusers notebook refuses them: only Cosmos3DistilledModularPipeline runs them.
        Variant(
            "nvidia/Cosmos3-Super-Text2Image-4Step",
            "64 B, 4 steps",
            "four H100/H200",
            modes=("t2i",),
            guidance_scale=1.0,
            fixed_steps=4,
            layouts=_DISTILLED_LAYOUTS,
        ),
        Variant(
            "nvidia/Cosmos3-Super-Image2Video-4Step",
            "64 B, 4 steps",
            "four H100/H200",
            modes=("i2v",),
            guidance_scale=1.0,
            fixed_steps=4,
            layouts=_DISTILLED_LAYOUTS,
        ),
        # Edge: vLLM-Omni 0.30.0's Edge defaults (832x480, guidance 5, shift 3, images 640x640); 121 frames, 256p and
        # 480p from the Cosmos framework's documentation of Edge.
        Variant(
            "nvidia/Cosmos3-Edge",
            "about 4 B",
            "one 24 GB GPU",
            modes=("t2i", "t2v", "i2v"),
            tiers=(256, 480),
            max_frames=121,
            guidance_scale=5.0,
            flow_shift=3.0,
            image_size=(640, 640),
            fp8_revision=False,
        ),
    )
}
SHORT_NAMES = {"nano": "nvidia/Cosmos3-Nano", "super": "nvidia/Cosmos3-Super", "edge": "nvidia/Cosmos3-Edge"}
DEFAULT_MODEL = "nvidia/Cosmos3-Nano"
# The notebook parameter that takes a 4-step checkpoint (audiovisual/run_with_diffusers.ipynb); every other takes none.
DISTILLED_PARAMETER = "DISTILLED_MODEL"


def split(model: str) -> tuple[str, str | None]:
    """(Hugging Face id, revision) of `MODEL`: "nano" and "super" are short names, "@fp8" picks a revision."""
    name, _, revision = model.partition("@")
    return SHORT_NAMES.get(name.lower(), name), revision or None


# The offline 4-step checkpoint (checkpoints' `tiny-distilled`) takes the published ones' fixed schedule; it
# is one checkpoint of both, so it makes images and image-to-video.
TINY_DISTILLED = Variant(
    "tiny-distilled",
    "toy, 4 steps",
    "none (a CPU)",
    modes=("t2i", "i2v"),
    guidance_scale=1.0,
    fixed_steps=4,
    fp8_revision=False,
)


def published_id(model: str) -> tuple[str, str | None]:
    """(Hugging Face id, revision) of `MODEL`, refusing a revision that a published checkpoint does not publish."""
    variant(model)
    return split(model)


def variant(model: str) -> Variant | None:
    """The published checkpoint `MODEL` names (any revision), `TINY_DISTILLED`, or None for a local folder, `tiny` or
    another id."""
    if model == TINY_DISTILLED.model_id:
        return TINY_DISTILLED
    model_id, revision = split(model)
    found = VARIANTS.get(model_id)
    if found is not None and revision is not None and (revision != "fp8" or not found.fp8_revision):
        offered = "'@fp8'" if found.fp8_revision else "none"
        raise InvalidSettingError(f"MODEL={model!r}: {model_id} has no revision {revision!r}. Revisions: {offered}.")
    return found
