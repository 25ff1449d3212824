"""Render the start images, clips and trajectories of the action cookbook.

Two scenes are drawn with numpy and Pillow from known camera or gripper poses, so every clip comes with the exact
trajectory it was rendered from, and every trajectory is stored as the actions Cosmos 3 reads (9-D pose deltas,
NVIDIA's "backward framewise" convention, `cosmos3_action.trajectories`):

* a car driving a two-lane road that bends left: 61 frames at 10 fps, 832x480, from the driver's eye
  (``av_drive``: 60 ego-pose deltas, translations in metres times 1.35 as NVIDIA's AV actions store them);
* a DROID arm that grasps a red block and carries it to a tray: 81 frames at 15 fps from three cameras stacked as
  NVIDIA stacks DROID's (the wrist on top, 640x360; the two exterior cameras below, 320x180 each: 640x540)
  (``droid_pick``: 80 rows of a 9-D end-effector delta in metres plus the gripper, 0 open to 1 closed, before
  DROID's normalisation);
* a hand-held UMI gripper whose camera takes a green cup off a desk: 33 frames at 20 fps, 256x256 (``umi_cup``: 32
  rows of the camera's 9-D delta in metres plus the fingers' opening in metres, before UMI's normalisation);
* three drives from the car's start frame, straight, left and right (``av_straight``, ``av_left``, ``av_right``:
  trajectories only, 60 steps each).

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

from cosmos3_action import actions, trajectories

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


# --- Painting boxes ------------------------------------------------------------------------------------------------
class Painter:
    """Flat-shaded faces and boxes seen from one camera, drawn back to front by the caller. A face with a corner
    behind the camera is left out (the wrist camera sits among the gripper's own parts)."""

    def __init__(self, camera: np.ndarray, focal: float, size: tuple[int, int], background: tuple[int, int, int]):
        self.camera_x = camera[0, 3]
        self.project = projector(camera, focal, (size[0] / 2, size[1] / 2))
        self.image = Image.new("RGB", size, background)
        self.draw = ImageDraw.Draw(self.image)

    def face(self, corners: Sequence[Sequence[float]], color: tuple[int, ...]) -> None:
        pixels, depth = self.project(np.asarray(corners, dtype=float))
        if depth.min() > 0.02:
            self.draw.polygon([tuple(p) for p in pixels], fill=color)

    def floor(self, x: tuple[float, float], z: tuple[float, float], color: tuple[int, ...], tiles: int = 12) -> None:
        """A rectangle of the plane y = 0, in tiles, so that the part in front of the camera stays when the rest
        is behind it."""
        xs, zs = np.linspace(*x, tiles + 1), np.linspace(*z, tiles + 1)
        for i in range(tiles):
            for j in range(tiles):
                self.face(
                    [(xs[i], 0, zs[j]), (xs[i + 1], 0, zs[j]), (xs[i + 1], 0, zs[j + 1]), (xs[i], 0, zs[j + 1])], color
                )

    def box(self, centre: np.ndarray, half: Sequence[float], color: tuple[int, int, int]) -> None:
        x, y, z = centre
        hx, hy, hz = half
        shade = [tuple(int(c * k) for c in color) for k in (0.75, 1.0, 0.9)]
        self.face(
            [(x - hx, y + hy, z - hz), (x + hx, y + hy, z - hz), (x + hx, y - hy, z - hz), (x - hx, y - hy, z - hz)],
            shade[0],
        )
        self.face(
            [(x - hx, y - hy, z - hz), (x + hx, y - hy, z - hz), (x + hx, y - hy, z + hz), (x - hx, y - hy, z + hz)],
            shade[1],
        )
        side = x - hx if x > self.camera_x else x + hx  # the side that faces the camera
        self.face(
            [(side, y + hy, z - hz), (side, y + hy, z + hz), (side, y - hy, z + hz), (side, y - hy, z - hz)], shade[2]
        )


def look_at(position: Sequence[float], target: Sequence[float]) -> np.ndarray:
    """A camera-to-world pose at `position` looking at `target`, image up towards world -y (OpenCV axes)."""
    position = np.asarray(position, dtype=float)
    forward = (np.asarray(target) - position) / np.linalg.norm(np.asarray(target) - position)
    right = np.cross([0.0, 1.0, 0.0], forward)
    right /= np.linalg.norm(right)
    return pose(np.stack([right, np.cross(forward, right), forward], axis=1), position)


def eased(waypoints: Sequence[tuple[int, Sequence[float], float]]) -> tuple[np.ndarray, np.ndarray]:
    """Positions (T + 1, 3) and gripper values (T + 1,) at each frame, eased between (frame, position, gripper)
    waypoints."""
    points, grip = [], []
    for (f0, p0, g0), (f1, p1, g1) in zip(waypoints, waypoints[1:], strict=False):
        for f in range(f0, f1):
            t = (f - f0) / (f1 - f0)
            t = t * t * (3 - 2 * t)
            points.append(np.add(p0, np.subtract(p1, p0) * t))
            grip.append(g0 + (g1 - g0) * t)
    points.append(np.array(waypoints[-1][1], dtype=float))
    grip.append(waypoints[-1][2])
    return np.array(points), np.array(grip)


# --- The DROID arm, from three cameras ----------------------------------------------------------------------------
ARM_FPS, WRIST_SIZE = 15, (640, 360)  # DROID's cameras record 640x360; the stack is 640x540
TABLE, FLOOR, BLOCK, TRAY, METAL = (176, 134, 92), (60, 60, 66), (200, 40, 36), (40, 90, 190), (150, 154, 160)
BLOCK_AT, BLOCK_HALF, TRAY_AT = np.array([0.10, 0.0, 0.35]), 0.025, np.array([-0.12, 0.0, 0.44])
# Where the fingertips go (x right, y down, z away from the robot; the table top is y = 0), and the gripper (0 open,
# 1 closed): reach, grasp, lift, carry to the tray, lower, release, rise. 80 steps: five chunks of 16. Eased steps
# stay within DROID's 99th percentile of motion per frame (about 1 cm), so normalising clips nothing.
WAYPOINTS = [(0, (-0.02, -0.22, 0.30), 0.0), (16, (0.10, -0.12, 0.35), 0.0), (28, (0.10, -0.035, 0.35), 0.0)]
WAYPOINTS += [(32, (0.10, -0.035, 0.35), 1.0), (48, (-0.02, -0.14, 0.40), 1.0), (64, (-0.12, -0.10, 0.44), 1.0)]
WAYPOINTS += [(72, (-0.12, -0.045, 0.44), 1.0), (76, (-0.12, -0.045, 0.44), 0.0), (80, (-0.12, -0.07, 0.44), 0.0)]
GRASPED, RELEASED = 32, 76
# Two exterior cameras on opposite sides of the table, and one on the wrist looking down past the fingers.
EXTERIOR_CAMERAS = (look_at((-0.55, -0.5, 0.02), (0.0, -0.02, 0.40)), look_at((0.55, -0.5, 0.02), (0.0, -0.02, 0.40)))
WRIST_OFFSET, WRIST_TARGET = np.array([0.0, -0.17, -0.11]), np.array([0.0, 0.0, 0.12])


def draw_arm_view(
    camera: np.ndarray, size: tuple[int, int], tip: np.ndarray, closure: float, frame: int, wrist: bool = False
) -> np.ndarray:
    w, h = size[0] * SUPERSAMPLE, size[1] * SUPERSAMPLE
    focal = 0.75 * w
    paint = Painter(camera, focal, (w, h), FLOOR)
    paint.floor((-0.45, 0.45), (0.0, 0.8), TABLE)
    for k in range(1, 8):  # wood grain
        z = 0.1 * k
        (a, b), depth = paint.project(np.array([(-0.45, 0, z), (0.45, 0, z)]))
        if depth.min() > 0.02:
            paint.draw.line([tuple(a), tuple(b)], fill=(160, 120, 82), width=2)
    paint.face(
        [
            (TRAY_AT[0] - 0.09, 0, TRAY_AT[2] - 0.07),
            (TRAY_AT[0] + 0.09, 0, TRAY_AT[2] - 0.07),
            (TRAY_AT[0] + 0.09, 0, TRAY_AT[2] + 0.07),
            (TRAY_AT[0] - 0.09, 0, TRAY_AT[2] + 0.07),
        ],
        TRAY,
    )
    shadow, depth = paint.project(np.array([tip[0], 0.0, tip[2]])[None])
    if depth[0] > 0.02:
        r = 0.03 * focal / depth[0] * 1.2
        paint.draw.ellipse(
            [shadow[0][0] - r, shadow[0][1] - r / 2, shadow[0][0] + r, shadow[0][1] + r / 2], fill=(120, 90, 62)
        )
    if frame < GRASPED:
        block = BLOCK_AT - [0, BLOCK_HALF, 0]
    elif frame < RELEASED:
        block = tip + [0, BLOCK_HALF - 0.01, 0]
    else:
        block = np.array([WAYPOINTS[-2][1][0], -BLOCK_HALF, WAYPOINTS[-2][1][2]])
    paint.box(block, (BLOCK_HALF,) * 3, BLOCK)
    opening = 0.045 * (1 - closure) + BLOCK_HALF * closure + 0.006
    if not wrist:  # the wrist camera sits on the palm: it sees the fingers, not the palm or the forearm
        paint.box(tip - [0, 0.45, 0], (0.03, 0.31, 0.03), (210, 210, 214))  # the forearm, from above
        paint.box(tip - [0, 0.12, 0], (0.05, 0.02, 0.03), METAL)  # the palm
    for side in (-1, 1):
        paint.box(tip + [side * opening, -0.05, 0], (0.006, 0.05, 0.015), (90, 92, 98))
    return finish(paint.image, size)


def draw_arm_frame(tip: np.ndarray, closure: float, frame: int) -> np.ndarray:
    """NVIDIA's DROID stack: the wrist camera on top (640x360), the two exterior cameras halved below it, side by
    side (320x180 each): 640x540."""
    wrist = draw_arm_view(look_at(tip + WRIST_OFFSET, tip + WRIST_TARGET), WRIST_SIZE, tip, closure, frame, True)
    half = (WRIST_SIZE[0] // 2, WRIST_SIZE[1] // 2)
    left, right = (draw_arm_view(c, half, tip, closure, frame) for c in EXTERIOR_CAMERAS)
    return np.concatenate([wrist, np.concatenate([left, right], axis=1)], axis=0)


# --- The UMI gripper ----------------------------------------------------------------------------------------------
UMI_SIZE, UMI_FPS = (256, 256), 20
DESK, CUP, BOOK, PAD = (196, 190, 178), (60, 150, 80), (190, 160, 60), (50, 52, 58)
CUP_AT = np.array([0.0, -0.04, 0.42])
# The camera rides on the hand-held gripper (UMI's GoPro): it moves towards the green cup, closes on it and lifts
# it, 32 steps at 20 fps (two chunks of 16). Positions in metres (the desk top is y = 0); the gripper column is the
# fingers' opening in metres, as UMI records it.
UMI_WAYPOINTS = [(0, (0.06, -0.26, 0.02), 0.085), (18, (0.0, -0.14, 0.26), 0.085), (24, (0.0, -0.14, 0.26), 0.05)]
UMI_WAYPOINTS += [(32, (0.0, -0.22, 0.20), 0.05)]
UMI_PITCH = 0.45  # the camera looks down at the desk


def umi_camera(position: np.ndarray) -> np.ndarray:
    c, s = math.cos(UMI_PITCH), math.sin(UMI_PITCH)
    pitch = np.array([[1.0, 0.0, 0.0], [0.0, c, s], [0.0, -s, c]])  # forward tips down towards +y
    return pose(pitch, position)


def draw_umi_frame(position: np.ndarray, opening: float, frame: int) -> np.ndarray:
    w, h = UMI_SIZE[0] * SUPERSAMPLE, UMI_SIZE[1] * SUPERSAMPLE
    camera = umi_camera(position)
    paint = Painter(camera, 0.6 * w, (w, h), (120, 128, 140))
    paint.floor((-0.6, 0.6), (-0.3, 1.2), DESK)
    paint.face([(-0.25, 0, 0.55), (-0.08, 0, 0.55), (-0.08, 0, 0.75), (-0.25, 0, 0.75)], PAD)
    paint.box(np.array([0.2, -0.02, 0.6]), (0.08, 0.02, 0.11), BOOK)
    held = frame >= UMI_WAYPOINTS[2][0]
    cup = position + camera[:3, :3] @ [0.0, 0.1, 0.16] if held else CUP_AT
    paint.box(cup, (0.03, 0.04, 0.03), CUP)
    finger = camera[:3, :3]  # the fingers are fixed in the camera's frame, at the bottom of the picture
    for side in (-1, 1):
        tip = position + finger @ [side * (opening / 2 + 0.008), 0.1, 0.16]
        paint.box(tip, (0.008, 0.03, 0.03), (70, 72, 78))
    return finish(paint.image, UMI_SIZE)


# --- Three drives from one start frame ----------------------------------------------------------------------------
def steering_poses(turn_rate: float) -> np.ndarray:
    """The car's 61 poses at 8 m/s when it turns at `turn_rate` rad/s (positive: left) after driving straight for
    1 s, easing into the turn over the next second."""
    dt, poses, position, angle = 1 / AV_FPS / 8, [], np.zeros(3), 0.0
    for step in range(AV_STEPS * 8 + 1):
        t = step * dt
        if step % 8 == 0:
            poses.append(pose(rotation_y(-angle), position.copy()))
        rate = 0.0 if t < 1 else turn_rate * min(t - 1, 1.0)
        angle += rate * dt
        position += np.array([-math.sin(angle), 0.0, math.cos(angle)]) * AV_SPEED * dt
    return np.stack(poses)


STEERING = {"straight": 0.0, "left": 0.2, "right": -0.2}


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
    for name, rate in STEERING.items():
        actions.write(
            ASSETS / "trajectories" / f"av_{name}",
            trajectories.deltas_from_poses(steering_poses(rate), translation_scale=1.35),
            {
                "domain_name": "av",
                "units": "translation: metres x 1.35 (NVIDIA's AV scale); rotation: 6-D (first two matrix columns)",
                "convention": "each row is the camera's motion from one frame to the next, in the earlier frame's "
                "OpenCV axes (x right, y down, z forward)",
                "scene": f"from av_drive_start.png: 8 m/s, then {name}"
                + ("" if not rate else f" at {abs(rate)} rad/s after 1 s"),
                "fps": AV_FPS,
                "provenance": "computed by scripts/make_action_assets.py; the project's own, Apache-2.0",
            },
        )
    tips, closure = eased(WAYPOINTS)
    tip_poses = np.stack([pose(np.eye(3), p) for p in tips])
    write_scene(
        "droid_pick",
        [draw_arm_frame(tip, c, f) for f, (tip, c) in enumerate(zip(tips, closure, strict=True))],
        ARM_FPS,
        np.concatenate([trajectories.deltas_from_poses(tip_poses), closure[1:, None]], axis=1),
        {
            "domain_name": "droid_lerobot",
            "units": "translation: metres; rotation: 6-D (first two matrix columns); gripper: 0 open to 1 closed; "
            "not yet normalised (DROID's quantile normalisation is applied before a call)",
            "convention": "each row is the fingertips' motion from one frame to the next, in the earlier pose's "
            "axes (x right, y down, z away from the robot), then the gripper's closure at the later frame",
            "views": "640x540: the wrist camera on top (640x360), the left and right exterior cameras below it "
            "(320x180 each), as NVIDIA stacks DROID's three cameras",
            "scene": "a gripper grasps a red block, carries it to a blue tray and lets it go",
        },
    )
    positions, opening = eased(UMI_WAYPOINTS)
    cameras = np.stack([umi_camera(p) for p in positions])
    write_scene(
        "umi_cup",
        [draw_umi_frame(p, g, f) for f, (p, g) in enumerate(zip(positions, opening, strict=True))],
        UMI_FPS,
        np.concatenate([trajectories.deltas_from_poses(cameras), opening[1:, None]], axis=1),
        {
            "domain_name": "umi",
            "units": "translation: metres; rotation: 6-D (first two matrix columns); gripper: the fingers' opening "
            "in metres; not yet normalised (UMI's quantile normalisation is applied before a call)",
            "convention": "each row is the gripper camera's motion from one frame to the next, in the earlier "
            "frame's OpenCV axes (x right, y down, z forward), then the opening at the later frame",
            "scene": "a hand-held gripper, its camera looking down past the fingers, takes a green cup off a desk",
        },
    )
    print(f"wrote the action assets under {ASSETS}")


if __name__ == "__main__":
    main()
