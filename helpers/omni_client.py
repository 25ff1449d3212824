"""Client for a vLLM-Omni server (real, or the local stand-in of `helpers.serve`), for Cosmos 3 generation.

The OpenAI SDK carries every route it can (images, asynchronous video jobs, models); httpx carries the one it
has no method for (`/v1/videos/sync`). Settings come from the same `GenerationSettings` as the Diffusers
notebook and are always sent in full, so the server's own defaults never decide a generation. Every HTTP error
becomes `OmniAPIError` carrying the status and the server's own message; no answer at all becomes its subclass
`ServerUnavailableError`, whose message says how to start a server.
"""

from __future__ import annotations

import base64
import contextlib
import json
import mimetypes
import os
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from helpers import media
from helpers.errors import CookbookError, MediaError
from helpers.presets import GenerationSettings

if TYPE_CHECKING:
    from openai import OpenAI
    from openai.types import Video

    from helpers.runs import Generation, Output

# openai 2.3-2.8 send JSON when there is no file; vLLM-Omni reads only forms, so force multipart (spec §7).
MULTIPART = {"Content-Type": "multipart/form-data"}
START_HINT = (
    "Start a server, then point BASE_URL (or $OMNI_BASE_URL) at it:\n"
    "  python -m helpers.serve tiny --port 8000          # local stand-in on the Diffusers pipeline, CPU is fine\n"
    "  vllm serve nvidia/Cosmos3-Nano --omni --port 8000  # the real server on a GPU (helpers.omni_launch builds "
    "the Docker command)\n"
    "and use BASE_URL='http://127.0.0.1:8000'."
)


