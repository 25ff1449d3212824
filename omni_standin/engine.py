"""The Diffusers pipeline behind the server: one generation at a time, in arrival order.

The pipeline is called exactly as run_with_diffusers.ipynb calls it (`helpers.with_diffusers.calls.generate`, the
same prompt text and negative prompt), and media are written with `helpers.media`, so the same seed and settings give
the same frames through either notebook.
"""

from __future__ import annotations

import concurrent.futures
import io
import logging
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
from omni_standin.limits import MAX_PROMPT_TOKENS
from omni_standin.values import check_lora

if TYPE_CHECKING:
    from collections.abc import Callable

    from diffusers import Cosmos3OmniPipeline


log = logging.getLogger("uvicorn.error")


def describe(exc: BaseException) -> str:
    """An exception's message, or its type when it has none, so no error reads "failed: " with nothing after it."""
    return str(exc) or type(exc).__name__


class JobCancelled(Exception):
    """A generation stopped at a checkpoint because its request was cancelled or the server is stopping."""

    def __init__(self, stage: str):
        super().__init__(f"The request was cancelled {stage}.")
        self.stage = stage


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
    """Owns the pipeline and a single worker thread; `submit` queues work first in, first out.

    Work stops early at checkpoints once its `cancel` event is set or `stop` is called: before it starts, at every
    frame chunk the VAE encodes or decodes, after every denoising step, and before the MP4 is encoded; only the MP4
    encoder itself cannot be interrupted.
    """

    def __init__(self, pipe: Cosmos3OmniPipeline, checkpoint: Checkpoint):
        self.pipe = pipe
        self.checkpoint = checkpoint
        self.sample_rate = calls.sample_rate(pipe)
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="generation")
        self._stopping = threading.Event()
        self._pending: set[Future[Any]] = set()
        self._lock = threading.Lock()
        self._active: threading.Event | None = None  # the cancel event of the generation running now
        # The VAE encodes and decodes a video a few frames at a time, one call of these modules each: checking
        # there makes a 720p decode (seconds on a GPU, minutes on a CPU) stoppable too.
        pipe.vae.encoder.register_forward_pre_hook(self._vae_check("while encoding its conditioning"))
        pipe.vae.decoder.register_forward_pre_hook(self._vae_check("while decoding"))
        self._counter: tuple[Any, int] | None = None  # see `_counting_tokenizer`

    @classmethod
    def load(
        cls, model: str, *, device: str = "auto", guardrails: str | bool | None = "auto", speed: str = "none"
    ) -> DiffusersEngine:
        pipe, checkpoint = load_pipeline(model, device=device, guardrails=guardrails, speed=speed)
        engine = cls(pipe, checkpoint)
        engine._counting_tokenizer()  # with the model, so that the first request does not wait for it
        return engine

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future = self._worker.submit(fn, *args)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._forget)
        return future

    @property
    def queued_or_running(self) -> int:
        with self._lock:
            return len(self._pending)

    def _forget(self, future: Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)

    def stop(self) -> None:
        """Stop the running generation at its next checkpoint, and the queued ones as they start, without waiting."""
        self._stopping.set()
        # Not cancel_futures: a cancelled future gives its waiter CancelledError, while each queued piece of work,
        # run now, raises JobCancelled at its first checkpoint, which every caller answers properly.
        self._worker.shutdown(wait=False)

    def wait_idle(self, timeout_s: float) -> bool:
        """Whether the worker finished everything it had within `timeout_s`."""
        with self._lock:
            pending = list(self._pending)
        return not concurrent.futures.wait(pending, timeout=timeout_s).not_done

    def _vae_check(self, stage: str) -> Callable[..., None]:
        def hook(_module: Any, _args: Any) -> None:
            if self._active is not None:
                self._check(self._active, stage)

        return hook

    def _check(self, cancel: threading.Event | None, stage: str) -> None:
        if self._stopping.is_set() or (cancel is not None and cancel.is_set()):
            raise JobCancelled(stage)

    def _counting_tokenizer(self) -> tuple[Any, int]:
        """The tokenizer whose tokens a prompt is cut to, and how many characters its longest token spans.

        The checkpoint's own, except for the tiny checkpoint: its one-token-per-byte toy stands in for Cosmos 3's
        Qwen tokenizer (a cookbook prompt is 7,000 of its tokens and under 2,000 of Qwen's), so prompts are cut
        where vLLM-Omni would cut them for Nano, and both notebooks keep seeing the same prompt.
        """
        if self._counter is None:
            if self.checkpoint.source == "tiny":
                from random_checkpoints import qwen_tokenizer

                tokenizer = qwen_tokenizer()
            else:
                tokenizer = self.pipe.text_tokenizer
            self._counter = (tokenizer, max(map(len, tokenizer.get_vocab())))
        return self._counter

    def _cut(self, text: str, field: str) -> str:
        """`text` cut to MAX_PROMPT_TOKENS tokens with a warning, as Cosmos 3 on vLLM-Omni cuts its prompts."""
        if len(text.encode()) <= MAX_PROMPT_TOKENS:
            return text  # every token covers at least one byte
        tokenizer, longest = self._counting_tokenizer()
        # The first MAX_PROMPT_TOKENS tokens lie within this many characters: the rest need not be tokenized.
        head = text[: MAX_PROMPT_TOKENS * longest]
        ids = tokenizer(head, add_special_tokens=False)["input_ids"]
        if len(ids) <= MAX_PROMPT_TOKENS and len(head) == len(text):
            return text
        log.warning(
            "Cosmos3 %s shortened to max_sequence_length: %d tokens kept of more than that.", field, MAX_PROMPT_TOKENS
        )
        return str(tokenizer.decode(ids[:MAX_PROMPT_TOKENS]))

    def _call(self, request: GenerationRequest, cancel: threading.Event | None = None, generator: Any = None) -> Any:
        if request.image is not None and request.video is not None:
            raise HTTPException(400, "This diffusion model does not support mixed image and video references.")
        check_lora(request.lora)
        if request.lora:
            log.warning("Generating without the requested LoRA adapter: the stand-in loads none.")
        self._active = cancel
        try:
            return self._generate(request, cancel, generator)
        finally:
            self._active = None

    def _generate(self, request: GenerationRequest, cancel: threading.Event | None, generator: Any) -> Any:
        return pipelines.generate(
            self.pipe,
            self._cut(request.prompt, "prompt"),
            request.settings,
            negative_prompt=self._cut(request.negative_prompt, "negative_prompt"),
            image=request.image,
            video=request.video,
            condition_frame_indexes=request.condition_frame_indexes,
            condition_video_keep=request.condition_video_keep,
            resolution_template=request.resolution_template,
            duration_template=request.duration_template,
            safety_check=request.safety_check,
            generator=generator,
            on_step_end=self._step_check(cancel) if cancel is not None else None,
        )

    def _step_check(self, cancel: threading.Event) -> Callable[..., dict[str, Any]]:
        def callback(pipe: Any, step: int, _timestep: Any, callback_kwargs: dict[str, Any]) -> dict[str, Any]:
            self._check(cancel, "while denoising")
            if step + 1 == pipe.num_timesteps:
                log.info("Denoising finished at step %d; decoding.", step + 1)
            return callback_kwargs

        return callback

    def video(
        self,
        request: GenerationRequest,
        path: Path,
        cancel: threading.Event,
        on_started: Callable[[], None] | None = None,
        read_back: bool = False,
    ) -> Generated:
        """Generate and encode an H.264 MP4 (AAC sound muxed in when asked) into `path`.

        With `read_back` the file's bytes come back in `data` and the file is removed here, in the worker, whatever
        happens: the caller may have stopped waiting (a timeout, a client that left).
        """
        try:
            return self._video(request, path, cancel, on_started, read_back)
        finally:
            if read_back:
                path.unlink(missing_ok=True)

    def _video(
        self,
        request: GenerationRequest,
        path: Path,
        cancel: threading.Event,
        on_started: Callable[[], None] | None,
        read_back: bool,
    ) -> Generated:
        self._check(cancel, "before it started")
        if on_started is not None:
            on_started()
        s = request.settings
        environment.peak_memory_gib(reset=True)
        start = time.perf_counter()
        output = self._call(request, cancel)
        seconds = time.perf_counter() - start
        self._check(cancel, "after decoding, before encoding")
        sound = output.sound if s.enable_sound else None
        media.write_video(
            path,
            output.video,
            s.fps,
            audio=sound,
            sample_rate=self.sample_rate,
            audio_duration_s=request.sound_duration_s,
        )
        frames = media.to_uint8_frames(output.video)
        return Generated(
            [path.read_bytes()] if read_back else [],
            seconds,
            environment.peak_memory_gib() * 1024,
            frames.shape[2],
            frames.shape[1],
            len(frames),
            s.fps,
        )

    def images(
        self,
        request: GenerationRequest,
        image_format: str,
        compression: int,
        cancel: threading.Event,
    ) -> Generated:
        """`n` images from one generator (each call continues its random stream), encoded as `image_format`.

        Setting `cancel` stops at the next denoising step with `JobCancelled` (the client went away).
        """
        import torch
        from PIL import Image

        self._check(cancel, "before it started")
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
