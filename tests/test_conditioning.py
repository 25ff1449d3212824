"""The canvases and speed switches the action and transfer families share: diffusers' own table, and refusals that
name the parameter and its family."""

from __future__ import annotations

import pytest
from diffusers.pipelines.cosmos import pipeline_cosmos3_omni as cosmos3
from diffusers.video_processor import VideoProcessor

from helpers import conditioning
from helpers.errors import InvalidSettingError


def test_the_canvases_are_diffusers_own() -> None:
    assert sorted(conditioning.CANVASES) == sorted(int(tier) for tier in cosmos3._ACTION_RESOLUTION_BINS)
    for tier, bins in cosmos3._ACTION_RESOLUTION_BINS.items():
        for width, height in [(832, 480), (736, 544), (480, 832), (640, 640), (1280, 720), (300, 200)]:
            want_h, want_w = VideoProcessor.classify_height_width_bin(height, width, ratios=bins)
            assert conditioning.canvas(width, height, int(tier)) == (want_w, want_h), (tier, width, height)


@pytest.mark.parametrize("family", ["action", "transfer"])
def test_a_wrong_tier_or_speed_is_refused_naming_the_parameter_and_the_family(family: str) -> None:
    with pytest.raises(InvalidSettingError, match=rf"resolution_tier=300 is not a {family} tier\. Allowed: 256, 480"):
        conditioning.check_tier(300, family)
    with pytest.raises(InvalidSettingError, match=rf"SPEED='turbo' is not measured on {family} tasks\. Allowed"):
        conditioning.check_speed("turbo", family)
    assert conditioning.check_speed("fast", family) == "fast"
    assert conditioning.check_tier(480, family) == 480
