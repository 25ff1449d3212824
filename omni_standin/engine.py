"""The Diffusers pipeline behind the server: one generation at a time, in arrival order.

The pipeline is called exactly as run_with_diffusers.ipynb calls it (`helpers.with_diffusers.calls.generate`, the
same prompt text and negative prompt), and media are written with `helpers.media`, so the same seed and settings give
the same frames through either notebook.
"""

from __future__ import annotations

import io
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import HTTPException

from cookbook_tools import pipelines
from cookbook_tools.pipelines import load_pipeline
from helpers import environment, media
from helpers.with_diffusers import calls
from helpers.with_diffusers.loading import Checkpoint
from omni_standin.forms import GenerationRequest

if TYPE_CHECKING:
    from collections.abc import Callable

    from diffusers import Cosmos3OmniPipeline


class JobCancelled(Exception):
    """Raised from the step callback when a running job is deleted."""


@dataclass(frozen=True)
class Generated:
    """Encoded output of one request and what it cost."""

    data: list[bytes]
    seconds: float
    peak_memory_mb: float
    width: int
    height: int
    num_frames: int
    fps: float

    @property
    def stage_durations(self) -> dict[str, float]:
        return {"diffusion": round(self.seconds, 3)}


class DiffusersEngine:
    """Owns the pipeline and a single worker thread; `submit` queues work first in, first out."""

    def __init__(self, pipe: Cosmos3OmniPipeline, checkpoint: Checkpoint):
        self.pipe = pipe
        self.checkpoint = checkpoint
        self.sample_rate = calls.sample_rate(pipe)
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="generation")

    @classmethod
    def load(
        cls, model: str, *, device: str = "auto", guardrails: str | bool | None = "auto", speed: str = "none"
    ) -> DiffusersEngine:
        pipe, checkpoint = load_pipeline(model, device=device, guardrails=guardrails, speed=speed)
        return cls(pipe, checkpoint)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        return self._worker.submit(fn, *args)

    def shutdown(self) -> None:
        self._worker.shutdown(wait=False, cancel_futures=True)

    def _call(self, request: GenerationRequest, cancel: threading.Event | None = None, generator: Any = None) -> Any:
        if request.image is not None and request.video is not None:
            raise HTTPException(400, "This diffusion model does not support mixed image and video references.")
        return pipelines.generate(
            self.pipe,
            request.prompt,
            request.settings,
            negative_prompt=request.negative_prompt,
            image=request.image,
            video=request.video,
            condition_frame_indexes=request.condition_frame_indexes,
            condition_video_keep=request.condition_video_keep,
            resolution_template=request.resolution_template,
            duration_template=request.duration_template,
            safety_check=request.safety_check,
            generator=generator,
            on_step_end=_stop_when(cancel) if cancel is not None else None,
        )

    def video(
        self,
        request: GenerationRequest,
        target: Path | None = None,
        on_started: Callable[[], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> Generated:
        """Generate and encode an H.264 MP4 (AAC sound muxed in when asked); written to `target` if given."""
        if on_started is not None:
            on_started()
        s = request.settings
        environment.peak_memory_gib(reset=True)
        start = time.perf_counter()
        output = self._call(request, cancel)
        seconds = time.perf_counter() - start
        sound = output.sound if s.enable_sound else None
        with tempfile.TemporaryDirectory() as folder:
            path = target or Path(folder) / "video.mp4"
            media.write_video(
                path,
                output.video,
                s.fps,
                audio=sound,
                sample_rate=self.sample_rate,
                audio_duration_s=request.sound_duration_s,
            )
            data = b"" if target else path.read_bytes()
        frames = media.to_uint8_frames(output.video)
        return Generated(
            [data], seconds, environment.peak_memory_gib() * 1024, frames.shape[2], frames.shape[1], len(frames), s.fps
        )

    def images(
        self,
        request: GenerationRequest,
        image_format: str,
        compression: int,
        cancel: threading.Event | None = None,
    ) -> Generated:
        """`n` images from one generator (each call continues its random stream), encoded as `image_format`.

        Setting `cancel` stops at the next denoising step with `JobCancelled` (the client went away).
        """
        import torch
        from PIL import Image

        environment.peak_memory_gib(reset=True)
        start = time.perf_counter()
        encoded: list[bytes] = []
        width = height = 0
        generator = torch.Generator("cpu").manual_seed(request.settings.seed)
        for _ in range(request.n):
            output = self._call(request, cancel, generator=generator)
            pixels = media.to_uint8_frames(output.video)[0]
            height, width = pixels.shape[:2]
            buffer = io.BytesIO()
            options: dict[str, Any] = (
                {"compress_level": (100 - compression) * 9 // 100}
                if image_format == "png"
                else {"quality": compression}
            )
            Image.fromarray(pixels).save(buffer, format=image_format.upper(), **options)
            encoded.append(buffer.getvalue())
        return Generated(
            encoded, time.perf_counter() - start, environment.peak_memory_gib() * 1024, width, height, 1, 0.0
        )


def _stop_when(cancel: threading.Event) -> Callable[..., dict[str, Any]]:
    def callback(_pipe: Any, _step: int, _timestep: Any, callback_kwargs: dict[str, Any]) -> dict[str, Any]:
        if cancel.is_set():
            raise JobCancelled("The request was cancelled while it ran.")
        return callback_kwargs

    return callback