class OmniAPIError(CookbookError):
    """The server answered with an error status (or did not answer: `status` is None). `message` is its own."""

    def __init__(self, status: int | None, message: str, param: str | None = None, body: Any = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.body = body

    def __str__(self) -> str:
        where = f" (param: {self.param})" if self.param else ""
        return f"HTTP {self.status}: {self.message}{where}" if self.status is not None else self.message


class ServerUnavailableError(OmniAPIError):
    """Nothing answered at the base URL, or the connection dropped before a response."""

    def __init__(self, message: str):
        super().__init__(None, message)


def error_from_body(status: int, body: Any) -> OmniAPIError:
    """Read vLLM's `{"error": {...}}`, a failed job's `error`, FastAPI's `{"detail": ...}` or plain text."""
    if isinstance(body, dict) and "error" in body:
        inner = body["error"]
        if isinstance(inner, dict):
            return OmniAPIError(status, str(inner.get("message", inner)), inner.get("param"), body)
        return OmniAPIError(status, str(inner), None, body)
    if isinstance(body, dict) and "message" in body:  # the SDK hands over the inner error object
        return OmniAPIError(status, str(body["message"]), body.get("param"), body)
    if isinstance(body, dict) and "detail" in body:
        return OmniAPIError(status, str(body["detail"]), None, body)
    text = body if isinstance(body, str) else json.dumps(body)
    return OmniAPIError(status, text or f"HTTP {status} with an empty body", None, body)


def _error_from_response(response: httpx.Response) -> OmniAPIError:
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    return error_from_body(response.status_code, body)


def _unavailable(base_url: str, exc: BaseException) -> ServerUnavailableError:
    if isinstance(exc, httpx.ConnectError | ConnectionRefusedError) or "connect" in type(exc).__name__.lower():
        return ServerUnavailableError(f"No server answered at {base_url} ({exc}).\n{START_HINT}")
    return ServerUnavailableError(
        f"The server at {base_url} dropped the connection before answering ({type(exc).__name__}: {exc}). "
        "It may have stopped or crashed: check its log, restart it, and send the request again."
    )


@contextlib.contextmanager
def api_errors(base_url: str) -> Iterator[None]:
    """Turn OpenAI SDK and httpx failures into `OmniAPIError` / `ServerUnavailableError`."""
    import openai

    try:
        with warnings.catch_warnings():
            # openai warns that *its* hosted video API will close; a vLLM-Omni server is not affected.
            warnings.filterwarnings("ignore", message="The Sora API", category=DeprecationWarning)
            yield
    except openai.APIStatusError as exc:
        raise error_from_body(exc.status_code, exc.body) from exc
    except openai.APIConnectionError as exc:
        raise _unavailable(base_url, exc.__cause__ or exc) from exc
    except httpx.TransportError as exc:
        raise _unavailable(base_url, exc) from exc


def video_fields(
    settings: GenerationSettings,
    negative_prompt: str = "",
    *,
    extra_params: dict[str, Any] | None = None,
) -> dict[str, str]:
    """The form fields of a video request: every setting, so nothing falls to the server's defaults."""
    fields = {
        "size": settings.size,
        "num_frames": str(settings.num_frames),
        "fps": str(settings.fps),
        "seed": str(settings.seed),
        "num_inference_steps": str(settings.num_inference_steps),
        "guidance_scale": str(settings.guidance_scale),
        "flow_shift": str(settings.flow_shift),
        "negative_prompt": negative_prompt,
        "generate_sound": "true" if settings.enable_sound else "false",
    }
    if extra_params:
        # A JSON string: the SDK would flatten a dict into `extra_params[key]` fields the server ignores.
        fields["extra_params"] = json.dumps(extra_params)
    return fields


def image_fields(
    settings: GenerationSettings, negative_prompt: str = "", *, extra_params: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The `extra_body` of `images.generate`: the Cosmos 3 knobs the OpenAI signature has no argument for."""
    body: dict[str, Any] = {
        "negative_prompt": negative_prompt,
        "num_inference_steps": settings.num_inference_steps,
        "guidance_scale": settings.guidance_scale,
        "flow_shift": settings.flow_shift,
        "seed": settings.seed,
    }
    if extra_params:
        body["extra_params"] = extra_params
    return body


def _upload(path: str | os.PathLike[str]) -> tuple[str, bytes, str]:
    target = Path(path).expanduser()
    if not target.is_file():
        raise MediaError(f"Conditioning file not found: {target}. Pass the path of an image or an MP4.")
    kind = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
    return target.name, target.read_bytes(), kind


@dataclass(frozen=True)
class VideoResult:
    """An MP4 from `/v1/videos/sync` and the timing headers the server sent with it."""

    data: bytes
    request_id: str
    inference_time_s: float
    peak_memory_mb: float
    stage_durations: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_response(cls, response: httpx.Response) -> VideoResult:
        headers = response.headers
        return cls(
            data=response.content,
            request_id=headers.get("x-request-id", ""),
            inference_time_s=float(headers.get("x-inference-time-s", "nan")),
            peak_memory_mb=float(headers.get("x-peak-memory-mb", "nan")),
            stage_durations=json.loads(headers.get("x-stage-durations", "{}") or "{}"),
        )


@dataclass(frozen=True)
class ImageResult:
    """A decoded image from `/v1/images/generations`, with the size and metrics the server reported."""

    data: bytes
    size: str
    output_format: str
    metrics: dict[str, Any]


class OmniClient:
    """One server: `base_url` without `/v1` (e.g. `http://127.0.0.1:8000`); `model` defaults to what it serves."""

    def __init__(self, base_url: str, *, api_key: str | None = None, model: str | None = None, timeout_s: float = 900):
        from openai import OpenAI

        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout_s)
        # Retries would resubmit generations and hide a failed job's status; the SDK needs some key either way.
        self.openai: OpenAI = OpenAI(
            base_url=f"{self.base_url}/v1", api_key=api_key or "EMPTY", max_retries=0, timeout=timeout_s
        )
        self._model = model

    def close(self) -> None:
        self.http.close()
        self.openai.close()

    def __enter__(self) -> OmniClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        with api_errors(self.base_url):
            response = self.http.request(method, path, **kwargs)
        if response.status_code >= 400:
            raise _error_from_response(response)
        return response

    @property
    def model(self) -> str:
        """The served model name, asked of `/v1/models` once; every request names it, as the server requires."""
        if self._model is None:
            self._model = self.models()[0]
        return self._model

    def health(self) -> dict[str, Any]:
        return self._request("GET", "/health").json()

    def models(self) -> list[str]:
        with api_errors(self.base_url):
            ids = [m.id for m in self.openai.models.list()]
        if not ids:
            raise OmniAPIError(200, f"The server at {self.base_url} serves no model.")
        return ids

    def generate_image(
        self,
        prompt: str,
        settings: GenerationSettings,
        negative_prompt: str = "",
        *,
        extra_params: dict[str, Any] | None = None,
    ) -> ImageResult:
        """Text to image through `images.generate` (JSON, base64 PNG back)."""
        with api_errors(self.base_url):
            response = self.openai.images.generate(
                model=self.model,
                prompt=prompt,
                size=settings.size,  # type: ignore[arg-type]  # any WIDTHxHEIGHT is accepted
                n=1,
                response_format="b64_json",
                output_format="png",
                extra_body=image_fields(settings, negative_prompt, extra_params=extra_params),
            )
        extra = response.model_extra or {}
        return ImageResult(
            data=base64.b64decode(response.data[0].b64_json or ""),
            size=str(response.size or settings.size),
            output_format=str(response.output_format or "png"),
            metrics=dict(extra.get("metrics") or {}),
        )

    def generate_video(
        self,
        prompt: str,
        settings: GenerationSettings,
        negative_prompt: str = "",
        *,
        reference: str | os.PathLike[str] | None = None,
        extra_params: dict[str, Any] | None = None,
    ) -> VideoResult:
        """Text/image/video to video through `/v1/videos/sync`: one blocking multipart POST, the MP4 back.

        `reference` is the conditioning image (i2v) or video (v2v); the server tells them apart by content.
        """
        data = {
            "model": self.model,
            "prompt": prompt,
            **video_fields(settings, negative_prompt, extra_params=extra_params),
        }
        files = {"input_reference": _upload(reference)} if reference else None
        return VideoResult.from_response(self._request("POST", "/v1/videos/sync", data=data, files=files))

    def submit_video(
        self,
        prompt: str,
        settings: GenerationSettings,
        negative_prompt: str = "",
        *,
        reference: str | os.PathLike[str] | None = None,
        extra_params: dict[str, Any] | None = None,
    ) -> Video:
        """Queue an asynchronous job with `videos.create`; returns at once with status `queued`."""
        fields = video_fields(settings, negative_prompt, extra_params=extra_params)
        size = fields.pop("size")
        upload = {"input_reference": _upload(reference)} if reference else {}
        with api_errors(self.base_url):
            return self.openai.videos.create(
                model=self.model,
                prompt=prompt,
                size=size,  # type: ignore[arg-type]
                extra_body=fields,
                **upload,  # type: ignore[arg-type]
                extra_headers=MULTIPART,
            )

    def retrieve_video(self, video_id: str) -> Video:
        """The job's state. A failed job raises `OmniAPIError` with the job's own error (the server answers 4xx/5xx)."""
        with api_errors(self.base_url):
            return self.openai.videos.retrieve(video_id)

    def wait_for_video(
        self, video_id: str, *, progress: bool = True, poll_s: float = 0.5, timeout_s: float = 3600
    ) -> Video:
        """Poll until the job completes, showing its status and elapsed time; `progress=False` shows nothing."""
        from tqdm.auto import tqdm

        deadline = time.monotonic() + timeout_s
        with tqdm(total=100, desc=video_id[:18], unit="%", disable=not progress) as bar:
            while True:
                job = self.retrieve_video(video_id)
                bar.set_postfix_str(job.status)
                bar.update(job.progress - bar.n)
                if job.status == "completed":
                    return job
                if time.monotonic() > deadline:
                    raise OmniAPIError(
                        None, f"Job {video_id} is still {job.status} after {timeout_s:.0f} s; delete it or wait longer."
                    )
                time.sleep(poll_s)

    def download_video(self, video_id: str) -> bytes:
        with api_errors(self.base_url):
            return self.openai.videos.download_content(video_id).read()

    def list_videos(self, *, limit: int = 20, order: str = "desc") -> list[Video]:
        with api_errors(self.base_url):
            return list(self.openai.videos.list(limit=limit, order=order).data)  # type: ignore[arg-type]

    def delete_video(self, video_id: str) -> bool:
        with api_errors(self.base_url):
            return bool(self.openai.videos.delete(video_id).deleted)


def wait_for_server(
    base_url: str, *, deadline_s: float = 600.0, api_key: str | None = None, poll_s: float = 0.5
) -> list[str]:
    """Poll `/health` until it answers 200, then return the model names `/v1/models` lists.

    Raises `ServerUnavailableError` naming what was last seen and how to start a server.
    """
    url = base_url.rstrip("/")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    deadline = time.monotonic() + deadline_s
    last = "no answer"
    with httpx.Client(base_url=url, headers=headers, timeout=10.0) as http:
        while True:
            try:
                response = http.get("/health")
                if response.status_code == 200:
                    break
                last = f"/health answered {response.status_code} {response.text.strip()[:200]} (still loading?)"
            except httpx.TransportError as exc:
                last = f"no answer ({type(exc).__name__})"
            if time.monotonic() > deadline:
                raise ServerUnavailableError(
                    f"No vLLM-Omni server was ready at {url} within {deadline_s:.0f} s; last: {last}.\n{START_HINT}"
                )
            time.sleep(poll_s)
        response = http.get("/v1/models")
    if response.status_code == 401:
        raise OmniAPIError(401, f"{url} requires an API key: set API_KEY (or $OMNI_API_KEY) to the server's --api-key.")
    if response.status_code >= 400:
        raise _error_from_response(response)
    return [m["id"] for m in response.json().get("data", [])]


def save_video(gen: Generation, result: VideoResult | bytes, **extra: Any) -> list[Output]:
    """Store a server's MP4 in the run; for sound, also a WAV decoded from its AAC track (as Diffusers writes)."""
    data = result.data if isinstance(result, VideoResult) else result
    if isinstance(result, VideoResult):
        extra = {"server_inference_time_s": result.inference_time_s, "request_id": result.request_id, **extra}
    outputs = gen.save_file(data, ".mp4", **extra)
    if gen.settings.enable_sound:
        mp4 = gen.run.file_for(gen.mode, ".mp4")
        audio, rate = media.read_audio(mp4)
        wav = media.write_wav(
            gen.run.file_for(gen.mode, ".wav"), media.fit_audio(audio, rate, gen.settings.duration_s), rate
        )
        outputs.append(gen.run.record(gen.mode, wav, gen.settings, gen.seconds, **{**gen.extra, **extra}))
    return outputs
