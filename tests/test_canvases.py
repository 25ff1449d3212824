"""The one table of tiers and canvases (diffusers' own bins, and the audiovisual sizes), and the one SPEED table:
refusals that name the parameter and its family."""

from __future__ import annotations

import pytest
from diffusers.pipelines.cosmos import pipeline_cosmos3_omni as cosmos3
from diffusers.video_processor import VideoProcessor

from helpers import audiovisual_settings, canvases, settings, speeds
from helpers.errors import InvalidSettingError


def test_the_canvases_are_diffusers_own() -> None:
    assert sorted(canvases.CANVASES) == sorted(int(tier) for tier in cosmos3._ACTION_RESOLUTION_BINS)
    for tier, bins in cosmos3._ACTION_RESOLUTION_BINS.items():
        for width, height in [(832, 480), (736, 544), (480, 832), (640, 640), (1280, 720), (300, 200)]:
            want_h, want_w = VideoProcessor.classify_height_width_bin(height, width, ratios=bins)
            assert canvases.canvas(width, height, int(tier)) == (want_w, want_h), (tier, width, height)


@pytest.mark.parametrize("family", ["action", "transfer"])
def test_a_wrong_tier_or_speed_is_refused_naming_the_parameter(family: str) -> None:
    with pytest.raises(InvalidSettingError, match=r"TIER=300 is not a resolution tier\. Allowed: 256, 480, 720"):
        settings.check_tier(300)
    with pytest.raises(InvalidSettingError, match=r"TIER=704 is not a resolution tier"):  # diffusers' bin only
        settings.check_tier(704)
    with pytest.raises(InvalidSettingError, match=r"SPEED='turbo' is not one of this notebook's speeds\. Allowed"):
        speeds.switches("turbo", family)
    assert speeds.switches("fast", family) == ("compile",)
    assert settings.check_tier(480) == 480


def test_the_audiovisual_sizes_are_the_shared_tiers() -> None:
    assert audiovisual_settings.SIZES == {tier: canvases.CANVASES[tier] for tier in settings.TIERS}
    assert audiovisual_settings.size_for(480, "16:9") == (832, 480)
    assert audiovisual_settings.size_for(720, "9:16") == (720, 1280)
