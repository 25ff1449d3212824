"""Pose actions as trajectories: Cosmos 3's 9-D pose deltas turned into positions in metres, and back, and a plot.

Every pose block of a Cosmos 3 action is 9 numbers: a translation (3) and a rotation in the 6-D form of Zhou et al.
(the first two columns of the rotation matrix, column by column). Each row is the motion from one frame to the
next, in the earlier frame's own axes (NVIDIA's "backward framewise" convention: delta_i = pose_i^-1 @ pose_i+1).
Poses use OpenCV's camera axes: +x right, +y down, +z forward. NVIDIA's AV actions store translations multiplied by
1.35 (`translation_scale`); DROID's are normalised per channel first (`cosmos3_action.actions.Normalization`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

POSE_WIDTH = 9
IDENTITY_6D = np.array([1.0, 0.0, 0.0, 0.0, 1.0, 0.0])


def rotation_from_6d(r6: np.ndarray) -> np.ndarray:
    """Rotation matrices (..., 3, 3) from 6-D rotations (..., 6): Gram-Schmidt on the two given columns, the third
    their cross product. Any two independent columns give a proper rotation, so a model's raw output is usable."""
    r6 = np.asarray(r6, dtype=np.float64)
    a, b = r6[..., :3], r6[..., 3:6]
    x = a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), 1e-12)
    b = b - np.sum(x * b, axis=-1, keepdims=True) * x
    y = b / np.maximum(np.linalg.norm(b, axis=-1, keepdims=True), 1e-12)
    z = np.cross(x, y)
    return np.stack([x, y, z], axis=-1)


def rotation_to_6d(rotation: np.ndarray) -> np.ndarray:
    """The 6-D form (..., 6) of rotation matrices (..., 3, 3): their first column, then their second."""
    rotation = np.asarray(rotation, dtype=np.float64)
    return np.concatenate([rotation[..., :, 0], rotation[..., :, 1]], axis=-1)


def poses_from_deltas(deltas: np.ndarray, translation_scale: float = 1.0) -> np.ndarray:
    """The T + 1 poses (4x4, starting at the identity) that T pose deltas (T, 9 or more; the first 9 columns are
    read) lead through. Translations are divided by `translation_scale` to give metres."""
    deltas = np.asarray(deltas, dtype=np.float64)
    if deltas.ndim != 2 or deltas.shape[1] < POSE_WIDTH:
        raise ValueError(f"pose deltas must have shape (steps, >= {POSE_WIDTH}); got {deltas.shape}")
    steps = np.tile(np.eye(4), (len(deltas), 1, 1))
    steps[:, :3, :3] = rotation_from_6d(deltas[:, 3:POSE_WIDTH])
    steps[:, :3, 3] = deltas[:, :3] / translation_scale
    poses = [np.eye(4)]
    for step in steps:
        poses.append(poses[-1] @ step)
    return np.stack(poses)


def deltas_from_poses(poses: np.ndarray, translation_scale: float = 1.0) -> np.ndarray:
    """The (T, 9) pose deltas between T + 1 consecutive 4x4 poses, translations multiplied by `translation_scale`."""
    poses = np.asarray(poses, dtype=np.float64)
    steps = np.linalg.inv(poses[:-1]) @ poses[1:]
    return np.concatenate([steps[:, :3, 3] * translation_scale, rotation_to_6d(steps[:, :3, :3])], axis=-1)


def positions(deltas: np.ndarray, translation_scale: float = 1.0) -> np.ndarray:
    """The (T + 1, 3) positions in metres, in the first frame's axes, that T pose deltas lead through."""
    return poses_from_deltas(deltas, translation_scale)[:, :3, 3]


def plot(
    path: str | os.PathLike[str],
    trajectories: dict[str, np.ndarray],
    *,
    title: str,
    translation_scale: float = 1.0,
    top_down: bool = True,
) -> Path:
    """Save a plot of several pose-delta trajectories (label -> (T, >= 9) array) in metres, from the first frame's
    point of view: seen from above (x right, z forward) when `top_down`, else from the side (z forward, height up).
    Returns the PNG's path."""
    import matplotlib

    matplotlib.use("Agg")  # a file, not a window: works in a kernel, a test or a terminal alike
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4.5), dpi=100)
    for (label, deltas), marker in zip(trajectories.items(), "os^D", strict=False):
        xyz = positions(deltas, translation_scale)
        horizontal, vertical = (xyz[:, 0], xyz[:, 2]) if top_down else (xyz[:, 2], -xyz[:, 1])
        ax.plot(horizontal, vertical, marker=marker, markersize=3, linewidth=1.5, label=label)
    ax.plot([0], [0], "k*", markersize=10, label="start")
    ax.set_xlabel("x, right (m)" if top_down else "z, forward (m)")
    ax.set_ylabel("z, forward (m)" if top_down else "height (m)")
    ax.set_title(title)
    ax.axis("equal")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path
