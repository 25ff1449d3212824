"""Render the start images, clips and trajectories of the action cookbook.

Two scenes are drawn with numpy and Pillow from known camera or gripper poses, so every clip comes with the exact
trajectory it was rendered from, and every trajectory is stored as the actions Cosmos 3 reads (9-D pose deltas,
NVIDIA's "backward framewise" convention, `helpers.trajectories`):

* a car driving a two-lane road that bends left: 61 frames at 10 fps, 832x480, from the driver's eye
  (``av_drive``: 60 ego-pose deltas, translations in metres times 1.35 as NVIDIA's AV actions store them);
* a gripper that reaches for a red block, grasps it and lifts it towards a tray: 49 frames at 15 fps, 736x544,
  seen from a fixed camera in front of the table (``droid_pick``: 48 rows of a 9-D end-effector delta in metres
  plus the gripper, 0 open to 1 closed, before DROID's normalisation).

    python scripts/make_action_assets.py

Writes ``images/<name>_start.png``, ``videos/<name>.mp4`` and ``trajectories/<name>.npy`` + ``.json`` under
``cookbooks/cosmos3/generator/action/assets/``. Fixed inputs, no randomness, no network: the same bytes every run.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from make_conditioning_assets import write_mp4  # the same fixed, byte-exact H.264 settings
from PIL import Image, ImageDraw

from helpers import actions, trajectories

ASSETS = Path(__file__).resolve().parents[1] / "cookbooks" / "cosmos3" / "generator" / "action" / "assets"
SUPERSAMPLE = 2
Project = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


def rotation_y(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def pose(rotation: np.ndarray, position: Sequence[float]) -> np.ndarray:
    out = np.eye(4)
    out[:3, :3], out[:3, 3] = rotation, position
    return out


def projector(camera: np.ndarray, focal: float, centre: tuple[float, float]) -> Project:
    """World points (N, 3) -> pixel coordinates (N, 2) and depths (N,), for a camera-to-world pose (OpenCV axes)."""
    world_to_camera = np.linalg.inv(camera)

    def project(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = points @ world_to_camera[:3, :3].T + world_to_camera[:3, 3]
        z = p[:, 2]
        safe = np.where(z > 1e-3, z, 1e-3)
        return np.stack([focal * p[:, 0] / safe + centre[0], focal * p[:, 1] / safe + centre[1]], axis=1), z

    return project


def fog(color: Sequence[int], depth: float, far: float, sky: Sequence[int]) -> tuple[int, ...]:
    t = min(max(depth / far, 0.0), 1.0) ** 1.5
    return tuple(int(c * (1 - t) + s * t) for c, s in zip(color, sky, strict=True))


def finish(image: Image.Image, size: tuple[int, int]) -> np.ndarray:
    return np.asarray(image.resize(size, Image.Resampling.LANCZOS).convert("RGB"))


# --- The car ------------------------------------------------------------------------------------------------------
AV_SIZE, AV_FPS, AV_STEPS, AV_SPEED = (832, 480), 10, 60, 8.0  # 8 m/s: 0.8 m between frames
EYE_HEIGHT, LANE = 1.5, 3.6
SKY, GRASS, ASPHALT, PAINT = (176, 200, 226), (92, 128, 64), (74, 74, 78), (236, 236, 228)


def heading(step: float) -> float:
    """Left turn angle after `step` frames: straight for 2 s, then easing into a bend of 0.15 rad/s."""
    t = step / AV_FPS
    return 0.0 if t < 2 else 0.15 * (t - 2) ** 2 / 2 if t < 3 else 0.075 + 0.15 * (t - 3)


def road_centre(last: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions and heading angles along the lane the car drives, from 10 m behind to well past its end."""
    dt = 0.25  # finer than a frame, so curves stay smooth
    steps = np.arange(-10 / (AV_SPEED / AV_FPS), last + 120 / (AV_SPEED / AV_FPS), dt)
    angles = np.array([heading(max(s, 0.0)) for s in steps])
    forward = np.stack([-np.sin(angles), np.zeros_like(angles), np.cos(angles)], axis=1)  # left turn: towards -x
    origin = int(np.argmin(np.abs(steps)))
    points = np.cumsum(forward * AV_SPEED / AV_FPS * dt, axis=0)
    return points - points[origin], angles


