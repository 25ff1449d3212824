"""What one request may cost, checked before any work starts (docs/vllm-omni-contract.md §9).

A request over a limit is a 400 that names the limit and the server flag that raises it, answered at the form stage,
so one careless or hostile client cannot exhaust the memory or hold the only generator of a shared server. The
defaults admit everything the cookbook itself asks of a real checkpoint (up to 720p, 397 frames at 256p); a CPU
server for a room may want lower ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fastapi import HTTPException

MIB = 1024 * 1024
# vLLM-Omni's own --max-generated-image-size default (7680·4320, 8K UHD).
MAX_IMAGE_PIXELS = 7680 * 4320
# Room for the cookbook's largest videos: 720p at up to 297 frames, and the longest 4k+1 clip its presets allow at
# any tier (NVIDIA's caps: 397 at 256p, 297 at 480p, 197 at 720p).
MAX_VIDEO_PIXEL_FRAMES = 1280 * 720 * 297
MAX_NUM_FRAMES = 397
MAX_SOUND_DURATION_S = 60.0
MAX_REQUEST_BYTES = 128 * MIB
# Far larger frame rates overflow the MP4 encoder's integer time base; no video needs more than this.
MAX_FPS = 240.0
# Generations waiting or running at once: each queued one holds its decoded references in memory.
MAX_QUEUED_REQUESTS = 32
# Cosmos 3's `max_sequence_length`: vLLM-Omni cuts longer prompts to it with a warning, it does not refuse them.
MAX_PROMPT_TOKENS = 4096
# Deeper JSON is refused rather than parsed: Python's decoder and every walk over the value recurse once per level.
MAX_JSON_DEPTH = 64


@dataclass(frozen=True)
class Limits:
    """The server's limits, each set by the flag of the same name (`max_num_frames`: `--max-num-frames`)."""

    max_generated_image_size: int = MAX_IMAGE_PIXELS
    max_generated_video_size: int = MAX_VIDEO_PIXEL_FRAMES
    max_num_frames: int = MAX_NUM_FRAMES
    max_sound_duration: float = MAX_SOUND_DURATION_S
    max_reference_image_size: int = MAX_IMAGE_PIXELS
    max_request_size: int = MAX_REQUEST_BYTES
    max_queued_requests: int = MAX_QUEUED_REQUESTS

    def check_image(self, width: int, height: int) -> None:
        """vLLM-Omni's images-route check, message and all; videos get it per frame."""
        if width * height > self.max_generated_image_size:
            raise HTTPException(
                400,
                f"Requested image size {width}x{height} exceeds the maximum allowed size of "
                f"{self.max_generated_image_size} pixels. Use a smaller size or raise --max-generated-image-size.",
            )

    def check_frames(self, num_frames: float) -> None:
        if num_frames > self.max_num_frames:
            shown = f"{num_frames:.0f}" if math.isfinite(num_frames) else "unbounded"
            over(f"{shown} frames", f"{self.max_num_frames} frames", "--max-num-frames")

    def check_video(self, width: int, height: int, num_frames: int) -> None:
        self.check_image(width, height)
        if width * height * num_frames > self.max_generated_video_size:
            over(
                f"a video of {width}x{height} at {num_frames} frames ({width * height * num_frames} pixels x frames)",
                f"{self.max_generated_video_size} pixels x frames",
                "--max-generated-video-size",
            )

    def check_sound(self, seconds: float) -> None:
        if seconds > self.max_sound_duration:
            over(f"{seconds:g} s of sound", f"{self.max_sound_duration:g} s", "--max-sound-duration")

    def check_reference(self, field: str, width: int, height: int) -> None:
        if width * height > self.max_reference_image_size:
            over(
                f"{field} of {width}x{height} ({width * height} pixels)",
                f"{self.max_reference_image_size} pixels",
                "--max-reference-image-size",
            )

    def check_bytes(self, what: str, size: int) -> None:
        if size > self.max_request_size:
            over(f"{what} of {size} bytes", f"{self.max_request_size} bytes", "--max-request-size")

    def check_queue(self, waiting_or_running: int) -> None:
        """A 429 (the OpenAI SDK retries it with back-off) once the worker has as much as it may hold."""
        if waiting_or_running >= self.max_queued_requests:
            raise HTTPException(
                429,
                f"The server is busy: {waiting_or_running} generations are queued or running, its limit. Try again "
                "when one has finished, or start the server with --max-queued-requests.",
            )


def over(asked: str, limit: str, flag: str) -> None:
    raise HTTPException(
        400, f"Request exceeds a server limit: {asked} is over {limit}. Ask for less, or start the server with {flag}."
    )
