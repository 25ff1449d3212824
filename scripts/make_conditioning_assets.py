"""Render the conditioning image and video assets of the audiovisual cookbook.

Everything is drawn procedurally (gradients, polygons, value noise from fixed seeds), so the
assets carry no third-party licence and the script writes the same bytes on every run.

    python scripts/make_conditioning_assets.py

Writes, under ``cookbooks/cosmos3/generator/audiovisual/assets/``:

* ``images/harbor_crane_dusk.png``    1280x720, a container harbour with a gantry crane at dusk
* ``images/robot_arm_workbench.png``  1280x720, a robot arm above a red cube on a wooden bench
* ``videos/rolling_ball.mp4``         832x480, 24 fps, 33 frames, H.264 yuv420p: a ball rolling
  across a wooden floor towards a toy block

Only numpy, pillow and PyAV are used; there is no network access.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import av
import av.codec.context
import numpy as np
from PIL import Image, ImageDraw, ImageFilter

REPO_ROOT = Path(__file__).resolve().parents[1]
ASSETS_DIR = REPO_ROOT / "cookbooks" / "cosmos3" / "generator" / "audiovisual" / "assets"

IMAGE_SIZE = (1280, 720)
VIDEO_SIZE = (832, 480)
VIDEO_FPS = 24
VIDEO_FRAMES = 33
SUPERSAMPLE = 2  # images are drawn at twice the size, then downsampled (anti-aliasing)

Color = tuple[int, int, int]
FloatImage = np.ndarray  # float32, shape (H, W, 3), values 0..1


# --------------------------------------------------------------------------------------------
# Small numeric helpers
# --------------------------------------------------------------------------------------------
def rgb(color: Color) -> np.ndarray:
    return np.asarray(color, dtype=np.float32) / 255.0


def value_noise(height: int, width: int, cell: float, rng: np.random.Generator) -> np.ndarray:
    """Smooth noise in 0..1: a random grid with one value per ``cell`` pixels, bicubic-upsampled."""
    grid_h = max(2, int(math.ceil(height / cell)) + 2)
    grid_w = max(2, int(math.ceil(width / cell)) + 2)
    grid = rng.random((grid_h, grid_w), dtype=np.float32)
    big = Image.fromarray(grid, mode="F").resize((int(grid_w * cell), int(grid_h * cell)), Image.Resampling.BICUBIC)
    arr = np.asarray(big, dtype=np.float32)[:height, :width]
    return np.clip(arr, 0.0, 1.0)


def fbm(height: int, width: int, cell: float, octaves: int, rng: np.random.Generator) -> np.ndarray:
    """Fractal sum of value noise, normalised to 0..1."""
    total = np.zeros((height, width), dtype=np.float32)
    amplitude, norm = 1.0, 0.0
    for _ in range(octaves):
        total += amplitude * value_noise(height, width, max(cell, 2.0), rng)
        norm += amplitude
        amplitude *= 0.5
        cell /= 2.0
    return total / norm


def stretched_noise(height: int, width: int, cell_y: float, cell_x: float, rng: np.random.Generator) -> np.ndarray:
    """Anisotropic value noise (long streaks along x when ``cell_x`` > ``cell_y``)."""
    scale = cell_x / cell_y
    base = value_noise(height, max(2, int(width / scale) + 2), cell_y, rng)
    img = Image.fromarray(base, mode="F").resize((int(base.shape[1] * scale), height), Image.Resampling.BICUBIC)
    return np.clip(np.asarray(img, dtype=np.float32)[:, :width], 0.0, 1.0)


def vertical_gradient(height: int, width: int, stops: Sequence[tuple[float, Color]]) -> FloatImage:
    """Piecewise-linear colour gradient from top (0.0) to bottom (1.0)."""
    ys = np.linspace(0.0, 1.0, height, dtype=np.float32)
    positions = [p for p, _ in stops]
    channels = [np.interp(ys, positions, [c[i] / 255.0 for _, c in stops]) for i in range(3)]
    column = np.stack(channels, axis=-1).astype(np.float32)
    return np.repeat(column[:, None, :], width, axis=1)


def blend(base: FloatImage, color: np.ndarray | Color, alpha: np.ndarray | float) -> FloatImage:
    """Alpha-blend ``color`` (a colour or an image) over ``base``."""
    col = rgb(color) if isinstance(color, tuple) else color
    a = alpha[..., None] if isinstance(alpha, np.ndarray) and alpha.ndim == 2 else alpha
    return base * (1.0 - a) + col * a


def mask_from(draw_fn, size: tuple[int, int], blur: float = 0.0) -> np.ndarray:
    """Render a mask (0..1) with a PIL drawing callback ``draw_fn(ImageDraw)``."""
    layer = Image.new("L", size, 0)
    draw_fn(ImageDraw.Draw(layer))
    if blur > 0:
        layer = layer.filter(ImageFilter.GaussianBlur(blur))
    return np.asarray(layer, dtype=np.float32) / 255.0


def radial(height: int, width: int, cx: float, cy: float, radius: float, squash: float = 1.0) -> np.ndarray:
    """1 at (cx, cy), falling to 0 at ``radius`` (smooth), optionally squashed vertically."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    d = np.sqrt((xx - cx) ** 2 + ((yy - cy) / squash) ** 2) / radius
    return np.clip(1.0 - d, 0.0, 1.0) ** 2


