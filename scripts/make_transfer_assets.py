"""Render the source clip and the depth and segmentation controls of the transfer cookbook.

One street is ray-cast with numpy from known geometry, so every pixel of the clip comes with its exact depth and
the object it shows: a two-lane road with parking strips that bends gently left, raised sidewalks, buildings with
windows, parked and moving cars, street lights, trees and sky, seen from a car that drives 6 m/s in the right lane.
All three videos are 832x480, 121 frames at 30 fps:

* ``videos/street.mp4``: the source clip (rendered at twice the size, then Lanczos down);
* ``controls/street_depth.mp4``: inverse depth, normalised over the whole clip: white at its nearest depth, falling
  towards black far away; the sky is black;
* ``controls/street_seg.mp4`` + ``street_seg.json``: one flat colour per class and one per car, and the palette.

The controls take one ray through each pixel's centre, so depth and classes never blend between objects.

    python scripts/make_transfer_assets.py

Also writes the first frame of each as ``images/street_start.png``, ``street_depth_start.png`` and
``street_seg_start.png`` under ``cookbooks/cosmos3/generator/transfer/assets/``. The only randomness is drawn from
fixed seeds (building sizes and colours, the noise of asphalt and walls); no network: the same bytes every run.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
from make_action_assets import Project, finish, pose, projector, rotation_y
from make_conditioning_assets import fbm, write_mp4  # fbm: seeded value noise; write_mp4: byte-exact H.264
from PIL import Image

ASSETS = Path(__file__).resolve().parents[1] / "cookbooks" / "cosmos3" / "generator" / "transfer" / "assets"
SIZE, FPS, FRAMES = (832, 480), 30, 121  # the tier-480 16:9 canvas; NVIDIA's transfer clips' length and rate
SUPERSAMPLE = 2  # rays per pixel side for the source clip; the controls take one
FOCAL, CENTRE = 0.6 * SIZE[0], (SIZE[0] / 2, 0.44 * SIZE[1])  # 79 degrees across; the horizon above the middle

# The street, in metres. World axes are OpenCV's (x right, y down, z forward) with the camera at the origin at the
# first frame; the road surface is the plane y = HEIGHT. "s" is the distance along the centre line, "offset" the
# distance to its right.
HEIGHT, SPEED = 1.4, 6.0  # the camera above the road, and its speed
RADIUS = 150.0  # of the centre line: the road bends left all along, 9 degrees over the clip
LANE, PARKING, WALK, STEP = 3.5, 2.4, 3.2, 0.15  # lane and parking strip widths, sidewalk width, curb height
ROAD = LANE + PARKING  # the curbs' offset
FRONT = ROAD + WALK  # the building fronts'
BEND = np.array([-(RADIUS + LANE / 2), 0.0])  # the centre of the bend (x, z): the camera drives the right lane
ZEBRA = 42.0  # where a pedestrian crossing starts
SUN = np.array([0.45, -0.75, -0.48], np.float32)
SUN /= np.linalg.norm(SUN)  # towards the sun: high, to the right, behind the camera
AMBIENT, DIFFUSE, HAZE = 0.56, 0.55, 350.0  # light; HAZE: metres over which colours fade 63% into the horizon's
HORIZON_SKY, ZENITH_SKY = np.array([0.84, 0.88, 0.92], np.float32), np.array([0.36, 0.55, 0.82], np.float32)

# One flat colour per class, Cityscapes' where Cityscapes has the class, and one per car: the cars are instances, as
# segmentation controls made with SAM-like models colour each object on its own (car 1 keeps Cityscapes' car colour;
# the others are in no Cityscapes class).
PALETTE: dict[str, tuple[int, int, int]] = {
    "sky": (70, 130, 180),
    "road": (128, 64, 128),
    "lane marking": (255, 255, 255),
    "sidewalk": (244, 35, 232),
    "building": (70, 70, 70),
    "pole": (153, 153, 153),
    "vegetation": (107, 142, 35),
    "car 1": (0, 0, 142),
    "car 2": (30, 90, 255),
    "car 3": (0, 200, 200),
    "car 4": (255, 80, 0),
    "car 5": (200, 0, 140),
    "car 6": (255, 200, 0),
    "car 7": (140, 0, 0),
    "car 8": (0, 210, 80),
}
LABELS = list(PALETTE)
# Each car: where it is along the road at the first frame, its offset (+ right of the centre line), its speed
# along the road and its paint: brighter or darker than the asphalt, so that their outlines show in an edge map.
# Cars left of the centre line face the other way.
CARS = [
    (14.0, LANE / 2, 6.6, (90, 140, 220)),  # ahead in our lane, drawing slowly away
    (48.0, -LANE / 2, -8.0, (200, 200, 205)),  # oncoming: passes us after 3.4 s
    (80.0, -LANE / 2, -8.0, (30, 30, 34)),
    (7.0, LANE + 1.2, 0.0, (200, 40, 36)),  # parked along the right curb
    (15.5, LANE + 1.2, 0.0, (225, 225, 220)),
    (30.0, LANE + 1.2, 0.0, (70, 140, 80)),
    (11.0, -LANE - 1.2, 0.0, (220, 180, 40)),  # parked along the left curb
    (24.0, -LANE - 1.2, 0.0, (120, 120, 132)),
]
NOISE = fbm(512, 512, 32.0, 4, np.random.default_rng(11))  # 0..1, sampled at 16 px per metre
Paint = Callable[[np.ndarray, np.ndarray], np.ndarray]  # hit points and normals in an object's axes -> albedo


# --- Geometry -------------------------------------------------------------------------------------------------------
def on_road(s: float, offset: float, up: float = 0.0) -> np.ndarray:
    """The world point `s` metres along the centre line, `offset` metres to its right, `up` metres above the road."""
    angle = s / RADIUS
    return np.array(
        [BEND[0] + (RADIUS + offset) * math.cos(angle), HEIGHT - up, BEND[1] + (RADIUS + offset) * math.sin(angle)]
    )


def along(s: float) -> np.ndarray:
    """Axes that follow the road at `s`: x across it to the right, y down, z along it."""
    return rotation_y(-s / RADIUS)


def camera_at(frame: int) -> np.ndarray:
    s = SPEED * frame / FPS * RADIUS / (RADIUS + LANE / 2)  # 6 m/s in the lane, not on the centre line
    return pose(along(s), on_road(s, LANE / 2, HEIGHT))


def texture(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The noise at (u, v) metres, bilinear and mirrored at the edges of its 32 m tile, so it has no seams."""
    size = NOISE.shape[0]
    u, v = np.abs((u * 16) % (2 * size - 2) - (size - 1)), np.abs((v * 16) % (2 * size - 2) - (size - 1))
    i, j = np.minimum(u.astype(np.int32), size - 2), np.minimum(v.astype(np.int32), size - 2)
    fu, fv, at = u - i, v - j, j * size + i
    a, b, c, d = (np.take(NOISE, at + step) for step in (0, 1, size, size + 1))  # NOISE is C-contiguous
    top = a + (b - a) * fu
    return top + (c + (d - c) * fu - top) * fv


