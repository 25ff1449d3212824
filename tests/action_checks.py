"""Checks of an action notebook's run, shared by the CPU tests and the GPU runner: every file the manifest lists is
decoded or loaded again and must be what the settings ask for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from cookbook_tools import notebooks
from cosmos3_action import action_settings, actions
from helpers import assets, canvases, media

ACTION_DIFFUSERS, ACTION_VLLM = notebooks.ACTION_PAIR
ROLLOUT_CHUNKS = 5  # the notebooks' default rollout of the arm, as NVIDIA's
STEERING = ("straight", "left", "right")
UMI_CHUNKS = 2  # the bundled UMI trajectory: 32 steps


def expected(preset: str, chunks: int) -> tuple[dict[str, tuple[str, int]], dict[str, tuple[int, int]]]:
    """The videos a run writes (name -> (domain, frames)) and its action files (name -> shape)."""
    car = action_settings.settings_for("fd_av", preset)
    arm = action_settings.settings_for("fd_droid_lerobot", preset)
    umi = action_settings.settings_for("fd_umi", preset)
    videos = {"quickstart": ("av", car.num_frames), "fd_av_left_id": ("av", car.num_frames)}
    videos |= {f"fd_av_{turn}": ("av", car.num_frames) for turn in STEERING}
    videos |= {f"fd_droid_chunk{i}": ("droid_lerobot", arm.num_frames) for i in range(chunks)}
    videos |= {"fd_droid_rollout": ("droid_lerobot", chunks * arm.chunk_size + 1), "id_av": ("av", car.num_frames)}
    videos |= {f"fd_umi_chunk{i}": ("umi", umi.num_frames) for i in range(UMI_CHUNKS)}
    videos |= {"fd_umi_rollout": ("umi", UMI_CHUNKS * umi.chunk_size + 1)}
    videos |= {name: ("droid_lerobot", arm.num_frames) for name in ("nvidia_request", "policy_droid_lerobot")}
    files = {
        "fd_av_left_given": (car.chunk_size, car.action_width),
        "fd_av_left_recovered": (car.chunk_size, car.action_width),
        "fd_droid_given": (chunks * arm.chunk_size, arm.action_width),
        "fd_umi_given": (UMI_CHUNKS * umi.chunk_size, umi.action_width),
        "id_av_predicted": (car.chunk_size, car.action_width),
        "policy_droid_actions": (arm.chunk_size, arm.action_width),
    }
    return videos, files


def nvidia_request_size(backend: str, tier: int) -> tuple[int, int]:
    """What NVIDIA's form of the request (the 640x540 stack at its own size) gives: vLLM-Omni makes the `size` sent,
    rounded down to 16, at any tier; Diffusers fits the stack into the tier's canvas without upscaling and crops
    the padding."""
    return (640, 528) if backend == "vllm_omni" or tier == 480 else (304, 256)


def check_action_run(run_dir: Path, preset: str, seed: int, chunks: int, quickstart_tier: int = 256) -> dict[str, Any]:
    """Every video has chunk + 1 frames (the rollout: chunks x chunk + 1) at its embodiment's frame rate, on the
    tier's canvas or inside it (the quickstart's literal tier: 480, or 256 on the tiny checkpoint); every action file
    pair has the shape (steps, action width) and says its domain and units; every plot is a PNG; the given
    trajectories are the bundled ones, unchanged."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    outputs = {o["path"]: o for o in manifest["outputs"]}
    videos, files = expected(preset, chunks)
    listed = {o["mode"] for o in manifest["outputs"] if o["kind"] == "video"}
    assert listed == set(videos), sorted(listed ^ set(videos))
    for name, (domain, frames) in videos.items():
        info = media.probe(run_dir / f"{name}.mp4")
        e = action_settings.EMBODIMENTS[domain]
        tier = quickstart_tier if name == "quickstart" else action_settings.PRESETS[preset].tier or e.resolution_tier
        canvas = canvases.canvas(info.width, info.height, tier)
        assert (info.codec, info.num_frames, round(info.fps), info.has_audio) == ("h264", frames, e.fps, False), (
            name,
            info,
        )
        if name == "nvidia_request":
            assert (info.width, info.height) == nvidia_request_size(manifest["backend"], tier), info
            continue
        assert info.width <= canvas[0] and info.height <= canvas[1] and info.width % 16 == info.height % 16 == 0, info
        assert outputs[f"{name}.mp4"]["num_frames"] == frames
        if name != "quickstart" and "rollout" not in name:
            assert outputs[f"{name}.mp4"]["seed"] == seed and outputs[f"{name}.mp4"]["seconds"] > 0
    for name, shape in files.items():
        array, about = actions.read(run_dir / f"{name}.npy")
        assert array.shape == shape and array.dtype == np.float32 and np.isfinite(array).all(), (name, array.shape)
        assert (
            about["shape"] == list(shape)
            and about["units"]
            and about["domain_name"] in name.replace("droid", "droid_lerobot")
        )
        assert {f"{name}.npy", f"{name}.json"} <= set(outputs), f"{name} is not in the manifest"
    bundled = assets.assets_dir("action") / "trajectories"
    given_from = {"fd_av_left_given": "av_left", "fd_droid_given": "droid_pick", "fd_umi_given": "umi_cup"}
    for given, bundle in given_from.items():
        want = actions.read(bundled / f"{bundle}.npy")[0][: files[given][0]]
        np.testing.assert_array_equal(actions.read(run_dir / f"{given}.npy")[0], want)
    for plot in ("fd_av_plot", "fd_droid_plot", "fd_umi_plot", "id_av_plot", "policy_droid_plot"):
        info = media.probe(run_dir / f"{plot}.png")
        assert info.kind == "image" and info.width > 300 and outputs[f"{plot}.png"]["kind"] == "image"
    return manifest
