"""The one table of resolution tiers and their canvases, for every family.

A tier's canvas depends on the picture's shape. The audiovisual notebooks pick it by `TIER` ("480p") and
`ASPECT_RATIO`; the action and transfer ones fit their input into the tier's canvas closest to its shape
(`canvas`), without upscaling, and pad it.
"""

from __future__ import annotations

ASPECT_RATIOS: tuple[str, ...] = ("16:9", "4:3", "1:1", "3:4", "9:16")
# (width, height) of each tier at each aspect ratio: vLLM-Omni 0.30.0's Cosmos 3 table, NVIDIA's README, and
# diffusers 0.42.1's action and transfer bins, in their order (tests/test_canvases.py reads diffusers' own). 704 is
# one of diffusers' bins, kept so that the table is theirs; no family offers it (`helpers.settings.TIERS`).
CANVASES: dict[int, dict[str, tuple[int, int]]] = {
    256: {"1:1": (256, 256), "4:3": (320, 256), "3:4": (256, 320), "16:9": (320, 192), "9:16": (192, 320)},
    480: {"1:1": (640, 640), "4:3": (736, 544), "3:4": (544, 736), "16:9": (832, 480), "9:16": (480, 832)},
    704: {"1:1": (960, 960), "4:3": (1088, 832), "3:4": (832, 1088), "16:9": (1280, 704), "9:16": (704, 1280)},
    720: {"1:1": (960, 960), "4:3": (1104, 832), "3:4": (832, 1104), "16:9": (1280, 720), "9:16": (720, 1280)},
}


def canvas(width: int, height: int, tier: int) -> tuple[int, int]:
    """The tier's canvas whose shape is closest to `width` x `height` (a tier `helpers.settings.check_tier` took)."""
    return min(CANVASES[tier].values(), key=lambda size: abs(size[1] / size[0] - height / width))