def finish(img: FloatImage, size: tuple[int, int], grain: float, seed: int, vignette: float) -> Image.Image:
    """Downsample to ``size``, add a vignette and fine film grain, quantise to 8-bit RGB."""
    big = Image.fromarray((np.clip(img, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8), mode="RGB")
    small = np.asarray(big.resize(size, Image.Resampling.LANCZOS), dtype=np.float32) / 255.0
    h, w = small.shape[:2]
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    r = np.sqrt(((xx - w / 2) / (w / 2)) ** 2 + ((yy - h / 2) / (h / 2)) ** 2) / math.sqrt(2.0)
    small *= (1.0 - vignette * r**2)[..., None]
    rng = np.random.default_rng(seed)
    small += (rng.standard_normal((h, w, 1), dtype=np.float32) * grain).astype(np.float32)
    return Image.fromarray((np.clip(small, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8), mode="RGB")


# --------------------------------------------------------------------------------------------
# Image 1: container harbour with a gantry crane at dusk
# --------------------------------------------------------------------------------------------
def render_harbor(seed: int = 7) -> Image.Image:
    rng = np.random.default_rng(seed)
    W, H = IMAGE_SIZE[0] * SUPERSAMPLE, IMAGE_SIZE[1] * SUPERSAMPLE
    horizon = int(0.56 * H)
    quay_top = int(0.80 * H)
    sun_x, sun_y = 0.30 * W, horizon + 0.004 * H

    # Sky: deep indigo overhead, violet, then orange and pale gold at the horizon.
    img = vertical_gradient(
        H,
        W,
        [
            (0.0, (28, 30, 72)),
            (0.22, (70, 52, 110)),
            (0.40, (168, 84, 110)),
            (0.50, (238, 132, 78)),
            (0.56, (255, 188, 112)),
            (1.0, (255, 188, 112)),
        ],
    )
    glow = radial(H, W, sun_x, sun_y, 0.55 * W, squash=0.45)
    img = blend(img, (255, 170, 90), 0.55 * glow)
    img = blend(img, (255, 236, 190), 0.9 * radial(H, W, sun_x, sun_y, 0.05 * W))

    # Clouds: horizontal streaks, lit pink-orange from below, denser higher up.
    streaks = stretched_noise(H, W, 0.03 * H, 0.5 * W, rng)
    detail = fbm(H, W, 0.05 * H, 3, rng)
    cloud = np.clip((0.6 * streaks + 0.4 * detail - 0.55) * 4.0, 0.0, 1.0)
    ys = np.linspace(0.0, 1.0, H, dtype=np.float32)[:, None]
    cloud *= np.clip((0.50 - ys) / 0.12, 0.0, 1.0) * np.clip(ys / 0.08, 0.0, 1.0)
    lit = vertical_gradient(
        H, W, [(0.0, (92, 64, 120)), (0.3, (200, 104, 120)), (0.5, (255, 160, 110)), (1.0, (255, 160, 110))]
    )
    img = blend(img, lit, 0.75 * cloud)

    # Far hills and headland silhouette with a few shore lights.
    xs = np.arange(W, dtype=np.float32)
    ridge_noise = value_noise(1, W, 0.09 * W, rng)[0] * 0.6 + value_noise(1, W, 0.02 * W, rng)[0] * 0.4
    ridge = horizon - (0.012 * H + 0.055 * H * ridge_noise * np.clip((xs - 0.45 * W) / (0.4 * W), 0.15, 1.0))
    yy = np.arange(H, dtype=np.float32)[:, None]
    hill = ((yy >= ridge[None, :]) & (yy < horizon)).astype(np.float32)
    img = blend(img, (66, 48, 84), 0.95 * hill)
    for _ in range(60):
        lx = rng.uniform(0.5 * W, W)
        ly = rng.uniform(horizon - 0.012 * H, horizon - 0.002 * H)
        img = blend(img, (255, 214, 140), 0.8 * radial(H, W, lx, ly, rng.uniform(2.0, 5.0)))

    # Sea: darkened mirror of the sky, horizontal ripple texture, glitter path under the sun.
    sea_h = quay_top - horizon
    mirror = img[horizon - sea_h : horizon][::-1]  # the sky just above the horizon, flipped
    mirror = np.asarray(Image.fromarray((mirror * 255).astype(np.uint8)).resize((W, sea_h)), dtype=np.float32) / 255
    depth = np.linspace(0.0, 1.0, sea_h, dtype=np.float32)[:, None, None]
    water = mirror * (0.78 - 0.30 * depth) + rgb((20, 24, 48)) * (0.22 + 0.30 * depth)
    ripple = stretched_noise(sea_h, W, 0.009 * H, 0.12 * W, rng)
    water *= (0.85 + 0.3 * ripple)[..., None]
    path = np.exp(-(((np.arange(W, dtype=np.float32) - sun_x) / (0.05 * W + 0.25 * W * depth[..., 0])) ** 2))
    sparkle = np.clip((stretched_noise(sea_h, W, 0.003 * H, 0.03 * W, rng) - 0.6) * 4.0, 0.0, 1.0)
    water = blend(water, (255, 210, 140), np.clip(path * (0.25 + 0.9 * sparkle), 0.0, 1.0))
    img[horizon:quay_top] = water

    draw_layer = Image.fromarray((np.clip(img, 0, 1) * 255).astype(np.uint8), mode="RGB")
    d = ImageDraw.Draw(draw_layer)

    # Container ship moored along the quay (left half), hull and deck stacks in silhouette.
    hull_top, hull_bot = int(0.665 * H), int(0.785 * H)
    hull_x0, hull_x1 = int(0.02 * W), int(0.66 * W)
    d.polygon(
        [
            (hull_x0, hull_top),
            (hull_x1 + 0.03 * W, hull_top),
            (hull_x1, hull_bot),
            (hull_x0 + 0.02 * W, hull_bot),
        ],
        fill=(34, 30, 44),
    )
    d.rectangle([hull_x0 + 0.01 * W, hull_bot - 0.018 * H, hull_x1, hull_bot], fill=(92, 36, 36))
    d.rectangle([int(0.05 * W), int(0.585 * H), int(0.10 * W), hull_top], fill=(48, 44, 58))  # bridge
    for wx in range(int(0.055 * W), int(0.095 * W), int(0.008 * W)):
        d.rectangle([wx, int(0.595 * H), wx + int(0.004 * W), int(0.603 * H)], fill=(255, 206, 130))
    palette_dusk: list[Color] = [(118, 50, 44), (48, 70, 104), (46, 88, 74), (150, 96, 52), (90, 90, 98)]
    bay_w = int(0.034 * W)
    tier_h = int(0.021 * H)
    for x in range(int(0.12 * W), int(0.63 * W), bay_w):
        tiers = 2 + int(rng.integers(0, 3))
        for t in range(tiers):
            col = palette_dusk[int(rng.integers(0, len(palette_dusk)))]
            y1 = hull_top - t * tier_h
            d.rectangle([x + 2, y1 - tier_h + 2, x + bay_w - 2, y1], fill=col)
            top = tuple(min(255, int(c * 1.35 + 18)) for c in col)
            d.line([(x + 2, y1 - tier_h + 2), (x + bay_w - 2, y1 - tier_h + 2)], fill=top, width=2)

    # Quay apron: concrete with noise, yellow edge line, bollards.
    quay = vertical_gradient(H - quay_top, W, [(0.0, (86, 78, 82)), (1.0, (46, 42, 48))])
    quay *= (0.82 + 0.3 * fbm(H - quay_top, W, 0.04 * H, 4, rng))[..., None]
    slab = np.zeros((H - quay_top, W), dtype=np.float32)
    for sx in range(0, W, int(0.11 * W)):
        slab[:, sx : sx + 3] = 1.0
    quay = blend(quay, (30, 28, 32), 0.5 * slab)
    quay_img = Image.fromarray((np.clip(quay, 0, 1) * 255).astype(np.uint8), mode="RGB")
    draw_layer.paste(quay_img, (0, quay_top))
    d.rectangle([0, quay_top, W, quay_top + int(0.010 * H)], fill=(196, 160, 64))
    for bx in range(int(0.08 * W), int(0.7 * W), int(0.16 * W)):
        d.rounded_rectangle(
            [bx, quay_top - int(0.018 * H), bx + int(0.016 * W), quay_top + int(0.012 * H)],
            radius=10,
            fill=(28, 26, 30),
        )

    # Container stacks on the quay behind the crane legs (right side), seen from the front.
    stack_palette: list[Color] = [(132, 56, 46), (50, 78, 118), (58, 96, 80), (168, 108, 56), (150, 150, 156)]
    cw, ch = int(0.085 * W), int(0.048 * H)
    base_y = int(0.90 * H)
    for i, x in enumerate(range(int(0.60 * W), W, cw + 6)):
        for t in range(1 + (i * 7 + 3) % 3):
            col = stack_palette[(i * 3 + t * 2) % len(stack_palette)]
            y1 = base_y - t * (ch + 4)
            d.rectangle([x, y1 - ch, x + cw, y1], fill=col)
            for rx in range(x + 8, x + cw - 4, 10):  # corrugation
                shade = tuple(max(0, c - 26) for c in col)
                d.line([(rx, y1 - ch + 4), (rx, y1 - 4)], fill=shade, width=3)
            warm = tuple(min(255, int(c * 1.3 + 30)) for c in col)
            d.line([(x, y1 - ch), (x + cw, y1 - ch)], fill=warm, width=4)

    # Ship-to-shore gantry crane: two A-frame legs on the quay, boom out over the ship.
    crane: Color = (150, 46, 34)
    crane_dark: Color = (96, 30, 26)
    leg_l, leg_r = int(0.64 * W), int(0.84 * W)
    leg_top = int(0.27 * H)
    foot = int(0.955 * H)
    for lx in (leg_l, leg_r):
        d.polygon([(lx - 14, foot), (lx + 14, foot), (lx + 10, leg_top), (lx - 10, leg_top)], fill=crane)
    for lx in (leg_l + int(0.05 * W), leg_r + int(0.05 * W)):  # rear legs, slightly darker and thinner
        d.polygon(
            [
                (lx - 9, foot - int(0.04 * H)),
                (lx + 9, foot - int(0.04 * H)),
                (lx + 7, leg_top),
                (lx - 7, leg_top),
            ],
            fill=crane_dark,
        )
    for y in (int(0.50 * H), int(0.36 * H)):  # portal beams
        d.rectangle([leg_l - 10, y - 12, leg_r + int(0.05 * W) + 10, y + 12], fill=crane)
    for a, b in [
        ((leg_l, int(0.50 * H)), (leg_r, int(0.36 * H))),
        ((leg_l, int(0.36 * H)), (leg_r, int(0.50 * H))),
    ]:
        d.line([a, b], fill=crane_dark, width=10)
    boom_y = leg_top
    boom_x0, boom_x1 = int(0.22 * W), int(0.97 * W)
    d.rectangle([boom_x0, boom_y - 18, boom_x1, boom_y + 18], fill=crane)
    for bx in range(boom_x0, boom_x1, 46):  # lattice in the boom
        d.line([(bx, boom_y - 16), (bx + 23, boom_y + 16)], fill=crane_dark, width=5)
    apex = (int(0.75 * W), int(0.10 * H))
    d.polygon(
        [
            (apex[0] - 16, apex[1]),
            (apex[0] + 16, apex[1]),
            (leg_r - 40, boom_y - 16),
            (leg_l + 40, boom_y - 16),
        ],
        fill=crane_dark,
    )
    for end in [(boom_x0 + 20, boom_y - 14), (int(0.45 * W), boom_y - 14), (boom_x1 - 10, boom_y - 14)]:
        d.line([apex, end], fill=(70, 30, 30), width=6)  # forestays and backstays
    d.rectangle([leg_r - 10, boom_y - 70, leg_r + int(0.07 * W), boom_y - 18], fill=(170, 160, 150))  # machinery
    for wx in range(leg_r + 6, leg_r + int(0.065 * W), 22):
        d.rectangle([wx, boom_y - 58, wx + 10, boom_y - 46], fill=(255, 214, 150))
    # Trolley, hoist ropes and a container hanging under the boom, over the ship.
    tx = int(0.40 * W)
    d.rectangle([tx - 34, boom_y + 16, tx + 34, boom_y + 44], fill=(70, 66, 72))
    hang_top = int(0.50 * H)
    for off in (-26, -9, 9, 26):
        d.line([(tx + off, boom_y + 44), (tx + off * 3, hang_top)], fill=(40, 36, 40), width=3)
    d.rectangle([tx - 92, hang_top, tx + 92, hang_top + 12], fill=(196, 150, 50))  # spreader
    d.rectangle([tx - 88, hang_top + 12, tx + 88, hang_top + 12 + int(0.05 * H)], fill=(44, 84, 128))
    for rx in range(tx - 80, tx + 84, 11):
        d.line([(rx, hang_top + 18), (rx, hang_top + int(0.05 * H) + 6)], fill=(34, 66, 104), width=3)
    d.line([(tx - 88, hang_top + 13), (tx + 88, hang_top + 13)], fill=(240, 170, 110), width=3)

    # Lamp posts along the quay.
    lamp_points = []
    for px in (int(0.10 * W), int(0.34 * W), int(0.56 * W), int(0.93 * W)):
        top = int(0.60 * H)
        d.rectangle([px - 4, top, px + 4, quay_top + int(0.05 * H)], fill=(30, 28, 34))
        d.rectangle([px - 22, top - 6, px + 22, top + 4], fill=(30, 28, 34))
        lamp_points.append((px, top + 8))
    img = np.asarray(draw_layer, dtype=np.float32) / 255.0

    # Warm sodium glow from the lamps, red aircraft-warning lights on the crane.
    for px, py in lamp_points:
        img = blend(img, (255, 190, 110), 0.65 * radial(H, W, px, py, 0.05 * W))
        img = blend(img, (255, 236, 190), 0.95 * radial(H, W, px, py, 0.008 * W))
    for px, py in [(apex[0], apex[1] - 6), (boom_x0 + 10, boom_y - 22), (boom_x1 - 10, boom_y - 22)]:
        img = blend(img, (255, 40, 30), 0.9 * radial(H, W, px, py, 0.012 * W))

    # Warm backlight rim on everything near the horizon, a touch of haze, final grade.
    haze = np.clip(1.0 - np.abs(np.arange(H, dtype=np.float32) - horizon) / (0.2 * H), 0, 1)[:, None]
    img = blend(img, (255, 170, 110), 0.08 * haze * np.ones((1, W), dtype=np.float32))
    return finish(img, IMAGE_SIZE, grain=0.007, seed=seed + 1, vignette=0.35)


# --------------------------------------------------------------------------------------------
# Image 2: six-axis robot arm on a wooden workbench
# --------------------------------------------------------------------------------------------
def _segment(
    d: ImageDraw.ImageDraw,
    a: tuple[float, float],
    b: tuple[float, float],
    width: float,
    body: Color,
    shade: Color,
    light: Color,
) -> None:
    """An arm link as a thick capsule with a shaded lower edge and a highlight along the upper edge."""
    ax, ay = a
    bx, by = b
    length = math.hypot(bx - ax, by - ay)
    nx, ny = -(by - ay) / length, (bx - ax) / length  # unit normal
    half = width / 2
    poly = [
        (ax + nx * half, ay + ny * half),
        (bx + nx * half, by + ny * half),
        (bx - nx * half, by - ny * half),
        (ax - nx * half, ay - ny * half),
    ]
    d.polygon(poly, fill=body)
    d.ellipse([ax - half, ay - half, ax + half, ay + half], fill=body)
    d.ellipse([bx - half, by - half, bx + half, by + half], fill=body)
    side = 1.0 if ny > 0 else -1.0  # put the shadow on the lower side
    for frac, col, w in ((0.62, shade, 0.34), (-0.55, light, 0.16)):
        off = side * frac * half
        d.line([(ax + nx * off, ay + ny * off), (bx + nx * off, by + ny * off)], fill=col, width=int(w * width))


def render_workbench(seed: int = 11) -> Image.Image:
    rng = np.random.default_rng(seed)
    W, H = IMAGE_SIZE[0] * SUPERSAMPLE, IMAGE_SIZE[1] * SUPERSAMPLE
    bench_back = int(0.50 * H)  # far edge of the bench top
    bench_front = int(0.86 * H)  # near edge of the bench top
    lamp = (0.18 * W, -0.1 * H)

    # Back wall: warm off-white paint, lit from the upper left, with soft mottling.
    wall = vertical_gradient(H, W, [(0.0, (176, 170, 160)), (0.5, (200, 192, 178)), (1.0, (200, 192, 178))])
    wall = blend(wall, (246, 226, 196), 0.55 * radial(H, W, lamp[0], 0.15 * H, 0.9 * W, squash=0.8))
    wall *= (0.94 + 0.08 * fbm(H, W, 0.2 * H, 4, rng))[..., None]
    img = wall

    layer = Image.fromarray((np.clip(img, 0, 1) * 255).astype(np.uint8), mode="RGB")
    d = ImageDraw.Draw(layer)
    # Pegboard panel with a grid of holes and a few hanging tools.
    pb = (int(0.44 * W), int(0.08 * H), int(0.94 * W), int(0.47 * H))
    d.rectangle(pb, fill=(168, 140, 104))
    for y in range(pb[1] + 22, pb[3] - 10, 36):
        for x in range(pb[0] + 22, pb[2] - 10, 36):
            d.ellipse([x - 4, y - 4, x + 4, y + 4], fill=(96, 78, 58))
    d.rectangle([pb[0], pb[3] - 8, pb[2], pb[3]], fill=(120, 98, 72))
    # Wrench, screwdriver, pliers, tape roll, cable coil.
    d.line([(int(0.50 * W), int(0.13 * H)), (int(0.50 * W), int(0.33 * H))], fill=(150, 154, 160), width=16)
    d.ellipse([int(0.50 * W) - 26, int(0.11 * H) - 26, int(0.50 * W) + 26, int(0.11 * H) + 26], fill=(150, 154, 160))
    d.ellipse(
        [int(0.50 * W) - 11, int(0.095 * H) - 14, int(0.50 * W) + 11, int(0.095 * H) + 8],
        fill=(168, 140, 104),
    )
    d.rectangle([int(0.56 * W) - 12, int(0.12 * H), int(0.56 * W) + 12, int(0.22 * H)], fill=(200, 60, 40))
    d.line([(int(0.56 * W), int(0.22 * H)), (int(0.56 * W), int(0.34 * H))], fill=(170, 172, 178), width=8)
    d.line([(int(0.62 * W), int(0.12 * H)), (int(0.605 * W), int(0.30 * H))], fill=(40, 70, 150), width=18)
    d.line([(int(0.62 * W), int(0.12 * H)), (int(0.635 * W), int(0.30 * H))], fill=(40, 70, 150), width=18)
    d.ellipse([int(0.68 * W), int(0.12 * H), int(0.74 * W), int(0.12 * H) + int(0.06 * W)], fill=(70, 66, 64))
    d.ellipse(
        [int(0.695 * W), int(0.12 * H) + 26, int(0.725 * W), int(0.12 * H) + int(0.06 * W) - 26],
        fill=(168, 140, 104),
    )
    for k in range(5):
        r = int(0.045 * W) - k * 6
        cx, cy = int(0.84 * W), int(0.22 * H)
        d.ellipse([cx - r, cy - r, cx + r, cy + r], outline=(34, 34, 36), width=6)
    # Small controller box on the bench at the back right, with status LEDs and a label strip.
    d.rectangle([int(0.70 * W), int(0.40 * H), int(0.90 * W), bench_back + int(0.04 * H)], fill=(58, 62, 68))
    d.rectangle([int(0.70 * W), int(0.40 * H), int(0.90 * W), int(0.41 * H)], fill=(96, 100, 108))
    for i, col in enumerate([(60, 220, 90), (60, 220, 90), (250, 180, 40)]):
        cx = int(0.725 * W) + i * 34
        d.ellipse([cx - 7, int(0.43 * H) - 7, cx + 7, int(0.43 * H) + 7], fill=col)
    d.rectangle([int(0.80 * W), int(0.425 * H), int(0.88 * W), int(0.44 * H)], fill=(226, 226, 220))
    img = np.asarray(layer, dtype=np.float32) / 255.0

    # Bench top: oak planks in perspective (grain converges to a vanishing point above the image).
    top_h = bench_front - bench_back
    yy, xx = np.mgrid[0:top_h, 0:W].astype(np.float32)
    t = yy / top_h  # 0 at the far edge, 1 at the near edge
    vp_x = 0.5 * W
    u = (xx - vp_x) / (0.55 + 0.45 * t) + vp_x  # un-project x so the grain runs towards the viewer
    grain_src = stretched_noise(int(0.25 * H), W, 0.004 * H, 0.2 * H, rng)
    gy = np.clip((u / W) * (grain_src.shape[0] - 1), 0, grain_src.shape[0] - 1).astype(np.int32)
    gx = np.clip(t * (W - 1), 0, W - 1).astype(np.int32)
    grain = grain_src[gy, gx]
    plank = (np.floor(u / (0.09 * W)).astype(np.int32) * 7919) % 5 / 5.0
    wood = rgb((176, 122, 74)) * (0.78 + 0.22 * t[..., None])
    wood = wood * (0.82 + 0.22 * grain[..., None]) * (0.92 + 0.1 * plank[..., None])
    seams = (np.abs(((u / (0.09 * W)) % 1.0) - 0.0) < 0.012).astype(np.float32)
    wood = blend(wood, (70, 44, 26), 0.6 * seams)
    light_pool = radial(top_h, W, 0.30 * W, 0.35 * top_h, 0.75 * W, squash=0.5)
    wood = blend(wood, (255, 224, 170), 0.30 * light_pool)
    img[bench_back:bench_front] = wood
    # Bench front edge and the dim space below.
    edge = vertical_gradient(int(0.05 * H), W, [(0.0, (132, 88, 52)), (1.0, (92, 60, 36))])
    img[bench_front : bench_front + edge.shape[0]] = edge
    img[bench_front + edge.shape[0] :] = vertical_gradient(
        H - bench_front - edge.shape[0], W, [(0.0, (44, 40, 38)), (1.0, (30, 28, 28))]
    )
    # Contact shadow where the bench meets the wall.
    img[bench_back : bench_back + int(0.012 * H)] *= 0.7

    # Soft shadows of the objects and the arm on the bench (drawn before the objects).
    cube_c = (int(0.56 * W), int(0.70 * H))
    tray = (int(0.22 * W), int(0.74 * H), int(0.42 * W), int(0.84 * H))
    base_c = (int(0.33 * W), int(0.62 * H))

    def shadows(sd: ImageDraw.ImageDraw) -> None:
        sd.ellipse([base_c[0] - 150, base_c[1] - 24, base_c[0] + 190, base_c[1] + 56], fill=200)
        sd.ellipse([cube_c[0] - 60, cube_c[1] - 10, cube_c[0] + 150, cube_c[1] + 50], fill=210)
        sd.rectangle([tray[0] + 30, tray[1] + 10, tray[2] + 50, tray[3] + 24], fill=150)
        sd.ellipse([int(0.68 * W), int(0.765 * H), int(0.76 * W), int(0.80 * H)], fill=200)
        sd.polygon(
            [
                (base_c[0], base_c[1]),
                (int(0.60 * W), int(0.60 * H)),
                (int(0.64 * W), int(0.64 * H)),
                (base_c[0] + 60, base_c[1] + 30),
            ],
            fill=90,
        )

    shadow = mask_from(shadows, (W, H), blur=0.012 * W)
    img = blend(img, (40, 26, 18), 0.55 * shadow)

    layer = Image.fromarray((np.clip(img, 0, 1) * 255).astype(np.uint8), mode="RGB")
    d = ImageDraw.Draw(layer)

    # Blue plastic parts tray (open box seen from above and in front).
    x0, y0, x1, y1 = tray
    d.polygon([(x0 + 24, y0), (x1 - 24, y0), (x1, y1), (x0, y1)], fill=(30, 86, 168))
    d.polygon([(x0 + 40, y0 + 14), (x1 - 40, y0 + 14), (x1 - 22, y1 - 40), (x0 + 22, y1 - 40)], fill=(22, 60, 124))
    d.rectangle([x0, y1 - 40, x1, y1], fill=(40, 104, 196))
    d.line([(x0 + 24, y0), (x1 - 24, y0)], fill=(110, 160, 230), width=6)

    # Red cube: three visible faces with different shading.
    s = int(0.052 * W)
    cx, cy = cube_c
    front = [
        (cx - s // 2, cy - s // 2),
        (cx + s // 2, cy - s // 2),
        (cx + s // 2, cy + s // 2),
        (cx - s // 2, cy + s // 2),
    ]
    dx, dy = int(0.45 * s), int(-0.32 * s)
    top_face = [
        front[0],
        front[1],
        (front[1][0] + dx, front[1][1] + dy),
        (front[0][0] + dx, front[0][1] + dy),
    ]
    side_face = [
        front[1],
        (front[1][0] + dx, front[1][1] + dy),
        (front[2][0] + dx, front[2][1] + dy),
        front[2],
    ]
    d.polygon(front, fill=(196, 36, 32))
    d.polygon(top_face, fill=(236, 84, 70))
    d.polygon(side_face, fill=(138, 22, 22))
    # Yellow cylinder and a small green block further right.
    ycx, ycy, yr = int(0.72 * W), int(0.74 * H), int(0.022 * W)
    d.rectangle([ycx - yr, ycy - int(0.07 * H), ycx + yr, ycy], fill=(226, 178, 36))
    d.ellipse([ycx - yr, ycy - 12, ycx + yr, ycy + 12], fill=(226, 178, 36))
    d.ellipse([ycx - yr, ycy - int(0.07 * H) - 12, ycx + yr, ycy - int(0.07 * H) + 12], fill=(250, 214, 96))
    d.rectangle([ycx + yr - 10, ycy - int(0.07 * H), ycx + yr, ycy], fill=(180, 134, 24))
    gx0, gy0 = int(0.62 * W), int(0.80 * H)
    d.polygon([(gx0, gy0), (gx0 + 60, gy0), (gx0 + 60, gy0 + 44), (gx0, gy0 + 44)], fill=(52, 150, 76))
    d.polygon([(gx0, gy0), (gx0 + 60, gy0), (gx0 + 84, gy0 - 16), (gx0 + 24, gy0 - 16)], fill=(96, 190, 110))
    d.polygon(
        [(gx0 + 60, gy0), (gx0 + 84, gy0 - 16), (gx0 + 84, gy0 + 28), (gx0 + 60, gy0 + 44)],
        fill=(34, 108, 54),
    )

    # Robot arm: round base plate, turret, shoulder, upper arm, elbow, forearm, wrist, gripper.
    body: Color = (226, 228, 230)
    shade: Color = (150, 154, 160)
    light: Color = (250, 251, 252)
    joint: Color = (236, 120, 32)
    dark: Color = (50, 52, 56)
    bx, by = base_c
    d.ellipse([bx - 130, by - 34, bx + 130, by + 40], fill=(70, 72, 78))
    d.ellipse([bx - 130, by - 44, bx + 130, by + 28], fill=(98, 100, 108))
    for k in range(6):  # bolts on the base plate
        ang = math.pi * (0.15 + 0.14 * k)
        px, py = bx + 110 * math.cos(ang), by - 8 + 26 * math.sin(ang)
        d.ellipse([px - 6, py - 5, px + 6, py + 5], fill=(60, 60, 64))
    d.rectangle([bx - 70, by - 150, bx + 70, by - 20], fill=body)
    d.ellipse([bx - 70, by - 44, bx + 70, by + 2], fill=body)
    d.rectangle([bx + 34, by - 150, bx + 70, by - 20], fill=shade)
    d.rectangle([bx - 60, by - 150, bx - 44, by - 22], fill=light)
    d.ellipse([bx - 70, by - 176, bx + 70, by - 126], fill=(238, 240, 242))
    shoulder = (bx + 8, by - 200)
    elbow = (bx + int(0.10 * W), by - int(0.36 * H))
    wrist = (cube_c[0] + 16, cube_c[1] - int(0.205 * H))
    d.ellipse([shoulder[0] - 78, shoulder[1] - 78, shoulder[0] + 78, shoulder[1] + 78], fill=joint)
    _segment(d, shoulder, elbow, 104, body, shade, light)
    d.line([(shoulder[0] - 50, shoulder[1] + 20), (elbow[0] - 60, elbow[1] + 40)], fill=dark, width=10)  # cable
    d.ellipse([elbow[0] - 64, elbow[1] - 64, elbow[0] + 64, elbow[1] + 64], fill=joint)
    d.ellipse([elbow[0] - 30, elbow[1] - 30, elbow[0] + 30, elbow[1] + 30], fill=(200, 96, 20))
    _segment(d, elbow, wrist, 80, body, shade, light)
    d.ellipse([shoulder[0] - 34, shoulder[1] - 34, shoulder[0] + 34, shoulder[1] + 34], fill=(200, 96, 20))
    d.ellipse([wrist[0] - 48, wrist[1] - 48, wrist[0] + 48, wrist[1] + 48], fill=joint)
    # Wrist flange pointing straight down, then a two-finger parallel gripper, fingers open.
    fl_top, fl_bot = wrist[1] + 30, wrist[1] + 96
    d.rectangle([wrist[0] - 40, fl_top, wrist[0] + 40, fl_bot], fill=(120, 124, 130))
    d.rectangle([wrist[0] - 40, fl_top, wrist[0] - 24, fl_bot], fill=(170, 174, 180))
    d.rectangle([wrist[0] - 70, fl_bot, wrist[0] + 70, fl_bot + 26], fill=dark)
    for fx in (wrist[0] - 66, wrist[0] + 44):
        d.rectangle([fx, fl_bot + 26, fx + 22, fl_bot + 108], fill=(72, 74, 80))
        d.rectangle([fx + 2, fl_bot + 84, fx + 20, fl_bot + 108], fill=(34, 34, 36))  # rubber pads
    img = np.asarray(layer, dtype=np.float32) / 255.0

    # Warm key light from the desk lamp (upper left), slight cool fill from the right.
    key = radial(H, W, 0.25 * W, 0.35 * H, 1.0 * W, squash=0.9)
    img = img * (0.80 + 0.30 * key[..., None])
    img = blend(img, (160, 180, 220), 0.05 * np.linspace(0, 1, W, dtype=np.float32)[None, :] * np.ones((H, 1)))
    return finish(img, IMAGE_SIZE, grain=0.006, seed=seed + 1, vignette=0.30)


# --------------------------------------------------------------------------------------------
# Video: a ball rolling across a wooden floor towards a toy block
# --------------------------------------------------------------------------------------------
def render_floor_background(seed: int = 23) -> FloatImage:
    rng = np.random.default_rng(seed)
    W, H = VIDEO_SIZE
    horizon = int(0.46 * H)  # where the floor meets the wall
    img = vertical_gradient(H, W, [(0.0, (150, 170, 176)), (0.46, (178, 194, 196)), (1.0, (178, 194, 196))])
    img *= (0.95 + 0.07 * fbm(H, W, 60.0, 3, rng))[..., None]
    img = blend(img, (255, 240, 214), 0.35 * radial(H, W, 0.2 * W, 0.0, 0.9 * W, squash=0.7))
    # Skirting board.
    img[horizon - 16 : horizon] = rgb((236, 234, 226))
    img[horizon - 3 : horizon] = rgb((196, 194, 186))
    # Floorboards running away from the camera (converging lines) with grain.
    fh = H - horizon
    yy, xx = np.mgrid[0:fh, 0:W].astype(np.float32)
    t = (yy + 6) / fh
    vp = 0.5 * W
    u = (xx - vp) / (0.25 + 0.75 * t) + vp
    board = 70.0
    idx = np.floor(u / board)
    tone = ((idx.astype(np.int64) * 2654435761) % 97) / 97.0
    grain_src = stretched_noise(256, 512, 2.0, 60.0, rng)
    g = grain_src[
        np.clip(((u % board) / board * 255), 0, 255).astype(np.int32),
        np.clip(t * 511 + idx * 37, 0, 511).astype(np.int32) % 512,
    ]
    wood = rgb((164, 112, 66)) * (0.80 + 0.12 * tone[..., None]) * (0.86 + 0.2 * g[..., None])
    seam = (np.abs((u % board) - 0.5) < 1.2 / (0.25 + 0.75 * t)).astype(np.float32)
    wood = blend(wood, (80, 52, 30), 0.7 * seam)
    wood *= (0.86 + 0.18 * t)[..., None]
    wood = blend(wood, (255, 236, 200), 0.22 * radial(fh, W, 0.25 * W, 0.2 * fh, 0.8 * W, squash=0.4))
    img[horizon:] = wood
    img[horizon : horizon + 6] *= 0.75  # contact shadow under the skirting
    return img


def draw_block(img: FloatImage, x: float, y: float, size: float) -> FloatImage:
    """A natural-wood toy block standing on the floor; (x, y) is its front-bottom-left corner."""
    H, W = img.shape[:2]
    sh = mask_from(lambda d: d.ellipse([x - 10, y - 14, x + size * 1.6, y + 10]), (W, H), blur=6)
    img = blend(img, (40, 28, 18), 0.45 * sh)
    layer = Image.fromarray((np.clip(img, 0, 1) * 255).astype(np.uint8), mode="RGB")
    d = ImageDraw.Draw(layer)
    dx, dy = size * 0.35, -size * 0.22
    d.polygon(
        [(x, y - size), (x + size, y - size), (x + size + dx, y - size + dy), (x + dx, y - size + dy)],
        fill=(238, 206, 150),
    )
    d.polygon(
        [(x + size, y), (x + size, y - size), (x + size + dx, y - size + dy), (x + size + dx, y + dy)],
        fill=(170, 128, 76),
    )
    d.rectangle([x, y - size, x + size, y], fill=(214, 170, 108))
    # A blue letter-like stripe pair painted on the front face.
    d.rectangle([x + size * 0.30, y - size * 0.75, x + size * 0.42, y - size * 0.25], fill=(40, 90, 170))
    d.rectangle([x + size * 0.30, y - size * 0.75, x + size * 0.66, y - size * 0.64], fill=(40, 90, 170))
    return np.asarray(layer, dtype=np.float32) / 255.0


def draw_ball(img: FloatImage, cx: float, cy: float, radius: float, angle: float) -> FloatImage:
    """A glossy two-colour ball with a white band, rotated by ``angle`` about the viewing axis."""
    H, W = img.shape[:2]
    # Contact shadow, slightly to the right (light comes from the upper left).
    sh = mask_from(
        lambda d: d.ellipse([cx - radius * 0.95, cy + radius * 0.78, cx + radius * 1.35, cy + radius * 1.12]),
        (W, H),
        blur=radius * 0.18,
    )
    img = blend(img, (36, 24, 16), 0.6 * sh)
    ss = 4  # supersample the sphere for smooth edges
    x0, y0 = int(cx - radius) - 2, int(cy - radius) - 2
    size = int(2 * radius) + 5
    ys, xs = np.mgrid[0 : size * ss, 0 : size * ss].astype(np.float32)
    px = (xs + 0.5) / ss + x0 - cx
    py = (ys + 0.5) / ss + y0 - cy
    r2 = (px**2 + py**2) / radius**2
    inside = (r2 <= 1.0).astype(np.float32)
    nx, ny = px / radius, py / radius
    nz = np.sqrt(np.clip(1.0 - r2, 0.0, 1.0))
    ca, sa = math.cos(angle), math.sin(angle)
    rx, ry = ca * nx + sa * ny, -sa * nx + ca * ny  # texture coordinates rotate with the ball
    base = np.where((ry > 0)[..., None], rgb((208, 40, 36)), rgb((32, 84, 188)))
    band = (np.abs(rx) < 0.16).astype(np.float32)
    dot = ((rx - 0.55) ** 2 + (ry + 0.45) ** 2 < 0.03).astype(np.float32)
    col = blend(base, (244, 242, 236), np.maximum(band, dot))
    lx, ly, lz = -0.5, -0.6, 0.62
    ln = math.sqrt(lx * lx + ly * ly + lz * lz)
    lambert = np.clip((nx * lx + ny * ly + nz * lz) / ln, 0.0, 1.0)
    hx, hy, hz = lx / ln, ly / ln, lz / ln + 1.0
    hn = math.sqrt(hx * hx + hy * hy + hz * hz)
    spec = np.clip((nx * hx + ny * hy + nz * hz) / hn, 0.0, 1.0) ** 60
    shaded = col * (0.28 + 0.8 * lambert)[..., None] + 0.65 * spec[..., None]
    shaded = blend(shaded, (150, 110, 70), 0.18 * np.clip(ny, 0, 1) ** 3)  # floor bounce light
    sphere = Image.fromarray((np.clip(shaded, 0, 1) * 255).astype(np.uint8), mode="RGB").resize(
        (size, size), Image.Resampling.BOX
    )
    alpha = Image.fromarray((inside * 255).astype(np.uint8), mode="L").resize((size, size), Image.Resampling.BOX)
    out = Image.fromarray((np.clip(img, 0, 1) * 255).astype(np.uint8), mode="RGB")
    out.paste(sphere, (x0, y0), alpha)
    return np.asarray(out, dtype=np.float32) / 255.0


def ball_path(frame: int) -> tuple[float, float]:
    """Ball centre x (pixels) and roll angle for ``frame``; it starts fast and slows a little."""
    W = VIDEO_SIZE[0]
    t = frame / (VIDEO_FRAMES - 1)
    x = 0.10 * W + 0.36 * W * (t - 0.18 * t * t) / (1 - 0.18)
    return x, x / 34.0


def render_video_frames() -> list[np.ndarray]:
    W, H = VIDEO_SIZE
    background = render_floor_background()
    background = draw_block(background, 0.80 * W, 0.80 * H, 56)
    frames = []
    radius = 34.0
    floor_y = 0.77 * H
    for f in range(VIDEO_FRAMES):
        x, angle = ball_path(f)
        frame = draw_ball(background, x, floor_y - radius, radius, angle)
        frames.append((np.clip(frame, 0, 1) * 255 + 0.5).astype(np.uint8))
    return frames


def render_first_and_last() -> tuple[Image.Image, Image.Image]:
    """The same room as the video: the ball at its start on the left, and at rest against the block on the right."""
    W, H = VIDEO_SIZE
    background = draw_block(render_floor_background(), 0.80 * W, 0.80 * H, 56)
    radius, floor_y = 34.0, 0.77 * H
    start_x, rest_x = 0.10 * W, 0.80 * W - radius - 3
    stills = []
    for x in (start_x, rest_x):
        frame = draw_ball(background, x, floor_y - radius, radius, x / 34.0)
        stills.append(Image.fromarray((np.clip(frame, 0, 1) * 255 + 0.5).astype(np.uint8), mode="RGB"))
    return stills[0], stills[1]


def write_mp4(frames: list[np.ndarray], path: Path, fps: int = VIDEO_FPS) -> None:
    """Encode H.264 yuv420p with fixed settings so that the output is byte-identical run to run."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), mode="w", options={"fflags": "+bitexact"}) as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.height, stream.width = frames[0].shape[:2]
        stream.pix_fmt = "yuv420p"
        stream.time_base = Fraction(1, fps)
        stream.options = {
            "crf": "20",
            "preset": "medium",
            "threads": "1",
            "tune": "film",
            "x264-params": "no-info=1",
        }
        stream.codec_context.flags |= av.codec.context.Flags.bitexact
        for i, arr in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(arr, format="rgb24")
            frame.pts = i
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ASSETS_DIR, help="assets folder to write into")
    args = parser.parse_args(argv)
    out: Path = args.out
    (out / "images").mkdir(parents=True, exist_ok=True)
    render_harbor().save(out / "images" / "harbor_crane_dusk.png", optimize=True)
    render_workbench().save(out / "images" / "robot_arm_workbench.png", optimize=True)
    write_mp4(render_video_frames(), out / "videos" / "rolling_ball.mp4")
    first, last = render_first_and_last()
    first.save(out / "images" / "ball_start.png", optimize=True)
    last.save(out / "images" / "ball_at_rest.png", optimize=True)
    for p in sorted(out.glob("*/*.*")):
        if p.suffix in {".png", ".mp4"}:
            print(f"{p.relative_to(REPO_ROOT)}  {p.stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
