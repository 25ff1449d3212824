"""One interface over the two ways to generate: the in-process Diffusers pipeline and a vLLM-Omni server.

The interactive form and the comparison view drive either through `Backend.generate`, which reports progress
through a callback and checks a stop flag, so long work can be watched and interrupted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from helpers import media, pipeline, prompts
from helpers.errors import CookbookError, InvalidSettingError
from helpers.presets import IMAGE_CONDITIONED_MODES, VIDEO_CONDITIONED_MODES, GenerationSettings

if TYPE_CHECKING:
    from diffusers import Cosmos3OmniPipeline

    from helpers.omni_client import OmniClient
    from helpers.runs import Generation

# (done, total, status): steps on Diffusers, percent on a server job.
ProgressCallback = Callable[[int, int, str], None]
StopCheck = Callable[[], bool]


class GenerationStopped(CookbookError):
    """The user pressed Stop; nothing was saved."""


@dataclass(frozen=True)
class Request:
    """One generation: the prompt text as sent, its settings, and the conditioning file for i2v / v2v."""

    mode: str
    prompt: str
    settings: GenerationSettings
    negative_prompt: str = ""
    reference: Path | None = None

    @property
    def structured(self) -> bool:
        return prompts.is_structured(self.prompt)


def build_request(
    mode: str,
    settings: GenerationSettings,
    *,
    prompt: str = "",
    reference: str | Path | None = None,
    negative_prompt: str | None = None,
) -> Request:
    """A request with the bundled prompt and conditioning of the mode wherever the caller gave none.

    A structured (JSON object) prompt gets the resolution, duration and fps of the settings written into it.
    """
    text = prompt.strip()
    if not text:
        text = prompts.prompt_text(mode, settings)
    elif prompts.is_structured(text):
        caption = prompts.with_metadata(
            json.loads(text), settings.width, settings.height, settings.num_frames, settings.fps
        )
        text = prompts.compact(caption)
    needs_reference = mode in IMAGE_CONDITIONED_MODES | VIDEO_CONDITIONED_MODES
    path = Path(reference) if reference else (prompts.conditioning(mode) if needs_reference else None)
    if path is not None and not needs_reference:
        raise InvalidSettingError(f"Mode {mode!r} takes no conditioning file; pick i2v, i2v_sound or v2v to use one.")
    return Request(
        mode=mode,
        prompt=text,
        settings=settings,
        negative_prompt=prompts.negative_prompt() if negative_prompt is None else negative_prompt,
        reference=path,
    )


class Backend(Protocol):
    name: str

    def generate(self, request: Request, gen: Generation, on_progress: ProgressCallback, stop: StopCheck) -> None:
        """Run the request and save its outputs through `gen`; raise GenerationStopped when `stop()` turns true."""


class DiffusersBackend:
    """The pipeline in this kernel; progress per denoising step through `callback_on_step_end`."""

    name = "diffusers"

    def __init__(self, pipe: Cosmos3OmniPipeline):
        self.pipe = pipe

    def generate(self, request: Request, gen: Generation, on_progress: ProgressCallback, stop: StopCheck) -> None:
        s = request.settings
        conditioning: dict[str, Any] = {}
        if request.mode in IMAGE_CONDITIONED_MODES:
            conditioning["image"] = media.load_image(request.reference)
        elif request.mode in VIDEO_CONDITIONED_MODES:
            conditioning["video"] = media.load_video(request.reference)
        kwargs = pipeline.pipe_kwargs(self.pipe, s, structured_prompt=request.structured)
        total = s.num_inference_steps
        stopped_at: list[int] = []

        def on_step_end(pipe: Any, step: int, timestep: Any, tensors: dict[str, Any]) -> dict[str, Any]:
            on_progress(step + 1, total, "denoising")
            if stop() and not stopped_at:
                stopped_at.append(step + 1)
                pipe._interrupt = True  # the pipeline skips the remaining steps when this is set
            return tensors

        on_progress(0, total, "starting")
        output = self.pipe(
            prompt=request.prompt,
            negative_prompt=request.negative_prompt,
            callback_on_step_end=on_step_end,
            **conditioning,
            **kwargs,
        )
        if stopped_at:
            raise GenerationStopped(f"Stopped after {stopped_at[0]} of {total} steps; nothing was saved.")
        on_progress(total, total, "saving")
        gen.save(output)


class OmniBackend:
    """A vLLM-Omni server: images in one call; videos as an asynchronous job whose status is polled."""

    name = "vllm-omni"

    def __init__(self, client: OmniClient, *, extra_params: dict[str, Any] | None = None, poll_s: float = 0.25):
        self.client = client
        self.extra_params = extra_params
        self.poll_s = poll_s

    def generate(self, request: Request, gen: Generation, on_progress: ProgressCallback, stop: StopCheck) -> None:
        from helpers import omni_client

        s = request.settings
        if s.is_image:
            on_progress(0, 100, "requested")
            result = self.client.generate_image(
                request.prompt, s, request.negative_prompt, extra_params=self.extra_params
            )
            on_progress(100, 100, "saving")
            gen.save_file(result.data, ".png")
            return
        job = self.client.submit_video(
            request.prompt, s, request.negative_prompt, reference=request.reference, extra_params=self.extra_params
        )
        while job.status != "completed":
            on_progress(int(job.progress or 0), 100, str(job.status))
            if stop():
                self.client.delete_video(job.id)
                raise GenerationStopped(f"Job {job.id} was cancelled on the server; nothing was saved.")
            time.sleep(self.poll_s)
            job = self.client.retrieve_video(job.id)  # a failed job raises OmniAPIError with the server's message
        on_progress(100, 100, "downloading")
        omni_client.save_video(gen, self.client.download_video(job.id), job_id=job.id)
