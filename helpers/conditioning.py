"""What the action and transfer families share: the canvas of each resolution tier, and the `SPEED` switches
measured on their tasks.

Both generate at a resolution tier (256, 480, 704 or 720) whose canvas depends on the input's shape, and both are
measured with the same two speed switches (docs/action.md, docs/transfer.md). Each family's settings
(`embodiments.settings_for`, `controls.settings_for`) checks its tier here.
"""

from __future__ import annotations

from helpers.errors import InvalidSettingError, allowed

# The canvas (width, height) of each resolution tier for each picture shape (diffusers 0.42.1 and vLLM-Omni 0.30.0
# share this table for action and transfer); the input is fitted into it without upscaling and padded.
CANVASES: dict[int, tuple[tuple[int, int], ...]] = {
    256: ((256, 256), (320, 256), (256, 320), (320, 192), (192, 320)),
    480: ((640, 640), (736, 544), (544, 736), (832, 480), (480, 832)),
    704: ((960, 960), (1088, 832), (832, 1088), (1280, 704), (704, 1280)),
    720: ((960, 960), (1104, 832), (832, 1104), (1280, 720), (720, 1280)),
}
SPEEDS: dict[str, str] = {
    "none": "diffusers as it comes (a server: --enforce-eager)",
    "fast": "the transformer's repeated layer compiled: the same output up to numerical noise",
}


def check_tier(tier: int, family: str = "action") -> int:
    if tier not in CANVASES:
        raise InvalidSettingError(f"resolution_tier={tier!r} is not a {family} tier. Allowed: {allowed(CANVASES)}.")
    return tier


def canvas(width: int, height: int, tier: int) -> tuple[int, int]:
    """The tier's canvas whose shape is closest to `width` x `height`."""
    check_tier(tier)
    return min(CANVASES[tier], key=lambda size: abs(size[1] / size[0] - height / width))


def check_speed(speed: str, family: str) -> str:
    """`SPEED` for the action and transfer notebooks (`family` names which, for the message)."""
    if speed not in SPEEDS:
        raise InvalidSettingError(
            f"SPEED={speed!r} is not measured on {family} tasks. Allowed: {allowed(SPEEDS)} (step caching "
            "and the memory settings of the audiovisual notebooks are not)."
        )
    return speed
