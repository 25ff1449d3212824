"""The bundled structured prompts: one per mode, long like the captions Cosmos 3 was trained on, with the
metadata keys vLLM-Omni writes, and a negative prompt free of words the guardrail blocklist rejects."""

import json
import re

import pytest

from cosmos3_audiovisual import modes
from helpers import audiovisual_settings, media, prompts
from helpers.errors import InvalidSettingError

# Words of the kind the Cosmos guardrail blocklist rejects (NVIDIA's own negative prompt tripped on the first two).
BLOCKLIST_STYLE = [
    "bleeding",
    "lifeless",
    "blood",
    "gore",
    "dead",
    "corpse",
    "violence",
    "nude",
    "kill",
    "weapon",
]


@pytest.mark.parametrize("mode", audiovisual_settings.MODES)
def test_every_mode_has_a_long_structured_prompt_with_a_title(mode):
    caption = prompts.load(mode)
    assert prompts.COOKBOOK_KEY not in caption
    assert prompts.about(mode)["title"]
    assert prompts.count_words(caption) >= 250
    text = prompts.prompt_text(audiovisual_settings.settings_for(mode, "published", tier=480))
    assert prompts.is_structured(text) and prompts.COOKBOOK_KEY not in text


@pytest.mark.parametrize("mode", ["t2v_sound", "i2v_sound"])
def test_sound_prompts_describe_the_audio(mode):
    assert prompts.count_words(prompts.load(mode)["audio_description"]) >= 20


@pytest.mark.parametrize("mode", ["i2v", "i2v_sound", "v2v"])
def test_conditioned_modes_name_a_bundled_asset_that_decodes(mode):
    path = modes.conditioning(mode)
    info = media.probe(path)
    assert info.width >= 320 and info.height >= 192
    if mode == "v2v":
        assert info.kind == "video" and info.num_frames >= 9
    else:
        assert info.kind == "image"


def test_unconditioned_modes_have_no_conditioning():
    with pytest.raises(InvalidSettingError, match="no conditioning"):
        modes.conditioning("t2v")


def test_metadata_uses_vllm_omni_keys_and_formats():
    video = json.loads(prompts.prompt_text(audiovisual_settings.settings_for("t2v", "published", tier=480)))
    assert video["resolution"] == {"H": 480, "W": 832}
    assert (video["duration"], video["fps"]) == ("7s", 24.0)  # int(189 / 24) seconds, as vLLM-Omni writes it
    image = json.loads(prompts.prompt_text(audiovisual_settings.settings_for("t2i", "published")))
    assert image["resolution"] == {"H": 1024, "W": 1024}
    assert "duration" not in image and "fps" not in image


def test_compact_is_one_line_and_round_trips():
    caption = prompts.load("t2v")
    text = prompts.compact(caption)
    assert "\n" not in text and json.loads(text) == caption


def test_plain_text_is_not_taken_for_a_structured_prompt():
    assert not prompts.is_structured("a red ball rolls")
    assert not prompts.is_structured("{not json")
    assert prompts.is_structured('{"a": 1}')


def test_negative_prompt_avoids_blocklisted_words():
    text = prompts.negative_prompt().lower()
    assert len(text.split()) >= 30
    for word in BLOCKLIST_STYLE:
        assert not re.search(rf"\b{word}", text), word


def test_word_count_counts_nested_strings():
    assert prompts.count_words({"a": "one two", "b": ["three", {"c": "four five"}], "d": 3}) == 5


def test_unknown_mode_lists_the_modes():
    with pytest.raises(InvalidSettingError, match="t2v"):
        prompts.load("t2x")