@dataclass(frozen=True)
class Box:
    """A box turned about the vertical axis; its own axes are x across, y down, z along."""

    centre: np.ndarray
    half: np.ndarray
    turn: np.ndarray  # its axes in world coordinates (columns)
    label: str
    paint: Paint

    def corners(self) -> np.ndarray:
        signs = np.array([[(i >> b & 1) * 2 - 1 for b in range(3)] for i in range(8)])
        return self.centre + (signs * self.half) @ self.turn.T

    def intersect(self, origin: np.ndarray, dirs: np.ndarray) -> np.ndarray:
        """Ray parameters, inf where the rays (..., 3) miss (slabs, one axis at a time)."""
        o = (origin - self.centre) @ self.turn
        t_in = np.zeros(dirs.shape[:-1], np.float32)  # the camera is never inside a box
        t_out = np.full(dirs.shape[:-1], np.inf, np.float32)
        with np.errstate(divide="ignore", invalid="ignore"):
            for axis in range(3):
                a, b, c = (float(v) for v in self.turn[:, axis])
                inverse = 1 / (dirs[..., 0] * a + dirs[..., 1] * b + dirs[..., 2] * c)
                t0 = (float(-self.half[axis] - o[axis])) * inverse
                t1 = (float(self.half[axis] - o[axis])) * inverse
                t_in = np.maximum(t_in, np.minimum(t0, t1))
                t_out = np.minimum(t_out, np.maximum(t0, t1))
        return np.where(t_in < t_out, t_in, np.inf)

    def surface(self, origin: np.ndarray, dirs: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Hit points and face normals, in the box's axes, of rays (N, 3) that hit it at `t`."""
        o = ((origin - self.centre) @ self.turn).astype(np.float32)
        local = o + t[:, None] * (dirs @ self.turn.astype(np.float32))
        axis = np.abs(local / self.half.astype(np.float32)).argmax(axis=1)
        rows = np.arange(len(local))
        normal = np.zeros_like(local)
        normal[rows, axis] = np.sign(local[rows, axis])
        return local, normal


@dataclass(frozen=True)
class Ball:
    centre: np.ndarray
    radius: float
    label: str
    paint: Paint
    turn: np.ndarray = field(default_factory=lambda: np.eye(3))

    def corners(self) -> np.ndarray:
        signs = np.array([[(i >> b & 1) * 2 - 1 for b in range(3)] for i in range(8)])
        return self.centre + signs * self.radius

    def intersect(self, origin: np.ndarray, dirs: np.ndarray) -> np.ndarray:
        ox, oy, oz = (float(v) for v in origin - self.centre)
        a = dirs[..., 0] ** 2 + dirs[..., 1] ** 2 + dirs[..., 2] ** 2
        b = 2 * (dirs[..., 0] * ox + dirs[..., 1] * oy + dirs[..., 2] * oz)
        disc = b * b - 4 * a * (ox * ox + oy * oy + oz * oz - self.radius**2)
        t = (-b - np.sqrt(np.maximum(disc, 0))) / (2 * a)
        return np.where((disc >= 0) & (t > 0), t, np.inf)

    def surface(self, origin: np.ndarray, dirs: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        local = (origin - self.centre).astype(np.float32) + t[:, None] * dirs
        return local, local / self.radius


Thing = Box | Ball


# --- Paints ---------------------------------------------------------------------------------------------------------
def rgb(color: Sequence[int]) -> np.ndarray:
    return np.asarray(color, dtype=np.float32) / 255


def glass(height: np.ndarray, low: float, high: float) -> np.ndarray:
    """Window glass that mirrors the sky: lighter towards its top."""
    t = np.clip((height - low) / (high - low), 0, 1)[:, None]
    return rgb((36, 44, 58)) * (1 - t) + rgb((118, 136, 162)) * t


def facade(color: Sequence[int], pane: float, pitch: float, half: np.ndarray) -> Paint:
    """A wall with shop windows on the ground floor and rows of windows above, on every side of a building."""
    wall, top = rgb(color), float(2 * half[1])

    def paint(p: np.ndarray, n: np.ndarray) -> np.ndarray:
        u = np.where(np.abs(n[:, 0]) > 0.5, p[:, 2], p[:, 0])  # along the face
        v = float(half[1]) - p[:, 1]  # above the road
        tone = (0.9 + 0.2 * texture(u + float(3 * half[2]), v)) * np.where(v < 3.9, 0.72, 1)  # ground floor: stone
        out = wall * (tone * np.where(v > top - 0.6, 0.8, 1))[:, None]  # the cornice darker
        cell = np.abs((u + pitch / 2) % pitch - pitch / 2)  # from the nearest window's centre line
        floor = (v - 3.9) % 3.2
        storeys = (v > 3.9) & (v < top - 1.2)
        frame = storeys & (cell < pane / 2 + 0.08) & (floor > 0.82) & (floor < 2.48)  # white frames and sills
        frame |= storeys & (cell < pane / 2 + 0.15) & (floor > 0.72) & (floor <= 0.82)
        upper = storeys & (cell < pane / 2) & (floor > 0.9) & (floor < 2.4)
        shop = (v > 0.4) & (v < 3.1) & (cell < pitch / 2 - 0.35)
        out[frame] = rgb((226, 222, 214))
        out[upper] = glass(floor[upper], 0.9, 2.4)
        out[shop] = glass(v[shop], 0.4, 3.1) * 0.8
        out[n[:, 1] < -0.5] = rgb((92, 90, 88))  # the roof
        return out

    return paint


def body(color: Sequence[int], half: Sequence[float]) -> Paint:
    """A car's lower body: head and tail lights, number plate and bumpers."""
    paint_rgb = rgb(color)

    def paint(p: np.ndarray, n: np.ndarray) -> np.ndarray:
        x, v = np.abs(p[:, 0]), half[1] - p[:, 1]
        out = np.broadcast_to(paint_rgb, p.shape).copy()
        out = np.where(((np.abs(n[:, 0]) > 0.5) & (np.abs(v - 0.45) < 0.02))[:, None], paint_rgb * 0.7, out)
        front, back = n[:, 2] > 0.5, n[:, 2] < -0.5
        lights = (x > 0.5) & (x < 0.82) & (v > 0.42) & (v < 0.58)
        out = np.where((front & lights)[:, None], rgb((236, 236, 222)), out)
        out = np.where((front & (x < 0.4) & (v > 0.3) & (v < 0.5))[:, None], rgb((34, 34, 36)), out)
        out = np.where((back & lights)[:, None], rgb((190, 24, 24)), out)
        out = np.where((back & (x < 0.26) & (v > 0.22) & (v < 0.38))[:, None], rgb((230, 230, 220)), out)
        return np.where((v < 0.14)[:, None] & (np.abs(n[:, 1]) < 0.5)[:, None], rgb((44, 44, 46)), out)

    return paint


def cabin(color: Sequence[int], half: Sequence[float]) -> Paint:
    """A car's cabin: windows all round between pillars, a roof in the body's colour."""
    paint_rgb = rgb(color)

    def paint(p: np.ndarray, n: np.ndarray) -> np.ndarray:
        side = np.abs(n[:, 0]) > 0.5
        u = np.where(side, p[:, 2], p[:, 0])
        edge = np.where(side, half[2], half[0])
        v = half[1] - p[:, 1]
        pane = (np.abs(n[:, 1]) < 0.5) & (v > 0.06) & (v < 2 * half[1] - 0.07) & (np.abs(u) < edge - 0.1)
        pane &= ~(side & (np.abs(p[:, 2] + 0.1) < 0.06))  # the middle pillar
        return np.where(pane[:, None], glass(v, 0.06, 2 * half[1]) * 0.7, paint_rgb)

    return paint


def wheel(p: np.ndarray, n: np.ndarray) -> np.ndarray:
    hub = (np.abs(n[:, 0]) > 0.5) & (np.hypot(p[:, 1], p[:, 2]) < 0.19)
    return np.where(hub[:, None], rgb((150, 150, 156)), rgb((30, 30, 32)))


def flat(color: Sequence[int]) -> Paint:
    return lambda p, n: np.broadcast_to(rgb(color), p.shape)


def lamp(p: np.ndarray, n: np.ndarray) -> np.ndarray:
    return np.where((n[:, 1] > 0.5)[:, None], rgb((252, 246, 222)), rgb((80, 86, 88)))


def leaves(p: np.ndarray, n: np.ndarray) -> np.ndarray:
    clumps = np.sin(7 * n[:, 0] + 1) * np.sin(7 * n[:, 1]) * np.sin(7 * n[:, 2] + 2)
    return rgb((64, 112, 46)) * (0.82 + 0.22 * clumps)[:, None]


# --- The scene ------------------------------------------------------------------------------------------------------
def road_box(s: float, offset: float, up: float, half: Sequence[float], label: str, paint: Paint) -> Box:
    """A box that follows the road at `s`; `up` is the height of its bottom above the road."""
    return Box(on_road(s, offset, up + half[1]), np.array(half), along(s), label, paint)


def car(s: float, offset: float, color: Sequence[int], label: str) -> list[Box]:
    """A car's body, cabin and four wheels, all under one label."""
    turn = along(s) if offset > 0 else along(s) @ rotation_y(math.pi)
    parts = []
    for shift, up, half, paint in (
        ((0.0, 0.0), 0.3, (0.9, 0.36, 2.2), body),
        ((0.0, -0.2), 1.02, (0.78, 0.27, 1.2), cabin),
    ):
        centre = on_road(s, offset, up + half[1]) + turn @ [shift[0], 0, shift[1]]
        parts.append(Box(centre, np.array(half), turn, label, paint(color, half)))
    for x in (-0.8, 0.8):
        for z in (-1.35, 1.35):
            centre = on_road(s, offset, 0.33) + turn @ [x, 0, z]
            parts.append(Box(centre, np.array([0.12, 0.33, 0.33]), turn, label, wheel))
    return parts


def buildings(side: int, rng: np.random.Generator) -> list[Box]:
    """A row of buildings whose fronts stand on the curve side by side, their front corners shared, with alleys."""
    colors = [(196, 178, 150), (168, 108, 88), (206, 200, 188), (150, 160, 172), (184, 152, 112), (128, 92, 82)]
    front = RADIUS + side * FRONT
    out, s = [], -30.0
    while s < 160:
        width, height, deep = rng.uniform(10, 20), rng.uniform(9, 24), 14.0
        a, b = s / RADIUS, (s + width) / RADIUS
        corner_a, corner_b = (BEND + front * np.array([math.cos(t), math.sin(t)]) for t in (a, b))
        length = float(np.linalg.norm(corner_b - corner_a))
        middle = (corner_a + corner_b) / 2
        turn = rotation_y(-(a + b) / 2)
        away = turn[[0, 2], 0] * side  # from the road into the building
        # From the road up, under the sidewalk, to `height` above the sidewalk.
        centre = np.array(
            [middle[0] + away[0] * deep / 2, HEIGHT - (STEP + height) / 2, middle[1] + away[1] * deep / 2]
        )
        half = np.array([deep / 2, (STEP + height) / 2, length / 2])
        color = colors[int(rng.integers(len(colors)))]
        out.append(
            Box(centre, half, turn, "building", facade(color, rng.uniform(1.0, 1.6), rng.uniform(2.4, 3.2), half))
        )
        s += width + (3.0 if rng.random() < 0.3 else 0.0)
    return out


@cache
def scenery() -> list[Thing]:
    """Everything that does not move: buildings, trees and street lights."""
    rng = np.random.default_rng(5)
    things: list[Thing] = [*buildings(1, rng), *buildings(-1, rng)]
    for side, trees, lights in (
        (1, np.arange(4, 100, 15), np.arange(11.5, 100, 30)),
        (-1, np.arange(12, 100, 15), np.arange(19.5, 100, 30)),
    ):
        offset = side * (ROAD + 1.2)
        for s in trees:
            things.append(road_box(s, offset, STEP, (0.15, 1.6, 0.15), "vegetation", flat((92, 70, 52))))
            things.append(Ball(on_road(s, offset, STEP + 4.7), 2.0, "vegetation", leaves))
        for s in lights:
            things.append(road_box(s, side * (ROAD + 0.4), STEP, (0.08, 3.6, 0.08), "pole", flat((80, 86, 88))))
            things.append(road_box(s, side * (ROAD - 0.5), STEP + 7.0, (0.9, 0.05, 0.05), "pole", flat((80, 86, 88))))
            things.append(road_box(s, side * (ROAD - 1.3), STEP + 6.9, (0.3, 0.06, 0.14), "pole", lamp))
    return things


def traffic(frame: int) -> list[list[Box]]:
    """Each car's boxes at `frame`, its body first."""
    t = frame / FPS
    return [car(s + speed * t, offset, color, f"car {i + 1}") for i, (s, offset, speed, color) in enumerate(CARS)]


# --- Rendering ------------------------------------------------------------------------------------------------------
@cache
def rays(k: int) -> np.ndarray:
    """Directions through the centres of a k-times finer pixel grid, in the camera's axes, with z = 1."""
    u = ((np.arange(SIZE[0] * k, dtype=np.float32) + 0.5) / k - CENTRE[0]) / FOCAL
    v = ((np.arange(SIZE[1] * k, dtype=np.float32) + 0.5) / k - CENTRE[1]) / FOCAL
    uu, vv = np.meshgrid(u, v)
    return np.stack([uu, vv, np.ones_like(uu)], axis=-1)


def window(thing: Thing, project: Project, k: int) -> tuple[slice, slice] | None:
    """The rows and columns of the k-times grid that `thing` can cover: its corners and where its edges cross the
    near plane, projected."""
    corners = thing.corners()
    _, z = project(corners)
    if z.max() < 0.1 or z.min() > 200:
        return None
    points = [corners[z >= 0.1]]
    for i in range(8):
        for bit in (1, 2, 4):
            j = i | bit
            if j != i and (z[i] < 0.1) != (z[j] < 0.1):
                points.append(corners[i] + (corners[j] - corners[i]) * (0.1 - z[i]) / (z[j] - z[i]))
    pixels, _ = project(np.vstack(points))
    lo, hi = np.floor(pixels.min(axis=0) * k - 1), np.ceil(pixels.max(axis=0) * k + 1)
    c0, r0 = np.maximum(lo, 0).astype(int)
    c1, r1 = np.minimum(hi, [SIZE[0] * k, SIZE[1] * k]).astype(int)
    return (slice(r0, r1), slice(c0, c1)) if c1 > c0 and r1 > r0 else None


def light(normals: np.ndarray) -> np.ndarray:
    return (AMBIENT + DIFFUSE * np.clip(normals @ SUN, 0, None))[:, None]


def crossing(x: float, z: float, d: np.ndarray, radius: float, leaving: bool) -> np.ndarray:
    """Where rays (N, 3) from (x, z), relative to the bend's centre, cross the vertical cylinder of `radius`
    around it."""
    dx, dz = d[:, 0], d[:, 2]
    a, b = dx * dx + dz * dz, 2 * (x * dx + z * dz)
    root = np.sqrt(np.maximum(b * b - 4 * a * (x * x + z * z - radius**2), 0))
    return (-b + root if leaving else -b - root) / (2 * a)


def ground(origin: np.ndarray, d: np.ndarray, bodies: Sequence[Box], shade: bool) -> tuple[np.ndarray, ...]:
    """Ray parameters, labels and (when shading) colours where rays (N, 3) that point down meet the road, the
    curbs or the sidewalks."""
    ox, oz = float(origin[0] - BEND[0]), float(origin[2] - BEND[1])

    def where(t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        x, z = ox + t * d[:, 0], oz + t * d[:, 2]
        return x, z, np.hypot(x, z) - RADIUS

    t_walk, t_road = float(HEIGHT - STEP - origin[1]) / d[:, 1], float(HEIGHT - origin[1]) / d[:, 1]
    walk = np.abs(where(t_walk)[2]) > ROAD  # on top of a sidewalk
    below = where(t_road)[2]
    road = ~walk & (np.abs(below) <= ROAD)
    riser = ~walk & ~road  # the face of a curb
    t = np.where(walk, t_walk, t_road)
    rd, right = d[riser], below[riser] > 0  # the right curb's cylinder holds the camera, the left one's does not
    curb = np.where(right, crossing(ox, oz, rd, RADIUS + ROAD, True), crossing(ox, oz, rd, RADIUS - ROAD, False))
    t[riser] = np.clip(curb, t_walk[riser], t_road[riser])
    x, z, offset = where(t)
    s = RADIUS * np.arctan2(z, x)
    far = np.abs(offset)
    zebra = (s > ZEBRA) & (s < ZEBRA + 3.5) & (far < ROAD - 0.3) & ((offset + 0.25) % 1.0 < 0.5)
    dashes = (far < 0.06) & (s % 9 < 3)  # 3 m of paint, 6 m of gap
    edges = (np.abs(far - LANE) < 0.06) & ~((s > ZEBRA - 1) & (s < ZEBRA + 4.5))  # along the parking strips
    marking = road & (zebra | dashes | edges)
    label = np.where(marking, LABELS.index("lane marking"), LABELS.index("road"))
    label = np.where(road, label, LABELS.index("sidewalk")).astype(np.uint8)
    if not shade:
        return t, label
    grain = texture(s, offset)
    # Each surface's colour times its own brightness: asphalt, paint, paving slabs, curb stones.
    kind = np.where(road, marking.astype(np.int8), np.where(far < ROAD + 0.3, 3, 2))
    tracks = np.exp(-(((far - LANE / 2) ** 2 - 0.8**2) ** 2) / 0.3)  # darker where wheels run
    joints = np.minimum(s % 3.0, 3.0 - s % 3.0) < 0.03
    foot = 1 - 0.3 * np.clip(1 - (FRONT - far) / 0.8, 0, 1)  # shade at the foot of the walls
    tone = np.choose(
        kind,
        [
            0.86 + 0.26 * grain - 0.07 * tracks,
            0.9 + 0.1 * grain,
            (0.92 + 0.14 * grain - 0.12 * joints) * foot,
            0.95 + 0.1 * grain,
        ],
    )
    sun = -float(SUN[1])
    lit = np.full(len(t), AMBIENT + DIFFUSE * sun, np.float32)
    # A curb's face looks at the road: towards the bend's centre on the right, away from it on the left.
    xr, zr = x[riser], z[riser]
    facing = -np.sign(offset[riser]) * (xr * float(SUN[0]) + zr * float(SUN[2])) / np.hypot(xr, zr)
    lit[riser] = AMBIENT + DIFFUSE * np.clip(facing, 0, None)
    for box in bodies:  # contact shadows
        dx, dz = x - float(box.centre[0] - BEND[0]), z - float(box.centre[2] - BEND[1])
        near = np.abs(dx) + np.abs(dz) < 5
        dx, dz = dx[near], dz[near]
        across = np.abs(dx * float(box.turn[0, 0]) + dz * float(box.turn[2, 0])) - float(box.half[0])
        ahead = np.abs(dx * float(box.turn[0, 2]) + dz * float(box.turn[2, 2])) - float(box.half[2])
        gap = np.hypot(np.maximum(across, 0), np.maximum(ahead, 0))
        lit[near] *= 1 - 0.6 * np.clip(1 - gap / 0.5, 0, 1) ** 2
    surfaces = np.stack([rgb(c) for c in ((64, 64, 68), (226, 226, 218), (178, 172, 162), (204, 202, 196))])
    return t, label, surfaces[kind] * (tone * lit)[:, None]


def render(
    camera: np.ndarray, things: Sequence[Thing], bodies: Sequence[Box], k: int, shade: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Depth (camera z, inf for sky), labels and, when shading, colours (0..1) on a k-times grid."""
    dirs = rays(k) @ camera[:3, :3].T.astype(np.float32)
    origin = camera[:3, 3]
    h, w = dirs.shape[:2]
    depth = np.full((h, w), np.inf, np.float32)
    labels = np.zeros((h, w), np.uint8)
    colors = np.zeros((h, w, 3), np.float32)
    down = dirs[..., 1] > 1e-6
    depth[down], labels[down] = ground(origin, dirs[down], bodies, False)
    bare = down.copy()  # where the ground stays in view, to be shaded last
    project = projector(camera, FOCAL, CENTRE)
    # Nearest first, so that few pixels are shaded and then covered.
    for thing in sorted(things, key=lambda th: float(np.linalg.norm(th.centre - origin))):
        box = window(thing, project, k)
        if box is None:
            continue
        t = thing.intersect(origin, dirs[box])
        nearer = t < depth[box]
        if not nearer.any():
            continue
        depth[box][nearer] = t[nearer]
        labels[box][nearer] = LABELS.index(thing.label)
        bare[box][nearer] = False
        if shade:
            local, normal = thing.surface(origin, dirs[box][nearer], t[nearer])
            colors[box][nearer] = thing.paint(local, normal) * light(normal @ thing.turn.T.astype(np.float32))
    if not shade:
        return depth, labels, None
    colors[bare] = ground(origin, dirs[bare], bodies, True)[2]
    fade = np.exp(-depth / HAZE)[..., None]  # into the sky's haze
    colors *= fade
    colors += HORIZON_SKY * (1 - fade)
    sky = np.isinf(depth)
    rise = -dirs[sky][:, 1] / np.linalg.norm(dirs[sky], axis=1)
    colors[sky] = HORIZON_SKY + (ZENITH_SKY - HORIZON_SKY) * (np.clip(2.5 * rise, 0, 1) ** 0.7)[:, None]
    return depth, labels, colors


# --- Files ----------------------------------------------------------------------------------------------------------
def draw(frame: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The source frame, and the inverse depth (1/m) and the labels of its pixels' centres."""
    camera, cars = camera_at(frame), traffic(frame)
    things, bodies = [*scenery(), *(part for parts in cars for part in parts)], [parts[0] for parts in cars]
    colors = render(camera, things, bodies, SUPERSAMPLE, True)[2]
    depth, labels, _ = render(camera, things, bodies, 1, False)
    return finish(Image.fromarray(np.round(np.clip(colors, 0, 1) * 255).astype(np.uint8)), SIZE), 1 / depth, labels


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ASSETS, help="assets folder to write into")
    out: Path = parser.parse_args(argv).out
    with ProcessPoolExecutor() as pool:  # the frames are independent: the same bytes whatever the workers
        clip, inverse, labels = map(list, zip(*pool.map(draw, range(FRAMES), chunksize=4), strict=True))
    nearest = 1 / max(float(i.max()) for i in inverse)
    depths = [np.repeat(np.round(i * nearest * 255).astype(np.uint8)[..., None], 3, axis=-1) for i in inverse]
    segs = [np.array(list(PALETTE.values()), np.uint8)[label] for label in labels]
    for name, frames in (("videos/street", clip), ("controls/street_depth", depths), ("controls/street_seg", segs)):
        write_mp4(frames, out / f"{name}.mp4", FPS)
        (out / "images").mkdir(parents=True, exist_ok=True)
        Image.fromarray(frames[0]).save(out / "images" / f"{Path(name).name}_start.png", optimize=True)
    palette = {"#{:02x}{:02x}{:02x}".format(*color): name for name, color in PALETTE.items()}
    about = {
        "convention": "each pixel of controls/street_seg.mp4 is the flat colour of what its centre shows: one colour "
        "per class, and one per car (car N), as instance masks colour each object; H.264 moves colours a little, so "
        "read a decoded pixel as the nearest palette colour",
        "palette": palette,
        "provenance": "rendered by scripts/make_transfer_assets.py; the project's own, Apache-2.0",
    }
    (out / "controls" / "street_seg.json").write_text(json.dumps(about, indent=2) + "\n")
    print(f"nearest depth in the clip: {nearest:.3f} m (white in the depth control)")
    for path in sorted(out.glob("*/*.*")):
        print(f"{path.relative_to(out)}  {path.stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
