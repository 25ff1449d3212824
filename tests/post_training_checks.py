"""The post-training notebooks' session runs and the checks their tests share.

- The vLLM-Omni notebook runs with `ADAPTER="auto"` in an empty OUTPUT_DIR: it runs its Diffusers twin (papermill,
  a fresh kernel) to train the adapter, then serves it on the session's server. That twin's run is the Diffusers
  notebook's unbroken run.
- The Diffusers notebook runs by papermill until its first save, and its kernel is killed (SIGKILL); a second "Run
  All", under nbmake in a fresh kernel, goes on from that save and finishes.
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cookbook_tools import notebooks
from cosmos3_post_training import settings as training_settings
from cosmos3_post_training import training
from helpers import media
from tests.dataset_checks import _in_background, _kernels, _wait_for
from tests.notebook_checks import SMOKE, execute_smoke, run_nbmake

POST_DIFFUSERS, POST_VLLM = notebooks.POST_TRAINING_PAIR
ADAPTER_NAME = "cosmos3-lora"  # the notebooks' default
SMOKE_SETTINGS = training_settings.settings_for("smoke")
VIDEOS = ("base", "adapter", "adapter_half")


@dataclass
class TrainedRun:
    executed: Path  # the executed notebook
    output_dir: Path  # its OUTPUT_DIR: the adapter's folder and the run folders

    @property
    def train_dir(self) -> Path:
        return self.output_dir / ADAPTER_NAME

    @property
    def adapter(self) -> Path:
        return self.train_dir / "adapter"

    def run_folder(self, backend: str) -> Path:
        (folder,) = sorted(self.output_dir.glob(f"{backend}-*"))
        return folder


def served_with_its_twin(out: Path) -> TrainedRun:
    executed = execute_smoke(POST_VLLM, out, BASE_URL="auto")
    return TrainedRun(executed, out / "media")


def killed_at_the_first_save_then_resumed(out: Path) -> TrainedRun:
    """Run the Diffusers notebook, SIGKILL its kernel once its first checkpoint is saved, then run it again under
    nbmake with the same OUTPUT_DIR."""
    media = out / "media"
    first_save = media / ADAPTER_NAME / training.CHECKPOINTS / f"step-{SMOKE_SETTINGS.save_every:06d}" / training.STATE
    # Trained towards many more steps than the preset's, so that the kill comes well before they end; the second run
    # goes on towards the preset's own (a checkpoint serves any length of the same fine-tune).
    thread, errors = _in_background(
        lambda: execute_smoke(POST_DIFFUSERS, out / "first", OUTPUT_DIR=str(media), TRAIN_STEPS=100_000)
    )
    _wait_for(lambda: first_save.is_file() or not thread.is_alive(), "the first checkpoint", poll_s=0.05)
    kernels = _kernels()
    assert thread.is_alive() and len(kernels) == 1, (kernels, errors)
    os.kill(kernels[0], signal.SIGKILL)
    thread.join(120)
    assert errors and "DeadKernelError" in type(errors[0]).__name__ + repr(errors[0]), errors
    saved = sorted(p.name for p in (media / ADAPTER_NAME / training.CHECKPOINTS).glob("step-*"))
    assert saved and saved[-1] < f"step-{SMOKE_SETTINGS.train_steps:06d}", saved  # killed before the end
    (out / "resumed").mkdir()
    executed = run_nbmake(POST_DIFFUSERS, {**SMOKE, "OUTPUT_DIR": str(media)}, out / "resumed")
    return TrainedRun(executed, media)


def check_post_training_run(run_dir: Path, preset: str) -> dict[str, np.ndarray]:
    """A run's comparison videos (and, from the Diffusers notebook, the reloaded adapter's), each an H.264 video of the
    preset's size, length and rate; returns their frames. (The vLLM-Omni quickstart's literal request on the tiny
    checkpoint is the smoke size whatever the preset.)"""
    s = training_settings.settings_for(preset)
    outputs = json.loads((run_dir / "manifest.json").read_text())["outputs"]
    names = [o["mode"] for o in outputs if o["kind"] == "video" and o["mode"] != "quickstart"]
    assert set(VIDEOS) <= set(names), names
    found = {}
    for name in names:
        info = media.probe(run_dir / f"{name}.mp4")
        assert (info.codec, info.width, info.height, info.num_frames, info.fps) == (
            "h264",
            s.width,
            s.height,
            s.num_frames,
            s.fps,
        ), (name, info)
        found[name] = media.read_frames(run_dir / f"{name}.mp4").astype(float)
    return found
