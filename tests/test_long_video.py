"""A long video's arithmetic, without a model: the frames each chunk adds, where the seams fall, the join that keeps
the repeated pictures once, the sound crossfaded to the pictures' length, and seams and drift that see a jump."""

from __future__ import annotations

import numpy as np
import pytest

from cosmos3_audiovisual import long_video
from helpers.errors import InvalidSettingError


def test_a_plan_counts_the_frames_each_chunk_adds_and_where_the_seams_fall() -> None:
    p = long_video.plan(4, 189, 24)  # NVIDIA's 189 frames, two latent frames kept: the last 5 pictures
    assert (p.kept, p.new_frames, p.total_frames, p.seams) == (5, 184, 741, [189, 373, 557])
    assert p.seconds == pytest.approx(30.875)  # the "30-second 480p video (4 chunks)"
    assert long_video.plan(8, 189, 24).seconds > 60
    one = long_video.plan(2, 9, 24, latent_frames=1)
    assert (one.kept, one.total_frames, one.seams) == (1, 17, [9])
    assert long_video.condition_indexes(2) == (0, 1) and long_video.kept_frames(3) == 9
    with pytest.raises(InvalidSettingError, match="keeps 5 of the one before and adds none"):
        long_video.plan(3, 5, 24)


@pytest.mark.parametrize("chunks", [1, 9, -1, 2.5, True, "3"])
def test_a_length_out_of_range_is_refused_naming_long_chunks(chunks: object) -> None:
    with pytest.raises(InvalidSettingError, match=r"LONG_CHUNKS=.* is not a length: give 0 to skip"):
        long_video.check_chunks(chunks)


def test_zero_skips_and_two_to_eight_are_lengths() -> None:
    assert [long_video.check_chunks(n) for n in (0, 2, 8)] == [0, 2, 8]


def test_the_join_keeps_each_repeated_picture_once() -> None:
    p = long_video.plan(3, 9, 24)
    clips = [np.full((9, 2, 2, 3), k * 10, np.uint8) for k in range(3)]
    for k in (1, 2):  # each chunk begins with the 5 pictures it continues from
        clips[k][:5] = clips[k - 1][-5:]
    joined = long_video.join(clips, p.kept)
    assert len(joined) == p.total_frames == 17
    assert [int(joined[i, 0, 0, 0]) for i in (0, 8, 9, 12, 13, 16)] == [0, 0, 10, 10, 20, 20]


def test_the_sound_is_as_long_as_the_pictures_and_crossfades_into_each_seam() -> None:
    rate, p = 48000, long_video.plan(3, 9, 24)
    sounds = [np.full((2, round(p.frames / p.fps * rate)), level, np.float32) for level in (0.0, 1.0, -1.0)]
    joined = long_video.join_sound(sounds, rate, p.kept / p.fps)
    assert joined.shape == (2, round(p.seconds * rate))
    seam = round(p.seams[0] / p.fps * rate)
    fade = round(long_video.CROSSFADE_S * rate)
    assert joined[0, seam - fade - 1] == 0.0 and joined[0, seam] == 1.0  # before the fade, and the next chunk's own
    assert np.all(np.diff(joined[0, seam - fade : seam]) >= 0)  # a ramp from one chunk's sound to the next


def test_seams_and_drift_see_a_jump_and_a_darkening() -> None:
    p = long_video.plan(3, 9, 24)
    video = np.concatenate([np.full((9, 4, 4, 3), 100.0), np.full((4, 4, 4, 3), 160.0), np.full((4, 4, 4, 3), 40.0)])
    video += np.arange(len(video))[:, None, None, None]  # a steady step of 1 inside the chunks
    seams = long_video.seams(video, p)
    assert [row["frame"] for row in seams] == [9, 13]
    assert seams[0]["jump"] == 61.0 and seams[0]["step inside"] == 1.0 and seams[1]["jump"] == 119.0
    levels = [row["level"] for row in long_video.drift(video, p)]
    assert levels[1] > levels[0] > levels[2]


@pytest.mark.notebook
@pytest.mark.parametrize("fixture", ["audiovisual_diffusers_run", "audiovisual_vllm_run"])
def test_each_notebook_measures_its_long_videos_seams_drift_and_one_latent_frame_against_two(request, fixture) -> None:
    import json

    from cookbook_tools import notebooks

    executed = request.getfixturevalue(fixture)
    run_dir = notebooks.run_folder_from(executed)
    measured = json.loads((run_dir / "manifest.json").read_text())["info"]["long_video"]
    assert [row["frame"] for row in measured["seams"]] == [9, 13]  # smoke: 9 frames, then 4 new a chunk
    assert all(row["jump"] >= 0 and row["step inside"] > 0 for row in measured["seams"])
    assert [row["chunk"] for row in measured["drift"]] == [1, 2, 3]
    kept = {row["latent frames kept"]: row for row in measured["latent_frames_kept"]}
    assert (kept[2]["pictures kept"], kept[2]["new frames"], kept[1]["pictures kept"], kept[1]["new frames"]) == (
        5,
        4,
        1,
        8,
    )
    assert kept[1]["seconds"] > 0 and kept[2]["seconds"] > 0
