"""Pose deltas and trajectories in metres, action files, DROID's normalisation and the bundled action assets."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from cosmos3_action import actions, trajectories
from helpers import assets, media
from helpers.errors import InvalidSettingError, MediaError


def _yaw(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def test_six_d_rotations_round_trip_and_repair_any_two_columns() -> None:
    rotation = _yaw(0.3) @ np.array([[1, 0, 0], [0, math.cos(0.2), -math.sin(0.2)], [0, math.sin(0.2), math.cos(0.2)]])
    np.testing.assert_allclose(
        trajectories.rotation_from_6d(trajectories.rotation_to_6d(rotation)), rotation, atol=1e-12
    )
    repaired = trajectories.rotation_from_6d(np.array([2.0, 0.1, 0.0, 0.3, 1.5, 0.2]))  # a model's raw output
    np.testing.assert_allclose(repaired @ repaired.T, np.eye(3), atol=1e-12)
    assert np.linalg.det(repaired) == pytest.approx(1.0)


def test_deltas_compose_in_each_earlier_frame() -> None:
    forward = np.array([[0, 0, 1.35, *trajectories.IDENTITY_6D]] * 4)  # 1 m a step at the AV scale
    np.testing.assert_allclose(trajectories.positions(forward, 1.35)[:, 2], [0, 1, 2, 3, 4])
    # Turn a quarter left, then step forward: the step is along the new heading, in the first frame's axes.
    turn = np.array([[0, 0, 0, *trajectories.rotation_to_6d(_yaw(-math.pi / 2))], [0, 0, 1, *trajectories.IDENTITY_6D]])
    np.testing.assert_allclose(trajectories.positions(turn)[-1], [-1, 0, 0], atol=1e-12)
    poses = trajectories.poses_from_deltas(turn)
    np.testing.assert_allclose(trajectories.deltas_from_poses(poses), turn, atol=1e-12)
    with pytest.raises(ValueError, match="shape"):
        trajectories.positions(np.zeros((3, 5)))


def test_a_plot_is_written_for_any_number_of_trajectories(tmp_path) -> None:
    walk = np.array([[0.1, 0, 0.2, *trajectories.IDENTITY_6D, 0.5]] * 5)
    path = trajectories.plot(tmp_path / "p.png", {"a": walk, "b": walk * 0.9}, title="t", top_down=False)
    assert media.probe(path).kind == "image"


def test_droid_normalisation_round_trips_inside_the_quantiles_and_clips_outside() -> None:
    norm = actions.DROID_NORMALIZATION
    inside = (np.asarray(norm.q01) + np.asarray(norm.q99)) / 2 + 0.3 * (np.asarray(norm.q99) - np.asarray(norm.q01)) / 2
    assert np.allclose(norm.normalize(inside[None]), 0.3)
    np.testing.assert_allclose(norm.denormalize(norm.normalize(inside[None])), inside[None], rtol=1e-5)
    assert norm.normalize(np.full((1, 10), 5.0)).max() == 1.0


def test_action_files_are_a_pair_that_must_agree(tmp_path) -> None:
    npy, meta = actions.write(tmp_path / "walk", np.ones((4, 10)), {"domain_name": "droid_lerobot", "units": "m"})
    array, about = actions.read(meta)
    assert array.shape == (4, 10) and array.dtype == np.float32 and about["columns"][-1] == "gripper"
    json.loads(meta.read_text())  # plain JSON, readable without this package
    np.save(npy, np.ones((3, 10), dtype=np.float32))
    with pytest.raises(MediaError, match="holds shape"):
        actions.read(npy)
    npy.unlink()
    with pytest.raises(MediaError, match="is a pair"):
        actions.read(meta)


def test_a_rollout_takes_whole_chunks() -> None:
    assert [len(c) for c in actions.rollout(np.zeros((48, 10)), 16, 2)] == [16, 16]
    with pytest.raises(InvalidSettingError, match="ROLLOUT_CHUNKS=4 must be 1 to 3"):
        actions.rollout(np.zeros((48, 10)), 16, 4)
    with pytest.raises(ValueError, match="does not split"):
        actions.chunks(np.zeros((50, 10)), 16)


@pytest.mark.parametrize(("name", "domain"), [("av_drive", "av"), ("droid_pick", "droid_lerobot"), ("umi_cup", "umi")])
def test_each_bundled_clip_is_rendered_from_its_trajectory(name: str, domain: str) -> None:
    folder = assets.assets_dir("action")
    deltas, about = actions.read(folder / "trajectories" / f"{name}.npy")
    clip = media.probe(folder / "videos" / f"{name}.mp4")
    start = media.probe(folder / "images" / f"{name}_start.png")
    assert about["domain_name"] == domain and "Apache-2.0" in about["provenance"]
    assert clip.num_frames == len(deltas) + 1 and clip.fps == about["fps"]
    assert (start.width, start.height) == (clip.width, clip.height)
    np.testing.assert_array_equal(
        media.read_frames(folder / "images" / f"{name}_start.png")[0].shape, (clip.height, clip.width, 3)
    )
    if domain in actions.NORMALIZATIONS:  # every step within the embodiment's quantiles: normalising clips nothing
        norm = actions.NORMALIZATIONS[domain]
        np.testing.assert_allclose(norm.denormalize(norm.normalize(deltas)), deltas, atol=1e-6)


def test_the_three_drives_from_one_frame_go_straight_left_and_right() -> None:
    folder = assets.assets_dir("action") / "trajectories"
    ends = {}
    for turn in ("straight", "left", "right"):
        deltas, about = actions.read(folder / f"av_{turn}.npy")
        assert deltas.shape == (60, 9) and about["domain_name"] == "av" and about["fps"] == 10
        ends[turn] = trajectories.positions(deltas, translation_scale=1.35)[-1]  # metres, x right, z forward
    assert abs(ends["straight"][0]) < 1e-6 and ends["straight"][2] == pytest.approx(48.0, abs=0.1)  # 6 s at 8 m/s
    assert ends["left"][0] < -10 and ends["right"][0] > 10  # OpenCV axes: x is to the right
    np.testing.assert_allclose(ends["left"] * [-1, 1, 1], ends["right"], atol=1e-6)  # mirror images


def test_the_droid_clip_is_nvidias_three_camera_stack() -> None:
    # The wrist camera on top at DROID's 640x360, the two exterior cameras halved below it: 640x540.
    start = media.read_frames(assets.assets_dir("action") / "images" / "droid_pick_start.png")[0]
    assert start.shape == (540, 640, 3)
    left, right = start[360:, :320].astype(int), start[360:, 320:].astype(int)
    assert np.abs(left - right).mean() > 5  # two cameras, not one view twice
