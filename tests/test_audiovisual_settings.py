"""Presets and overrides: every tier and aspect ratio gives the published size, every bad value is rejected
with a message that lists what is allowed."""

import dataclasses

import pytest

from cosmos3_audiovisual import modes
from helpers import audiovisual_settings
from helpers.errors import InvalidSettingError

PUBLISHED = {
    (256, "16:9"): (320, 192),
    (256, "4:3"): (320, 256),
    (256, "1:1"): (256, 256),
    (256, "3:4"): (256, 320),
    (256, "9:16"): (192, 320),
    (480, "16:9"): (832, 480),
    (480, "4:3"): (736, 544),
    (480, "1:1"): (640, 640),
    (480, "3:4"): (544, 736),
    (480, "9:16"): (480, 832),
    (720, "16:9"): (1280, 720),
    (720, "4:3"): (1104, 832),
    (720, "1:1"): (960, 960),
    (720, "3:4"): (832, 1104),
    (720, "9:16"): (720, 1280),
}


@pytest.mark.parametrize(("tier", "ratio"), sorted(PUBLISHED))
def test_every_tier_and_aspect_ratio_gives_the_published_size(tier, ratio):
    s = audiovisual_settings.settings_for("t2v", "published", tier=tier, aspect_ratio=ratio)
    assert (s.width, s.height) == PUBLISHED[(tier, ratio)]
    assert s.width % 16 == 0 and s.height % 16 == 0


def test_the_published_preset_is_nvidias_video_and_image_settings():
    v = audiovisual_settings.settings_for("t2v", "published")
    assert (v.width, v.height, v.num_frames, v.fps) == (1280, 720, 189, 24)
    assert (v.num_inference_steps, v.guidance_scale, v.flow_shift, v.enable_sound) == (35, 6.0, 10.0, False)
    assert audiovisual_settings.settings_for("t2v", "published", tier=480).size == "832x480"
    i = audiovisual_settings.settings_for("t2i", "published")
    assert (i.width, i.height, i.num_frames, i.num_inference_steps, i.guidance_scale, i.flow_shift) == (
        1024,
        1024,
        1,
        50,
        4.0,
        3.0,
    )


def test_sound_modes_turn_sound_on_and_others_leave_it_off():
    assert audiovisual_settings.settings_for("t2v_sound", "smoke").enable_sound
    assert audiovisual_settings.settings_for("i2v_sound", "smoke").enable_sound
    assert not audiovisual_settings.settings_for("i2v", "smoke").enable_sound


def test_overrides_are_applied():
    s = audiovisual_settings.settings_for(
        "t2v",
        "smoke",
        num_frames=9,
        fps=16,
        seed=7,
        num_inference_steps=3,
        guidance_scale=1.0,
        flow_shift=5.0,
        width=320,
        height=176,
    )
    assert (s.num_frames, s.fps, s.seed, s.num_inference_steps, s.guidance_scale, s.flow_shift) == (
        9,
        16,
        7,
        3,
        1.0,
        5.0,
    )
    assert s.size == "320x176"
    assert s.duration_s == pytest.approx(9 / 16)


def test_every_frame_count_of_the_form_4k_plus_1_is_accepted_up_to_the_tier_cap():
    for n in range(5, 398, 4):
        assert audiovisual_settings.settings_for("t2v", "smoke", num_frames=n).num_frames == n


@pytest.mark.parametrize(("tier", "most"), [(256, 397), (480, 297), (720, 197)])
def test_frames_are_capped_per_tier_as_nvidia_caps_them(tier, most):
    """NVIDIA's framework allows 400 / 300 / 200 frames at 256p / 480p / 720p (the presets allowed 297 at 720p)."""
    for ratio in audiovisual_settings.ASPECT_RATIOS:
        assert (
            audiovisual_settings.settings_for(
                "t2v", "published", tier=tier, aspect_ratio=ratio, num_frames=most
            ).num_frames
            == most
        )
        with pytest.raises(InvalidSettingError, match=f"num_frames={most + 4} .*{tier}p.*from 5 to {most}"):
            audiovisual_settings.settings_for("t2v", "published", tier=tier, aspect_ratio=ratio, num_frames=most + 4)


@pytest.mark.parametrize(
    ("overrides", "mentions"),
    [
        ({"tier": 1080}, "TIER=1080 is not a resolution tier. Allowed: 256, 480, 720"),
        ({"tier": "480p"}, "TIER='480p' is not a resolution tier"),
        ({"aspect_ratio": "21:9"}, "ASPECT_RATIO='21:9' is not an aspect ratio. Allowed: '16:9'"),
        ({"fps": 25}, "10, 16, 24, 30"),
        ({"num_frames": 10}, "4k+1"),
        ({"num_frames": 1}, "4k+1"),
        ({"num_frames": 401}, "397"),
        ({"width": 1000, "height": 480}, "multiple of 16"),
        ({"width": 832, "height": 470}, "multiple of 16"),
        ({"width": 832}, "together"),
        ({"width": 832, "height": 480, "tier": 480}, "not both"),
        ({"num_inference_steps": 0}, "1 to 200"),
        ({"guidance_scale": 25.0}, "0 to 20"),
        ({"flow_shift": 0.0}, "positive"),
        ({"seed": -1}, "2**63"),
        ({"colour": "red"}, "Allowed overrides"),
    ],
)
def test_bad_overrides_are_rejected_with_the_allowed_values(overrides, mentions):
    with pytest.raises(InvalidSettingError) as err:
        audiovisual_settings.settings_for("t2v", "published", **overrides)
    assert mentions in str(err.value)


