"""One interface over the two ways to generate: the in-process Diffusers pipeline and a vLLM-Omni server.

The interactive form and the comparison view drive either through `Backend.generate`, which reports progress
through a callback and checks a stop flag, so long work can be watched and interrupted.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from cosmos3_audiovisual import modes
from helpers import media, prompts
from helpers.audiovisual_settings import IMAGE_CONDITIONED_MODES, VIDEO_CONDITIONED_MODES, AudiovisualSettings
from helpers.errors import CookbookError, InvalidSettingError

if TYPE_CHECKING:
    from openai import OpenAI

    from helpers.runs import Generation

# (done, total, status): steps on Diffusers, percent on a server job.
ProgressCallback = Callable[[int, int, str], None]
StopCheck = Callable[[], bool]


class GenerationStopped(CookbookError):
    """The user pressed Stop; nothing was saved."""


@dataclass(frozen=True)
class Request:
    """One generation: the prompt text as sent, its settings, and its conditioning files (an image for i2v, a clip
    for v2v, the first and the last frame for fl2v)."""

    mode: str
    prompt: str
    settings: AudiovisualSettings
    negative_prompt: str = ""
    references: tuple[Path, ...] = ()


def build_request(
    mode: str,
    settings: AudiovisualSettings,
    *,
    prompt: str = "",
    references: list[Path] | tuple[Path, ...] = (),
    negative_prompt: str | None = None,
) -> Request:
    """A request with the bundled prompt and conditioning of the mode wherever the caller gave none.

    A structured (JSON object) prompt gets the resolution, duration and fps of the settings written into it.
    """
    text = prompts.with_settings(prompt.strip(), settings) if prompt.strip() else prompts.prompt_text(settings)
    wanted = 2 if mode == "fl2v" else 1 if mode in IMAGE_CONDITIONED_MODES | VIDEO_CONDITIONED_MODES else 0
    if references and len(references) != wanted:
        what = {0: "no conditioning file", 1: "one conditioning file", 2: "two images: the first and the last frame"}
        raise InvalidSettingError(f"Mode {mode!r} takes {what[wanted]}, and {len(references)} were given.")
    if not references and wanted:
        references = modes.first_and_last() if mode == "fl2v" else (modes.conditioning(mode),)
    return Request(
        mode=mode,
        prompt=text,
        settings=settings,
        negative_prompt=prompts.negative_prompt(mode) if negative_prompt is None else negative_prompt,
        references=tuple(Path(r) for r in references),
    )


def first_and_last_frames(request: Request) -> list[Any]:
    """fl2v's two images, fitted to the output size: the clip `video=` takes (padded with the last frame)."""
    s = request.settings
    return [media.fit_frame(media.load_image(path), s.width, s.height) for path in request.references]


class Backend(Protocol):
    name: str

    def generate(self, request: Request, gen: Generation, on_progress: ProgressCallback, stop: StopCheck) -> None:
        """Run the request and save its outputs through `gen`; raise GenerationStopped when `stop()` turns true."""


class DiffusersBackend:
    """The notebook's own call, `generate(s, prompt, negative_prompt, **inputs)`, whose other keywords go to
    `pipe(...)`: progress per denoising step through `callback_on_step_end`, which ends the call by raising when Stop
    is pressed."""

    name = "diffusers"

    def __init__(self, generate: Callable[..., Any]):
        self.call = generate

    def generate(self, request: Request, gen: Generation, on_progress: ProgressCallback, stop: StopCheck) -> None:
        s = request.settings
        total = s.num_inference_steps

        def on_step_end(pipe: Any, step: int, timestep: Any, tensors: dict[str, Any]) -> dict[str, Any]:
            on_progress(step + 1, total, "denoising")
            if stop():
                raise GenerationStopped(f"Stopped after {step + 1} of {total} steps; nothing was saved.")
            return tensors

        inputs: dict[str, Any] = {"enable_sound": True} if s.enable_sound else {}
        if request.mode in IMAGE_CONDITIONED_MODES:
            inputs["image"] = media.load_image(request.references[0])
        video = _video(request)
        if video is not None:
            inputs |= {"video": video, "condition_frame_indexes_vision": s.condition_frame_indexes}
        on_progress(0, total, "starting")
        output = self.call(s, request.prompt, request.negative_prompt, callback_on_step_end=on_step_end, **inputs)
        on_progress(total, total, "saving")
        gen.save(output)

    def close(self) -> None:
        """Let go of the call, and so of the pipeline it holds, so that its memory can be freed."""
        self.call = None  # type: ignore[assignment]


