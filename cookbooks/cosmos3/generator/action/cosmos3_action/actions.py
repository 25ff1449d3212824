"""Action arrays: the bundled trajectories, chunks for a rollout, DROID's and UMI's normalisation, and action files.

An action file is a pair: `<name>.npy` (float32, one row per step) and `<name>.json` (domain, task, columns,
units, frame rate, and the normalisation applied), so that anyone can read the numbers back without this package.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from helpers import media
from helpers.errors import InvalidSettingError

POSE_COLUMNS = ("dx", "dy", "dz", "r00", "r10", "r20", "r01", "r11", "r21")


@dataclass(frozen=True)
class Normalization:
    """Per-channel quantile normalisation: x -> clip((x - offset) / scale, -1, 1), offset and scale from the 1st
    and 99th percentiles of the training data."""

    q01: tuple[float, ...]
    q99: tuple[float, ...]
    source: str

    @property
    def offset(self) -> np.ndarray:
        return (np.asarray(self.q99) + np.asarray(self.q01)) / 2

    @property
    def scale(self) -> np.ndarray:
        # A channel whose quantiles meet (the gripper never moves in some data) would divide by zero.
        return np.maximum((np.asarray(self.q99) - np.asarray(self.q01)) / 2, 1e-8)

    def normalize(self, actions: np.ndarray) -> np.ndarray:
        return np.clip((np.asarray(actions) - self.offset) / self.scale, -1.0, 1.0).astype(np.float32)

    def denormalize(self, actions: np.ndarray) -> np.ndarray:
        return (np.asarray(actions) * self.scale + self.offset).astype(np.float32)


DROID_NORMALIZATION = Normalization(
    q01=(-0.0142, -0.013416, -0.015206, 0.998459, -0.047659, -0.034774, -0.047609, 0.998428, -0.035553, 0.0),
    q99=(0.014515, 0.011517, 0.01452, 1.0, 0.047596, 0.03466, 0.047654, 1.0, 0.038888, 1.0),
    source="NVIDIA's Cosmos 3 action cookbook, assets/actions/droid_normalization_stats.json (quantile_rot)",
)
UMI_NORMALIZATION = Normalization(
    q01=(-0.035246, -0.037122, -0.035762, 0.98405, -0.108706, -0.065188, -0.110908, 0.982889, -0.085106, 0.0),
    q99=(0.038095, 0.033082, 0.032447, 1.0, 0.110573, 0.068087, 0.108972, 1.0, 0.089037, 0.096749),
    source="NVIDIA's Cosmos framework, normalizer_stats/umi_lerobot_stats.json: the first 10 channels (one arm), "
    "as its UMI dataset normalises them",
)
# The embodiments whose actions the model reads normalised, and how.
NORMALIZATIONS: dict[str, Normalization] = {"droid_lerobot": DROID_NORMALIZATION, "umi": UMI_NORMALIZATION}


def columns(width: int) -> list[str]:
    """Column names of a `width`-wide action: pose blocks of 9, then a gripper, for the domains the cookbook runs."""
    if width == 9:
        return list(POSE_COLUMNS)
    if width == 10:
        return [*POSE_COLUMNS, "gripper"]
    return [f"a{i}" for i in range(width)]


def chunks(actions: np.ndarray, chunk_size: int) -> list[np.ndarray]:
    """A trajectory cut into consecutive chunks of `chunk_size` steps, one per call of a rollout."""
    actions = np.asarray(actions)
    if len(actions) == 0 or len(actions) % chunk_size:
        raise ValueError(
            f"a trajectory of {len(actions)} steps does not split into chunks of {chunk_size}: trim it to a multiple"
        )
    return [actions[i : i + chunk_size] for i in range(0, len(actions), chunk_size)]


def rollout(trajectory: np.ndarray, chunk_size: int, count: int) -> list[np.ndarray]:
    """The first `count` chunks of a trajectory, one per call of an autoregressive rollout (`ROLLOUT_CHUNKS`)."""
    available = chunks(trajectory, chunk_size)
    if not 1 <= count <= len(available):
        raise InvalidSettingError(
            f"ROLLOUT_CHUNKS={count} must be 1 to {len(available)}: the trajectory has {len(available)} chunks of "
            f"{chunk_size} steps."
        )
    return available[:count]


def write(stem: str | os.PathLike[str], actions: Any, about: dict[str, Any]) -> tuple[Path, Path]:
    """Write `<stem>.npy` and `<stem>.json` (the shape and columns, plus `about`); returns both paths."""
    width = np.asarray(actions).shape[1]
    return media.write_array(stem, actions, {"columns": columns(width), **about})


def read(path: str | os.PathLike[str]) -> tuple[np.ndarray, dict[str, Any]]:
    """The array and the description of an action file pair, from either of its two paths."""
    return media.read_array(path)


def save(run: Any, name: str, actions: Any, s: Any, **about: Any) -> Path:
    """Write an action file pair into `run`'s folder (`write`: the settings' domain, task and frame rate, plus
    `about`) and list both files in its manifest. Returns the `.npy` path."""
    about = {"domain_name": s.domain_name, "task": s.task, "fps": s.fps, **about}
    npy, meta = write(run.path / run.free_stem(name), actions, about)
    for file in (npy, meta):
        run.add(name, file, s)
    return npy