def test_unknown_preset_and_mode_list_the_allowed_names():
    with pytest.raises(
        InvalidSettingError, match="PRESET='ultra' is not a preset. Allowed: 'smoke', 'draft', 'published'"
    ):
        audiovisual_settings.settings_for("t2v", "ultra")
    with pytest.raises(InvalidSettingError, match="t2i.*i2v_sound"):
        audiovisual_settings.settings_for("t3v", "published")


def test_text_to_image_rejects_frames_and_sound():
    with pytest.raises(InvalidSettingError, match="one frame"):
        audiovisual_settings.settings_for("t2i", "published", num_frames=9)
    with pytest.raises(InvalidSettingError, match="t2v_sound"):
        audiovisual_settings.settings_for("t2i", "published", enable_sound=True)


def test_parse_modes_keeps_order_drops_repeats_and_rejects_unknown():
    assert modes.parse_modes(" t2v, t2i ,t2v") == ["t2v", "t2i"]
    assert modes.parse_modes("all") == list(audiovisual_settings.MODES)
    with pytest.raises(InvalidSettingError, match="Allowed modes"):
        modes.parse_modes("t2v,t2x")
    with pytest.raises(InvalidSettingError, match="No mode"):
        modes.parse_modes(" , ")


def test_notebook_parameters_reach_every_benchmarked_configuration():
    # docs/performance.md's rows are PRESET="published" with a TIER: e.g. 256p, 189 frames, 35 steps.
    for tier, size in ((256, "320x192"), (480, "832x480"), (720, "1280x720")):
        (s,) = modes.settings_for_modes("t2v", "published", tier=tier, aspect_ratio="", seed=0).values()
        assert (s.size, s.num_frames, s.num_inference_steps, s.guidance_scale) == (size, 189, 35, 6.0)
    # A TIER of 0 and an empty ASPECT_RATIO mean the preset's own size; modes keep the order given.
    chosen = modes.settings_for_modes("t2v_sound,t2i", "draft", tier=0, aspect_ratio="")
    assert list(chosen) == ["t2v_sound", "t2i"] and chosen["t2v_sound"].size == "320x192"
    assert chosen["t2i"].size == "256x256"  # images are square unless ASPECT_RATIO says otherwise
    assert modes.settings_for_modes("t2v", "draft", aspect_ratio="9:16")["t2v"].size == "192x320"


def test_published_variants_bring_their_defaults_and_limits():
    # Edge publishes 480p at most: its published preset is 480p, and a larger TIER is refused.
    edge = audiovisual_settings.settings_for("t2v", "published", model="nvidia/Cosmos3-Edge")
    assert (edge.size, edge.num_frames, edge.guidance_scale, edge.flow_shift) == ("832x480", 121, 5.0, 3.0)
    assert audiovisual_settings.settings_for("t2i", "published", model="edge").size == "640x640"
    with pytest.raises(InvalidSettingError, match="makes 256, 480 videos; 1280x720 is 720p"):
        audiovisual_settings.settings_for("t2v", "published", model="nvidia/Cosmos3-Edge", tier=720)
    with pytest.raises(InvalidSettingError, match="drop 't2v_sound' from MODES"):
        modes.settings_for_modes("t2v,t2v_sound", "published", model="nvidia/Cosmos3-Edge")
    with pytest.raises(InvalidSettingError, match="at most 121 frames"):
        audiovisual_settings.settings_for("t2v", "draft", model="nvidia/Cosmos3-Edge", num_frames=189)
    distilled = audiovisual_settings.settings_for(
        "i2v", "published", model="nvidia/Cosmos3-Super-Image2Video-4Step@fp8"
    )
    assert (distilled.num_inference_steps, distilled.guidance_scale) == (4, 1.0)
    with pytest.raises(InvalidSettingError, match="distilled"):
        audiovisual_settings.settings_for(
            "i2v", "published", model="nvidia/Cosmos3-Super-Image2Video-4Step", num_inference_steps=35
        )
    # Super: NVIDIA's recommended video shift is 5, and its documented modes are t2i, t2v and i2v.
    super_ = audiovisual_settings.settings_for("t2v", "published", model="nvidia/Cosmos3-Super")
    assert super_ == dataclasses.replace(audiovisual_settings.settings_for("t2v"), flow_shift=5.0)
    assert audiovisual_settings.settings_for("t2i", "published", model="nvidia/Cosmos3-Super").flow_shift == 3.0
    with pytest.raises(InvalidSettingError, match="makes 't2i', 't2v', 'i2v' only"):
        audiovisual_settings.settings_for("v2v", "published", model="nvidia/Cosmos3-Super")
    # Nano keeps the presets as they are; unknown ids and local folders get no variant rules.
    assert audiovisual_settings.settings_for(
        "t2v", "published", model="nvidia/Cosmos3-Nano"
    ) == audiovisual_settings.settings_for("t2v")
    assert audiovisual_settings.settings_for(
        "t2v", "published", model="/models/my-finetune"
    ) == audiovisual_settings.settings_for("t2v")