def _video(request: Request) -> list[Any] | None:
    if request.mode == "fl2v":
        return first_and_last_frames(request)
    return media.load_video(request.references[0]) if request.mode in VIDEO_CONDITIONED_MODES else None


class OmniBackend:
    """A vLLM-Omni server: images in one call; videos as an asynchronous job whose status is polled.

    `client` is the notebook's `openai.OpenAI`; `model` the served name; `fields` the notebook's own
    `fields(s, negative_prompt, extra_params)` (its `call` cell), which turns settings into the request's fields: the
    form sends what the notebook sends, as `DiffusersBackend` runs the notebook's own call. Server errors raise
    `OmniAPIError`.
    """

    name = "vllm-omni"

    def __init__(self, client: OpenAI, model: str, fields: Callable[..., dict[str, Any]], *, poll_s: float = 0.25):
        self.client = client
        self.model = model
        self.fields = fields
        self.poll_s = poll_s

    def generate(self, request: Request, gen: Generation, on_progress: ProgressCallback, stop: StopCheck) -> None:
        with _server_errors():
            self._generate(request, gen, on_progress, stop)

    def _generate(self, request: Request, gen: Generation, on_progress: ProgressCallback, stop: StopCheck) -> None:
        import base64
        import json

        from local_server import omni_http

        s = request.settings
        if s.is_image:
            on_progress(0, 100, "requested")
            body = self.fields(s, request.negative_prompt)
            body["extra_params"] = json.loads(body["extra_params"])  # the image route reads JSON: an object
            image = self.client.images.generate(
                model=self.model,
                prompt=request.prompt,
                size=s.size,  # type: ignore[arg-type]  # any WIDTHxHEIGHT is accepted
                n=1,
                response_format="b64_json",
                extra_body=body,
            )
            on_progress(100, 100, "saving")
            gen.save_bytes(base64.b64decode(image.data[0].b64_json or ""), ".png")
            return
        extra: dict[str, Any] = {}
        upload: dict[str, Any] = {}
        if request.mode == "fl2v":
            # The two frames as a lossless clip, with the latent frames to keep: vLLM-Omni's first-and-last recipe.
            extra["condition_frame_indexes_vision"] = list(s.condition_frame_indexes)
            clip = media.lossless_clip(first_and_last_frames(request), s.fps)
            upload["input_reference"] = ("first_last.mp4", clip, "video/mp4")
        elif request.references:
            path = request.references[0]
            upload["input_reference"] = (path.name, path.read_bytes(), "application/octet-stream")
        fields = self.fields(s, request.negative_prompt, extra or None)
        if s.enable_sound:
            fields["generate_sound"] = True  # the mode's own field, as the notebook's sound sections send it
        size = fields.pop("size")
        job = self.client.videos.create(
            model=self.model,
            prompt=request.prompt,
            size=size,  # type: ignore[arg-type]
            extra_body=fields,
            extra_headers=omni_http.MULTIPART,
            **upload,
        )
        while job.status != "completed":
            on_progress(int(job.progress or 0), 100, str(job.status))
            if stop():
                self.client.videos.delete(job.id)
                raise GenerationStopped(f"Job {job.id} was cancelled on the server; nothing was saved.")
            time.sleep(self.poll_s)
            job = self.client.videos.retrieve(job.id)  # a failed job answers with its error status, which raises
        on_progress(100, 100, "downloading")
        gen.save_bytes(self.client.videos.download_content(job.id).read(), ".mp4", job_id=job.id)

    def close(self) -> None:
        self.client = None  # type: ignore[assignment]


@contextlib.contextmanager
def _server_errors() -> Iterator[None]:
    """The OpenAI SDK's status errors as `OmniAPIError`, carrying the server's own message."""
    import openai

    from local_server.omni_http import error_from_body

    try:
        with warnings.catch_warnings():
            # openai warns that its own hosted video API will close; a vLLM-Omni server is not affected.
            warnings.filterwarnings("ignore", message="The Sora API", category=DeprecationWarning)
            yield
    except openai.APIStatusError as exc:
        raise error_from_body(exc.status_code, exc.body) from exc