def car_poses() -> np.ndarray:
    centre, angles = road_centre(AV_STEPS)
    dt = 0.25
    index = [int(round((step + 10 / (AV_SPEED / AV_FPS)) / dt)) for step in range(AV_STEPS + 1)]
    return np.stack([pose(rotation_y(-angles[i]), centre[i] + [0, 0, 0]) for i in index])


def draw_car_frame(camera: np.ndarray) -> np.ndarray:
    w, h = AV_SIZE[0] * SUPERSAMPLE, AV_SIZE[1] * SUPERSAMPLE
    horizon = 0.42 * h
    project = projector(camera, 0.55 * w, (w / 2, horizon))
    image = Image.new("RGB", (w, h), SKY)
    draw = ImageDraw.Draw(image)
    for y in range(int(horizon)):  # the sky darkens upwards
        t = 1 - y / horizon
        draw.line([(0, y), (w, y)], fill=tuple(int(c * (1 - 0.35 * t)) for c in SKY))
    draw.rectangle([0, horizon, w, h], fill=GRASS)
    centre, angles = road_centre(AV_STEPS)
    right = np.stack([np.cos(angles), np.zeros_like(angles), np.sin(angles)], axis=1)
    ground = centre + [0, EYE_HEIGHT, 0]

    def strip(left: float, width: float, color: tuple[int, ...], dashed: bool = False) -> None:
        a, depth = project(ground + right * left)
        b, _ = project(ground + right * (left + width))
        for i in range(len(ground) - 1, 0, -1):  # far to near, so nearer pieces cover farther ones
            if depth[i] < 0.5 or depth[i - 1] < 0.5 or depth[i] > 140:
                continue
            if dashed and (i // 12) % 3:  # 3 m of paint, 6 m of gap
                continue
            quad = [tuple(a[i - 1]), tuple(a[i]), tuple(b[i]), tuple(b[i - 1])]
            draw.polygon(quad, fill=fog(color, depth[i], 160, SKY))

    strip(-1.5 * LANE, 2 * LANE, ASPHALT)
    strip(-1.5 * LANE, 0.15, PAINT)
    strip(0.5 * LANE - 0.15, 0.15, PAINT)
    strip(-0.5 * LANE - 0.075, 0.15, (230, 200, 60), dashed=True)
    # Posts and trees beside the road, every 12 m, give the motion parallax.
    for i in range(len(ground) - 1, 0, -48):
        for side, tall, color in ((-1.5 * LANE - 2.5, 1.1, (220, 220, 220)), (0.5 * LANE + 2.0, 1.1, (220, 220, 220))):
            base = ground[i] + right[i] * side
            (foot, top), depth = project(np.stack([base, base - [0, tall, 0]]))
            if depth[0] < 1.0 or depth[0] > 140:
                continue
            half = max(1.0, 0.06 * 0.55 * w / depth[0])
            draw.rectangle([foot[0] - half, top[1], foot[0] + half, foot[1]], fill=fog(color, depth[0], 160, SKY))
        tree = ground[i] + right[i] * (-1.5 * LANE - 9.0)
        (foot, top), depth = project(np.stack([tree, tree - [0, 5.0, 0]]))
        if 1.5 < depth[0] < 140:
            radius = 1.8 * 0.55 * w / depth[0]
            draw.rectangle(
                [foot[0] - radius / 6, top[1], foot[0] + radius / 6, foot[1]],
                fill=fog((90, 64, 40), depth[0], 160, SKY),
            )
            draw.ellipse(
                [top[0] - radius, top[1] - radius, top[0] + radius, top[1] + radius],
                fill=fog((46, 96, 44), depth[0], 160, SKY),
            )
    return finish(image, AV_SIZE)


# --- The gripper --------------------------------------------------------------------------------------------------
ARM_SIZE, ARM_FPS = (736, 544), 15
TABLE, FLOOR, BLOCK, TRAY, METAL = (176, 134, 92), (60, 60, 66), (200, 40, 36), (40, 90, 190), (150, 154, 160)
BLOCK_AT, BLOCK_HALF, TRAY_AT = np.array([0.10, 0.0, 0.35]), 0.025, np.array([-0.12, 0.0, 0.44])
# Where the fingertips go (x right, y down, z away from the camera; the table top is y = 0), and the gripper.
# Eased steps stay within DROID's 99th percentile of motion per frame (about 1 cm), so normalising clips nothing.
WAYPOINTS = [(0, (-0.02, -0.22, 0.30), 0.0), (16, (0.10, -0.12, 0.35), 0.0), (28, (0.10, -0.035, 0.35), 0.0)]
WAYPOINTS += [(32, (0.10, -0.035, 0.35), 1.0), (48, (-0.02, -0.14, 0.40), 1.0)]


def gripper_path() -> tuple[np.ndarray, np.ndarray]:
    """Fingertip positions (49, 3) and gripper closure (49,) at each frame, eased between the waypoints."""
    points, grip = [], []
    for (f0, p0, g0), (f1, p1, g1) in zip(WAYPOINTS, WAYPOINTS[1:], strict=False):
        for f in range(f0, f1):
            t = (f - f0) / (f1 - f0)
            t = t * t * (3 - 2 * t)
            points.append(np.add(p0, np.subtract(p1, p0) * t))
            grip.append(g0 + (g1 - g0) * t)
    points.append(np.array(WAYPOINTS[-1][1]))
    grip.append(WAYPOINTS[-1][2])
    return np.array(points), np.array(grip)


def arm_camera() -> np.ndarray:
    position, target = np.array([0.0, -0.75, -0.45]), np.array([0.0, 0.0, 0.38])
    forward = (target - position) / np.linalg.norm(target - position)
    right = np.cross([0.0, 1.0, 0.0], forward)
    right /= np.linalg.norm(right)
    return pose(np.stack([right, np.cross(forward, right), forward], axis=1), position)


def draw_arm_frame(tip: np.ndarray, closure: float, held: bool) -> np.ndarray:
    w, h = ARM_SIZE[0] * SUPERSAMPLE, ARM_SIZE[1] * SUPERSAMPLE
    focal = 0.9 * w
    project = projector(arm_camera(), focal, (w / 2, h / 2))
    image = Image.new("RGB", (w, h), FLOOR)
    draw = ImageDraw.Draw(image)

    def face(corners: Sequence[Sequence[float]], color: tuple[int, ...]) -> None:
        pixels, _ = project(np.asarray(corners, dtype=float))
        draw.polygon([tuple(p) for p in pixels], fill=color)

    def box(centre: np.ndarray, half: Sequence[float], color: tuple[int, int, int]) -> None:
        x, y, z = centre
        hx, hy, hz = half
        shade = [tuple(int(c * k) for c in color) for k in (0.75, 1.0, 0.9)]
        face(
            [(x - hx, y + hy, z - hz), (x + hx, y + hy, z - hz), (x + hx, y - hy, z - hz), (x - hx, y - hy, z - hz)],
            shade[0],
        )
        face(
            [(x - hx, y - hy, z - hz), (x + hx, y - hy, z - hz), (x + hx, y - hy, z + hz), (x - hx, y - hy, z + hz)],
            shade[1],
        )
        side = x - hx if x > 0 else x + hx  # the side that faces the camera
        face([(side, y + hy, z - hz), (side, y + hy, z + hz), (side, y - hy, z + hz), (side, y - hy, z - hz)], shade[2])

    face([(-0.6, 0, -0.05), (0.6, 0, -0.05), (0.6, 0, 0.85), (-0.6, 0, 0.85)], TABLE)
    for k in range(1, 9):  # wood grain
        z = -0.05 + 0.1 * k
        (a, b), _ = project(np.array([(-0.6, 0, z), (0.6, 0, z)]))
        draw.line([tuple(a), tuple(b)], fill=(160, 120, 82), width=2)
    face(
        [
            (TRAY_AT[0] - 0.09, 0, TRAY_AT[2] - 0.07),
            (TRAY_AT[0] + 0.09, 0, TRAY_AT[2] - 0.07),
            (TRAY_AT[0] + 0.09, 0, TRAY_AT[2] + 0.07),
            (TRAY_AT[0] - 0.09, 0, TRAY_AT[2] + 0.07),
        ],
        TRAY,
    )
    shadow, _ = project(np.array([tip[0], 0.0, tip[2]])[None])
    r = 0.03 * focal / 0.9 * (1 - 2 * tip[1])
    draw.ellipse([shadow[0][0] - r, shadow[0][1] - r / 2, shadow[0][0] + r, shadow[0][1] + r / 2], fill=(120, 90, 62))
    block = tip + [0, BLOCK_HALF - 0.01, 0] if held else BLOCK_AT - [0, BLOCK_HALF, 0]
    box(block, (BLOCK_HALF,) * 3, BLOCK)
    opening = 0.045 * (1 - closure) + BLOCK_HALF * closure + 0.006
    box(tip - [0, 0.12, 0], (0.05, 0.02, 0.03), METAL)  # the palm
    for side in (-1, 1):
        box(tip + [side * opening, -0.05, 0], (0.006, 0.05, 0.015), (90, 92, 98))
    box(tip - [0, 0.45, 0], (0.03, 0.31, 0.03), (210, 210, 214))  # the forearm, from above
    return finish(image, ARM_SIZE)


# --- Files --------------------------------------------------------------------------------------------------------
def write_scene(name: str, frames: list[np.ndarray], fps: int, deltas: np.ndarray, about: dict) -> None:
    (ASSETS / "images").mkdir(parents=True, exist_ok=True)
    (ASSETS / "trajectories").mkdir(parents=True, exist_ok=True)
    Image.fromarray(frames[0]).save(ASSETS / "images" / f"{name}_start.png", optimize=True)
    write_mp4(frames, ASSETS / "videos" / f"{name}.mp4", fps)
    provenance = "rendered by scripts/make_action_assets.py from this trajectory; the project's own, Apache-2.0"
    actions.write(ASSETS / "trajectories" / name, deltas, {**about, "fps": fps, "provenance": provenance})


def main(argv: Sequence[str] | None = None) -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    cameras = car_poses()
    write_scene(
        "av_drive",
        [draw_car_frame(c) for c in cameras],
        AV_FPS,
        trajectories.deltas_from_poses(cameras, translation_scale=1.35),
        {
            "domain_name": "av",
            "units": "translation: metres x 1.35 (NVIDIA's AV scale); rotation: 6-D (first two matrix columns)",
            "convention": "each row is the camera's motion from one frame to the next, in the earlier frame's "
            "OpenCV axes (x right, y down, z forward)",
            "scene": "a car drives a two-lane road at 8 m/s; after 2 s the road bends left",
        },
    )
    tips, closure = gripper_path()
    grasped = [f >= 32 for f in range(len(tips))]
    tip_poses = np.stack([pose(np.eye(3), p) for p in tips])
    deltas = np.concatenate([trajectories.deltas_from_poses(tip_poses), closure[1:, None]], axis=1)
    write_scene(
        "droid_pick",
        [draw_arm_frame(t, c, g) for t, c, g in zip(tips, closure, grasped, strict=True)],
        ARM_FPS,
        deltas,
        {
            "domain_name": "droid_lerobot",
            "units": "translation: metres; rotation: 6-D (first two matrix columns); gripper: 0 open to 1 closed; "
            "not yet normalised (DROID's quantile normalisation is applied before a call)",
            "convention": "each row is the fingertips' motion from one frame to the next, in the earlier pose's "
            "axes (x right, y down, z away from the camera), then the gripper's closure at the later frame",
            "scene": "a gripper reaches for a red block, grasps it and lifts it towards a blue tray",
        },
    )
    print(f"wrote the action assets under {ASSETS}")


if __name__ == "__main__":
    main()
