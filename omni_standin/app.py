"""The FastAPI app: the routes of a `vllm serve <model> --omni` server for Cosmos 3 (contract §2).

The contract is docs/vllm-omni-contract.md; its §9 says what this server leaves out.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import io
import json
import logging
import os
import secrets
import threading
import time
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from omni_standin.engine import DiffusersEngine, Generated, JobCancelled, describe
from omni_standin.envelope import error_response, register_handlers
from omni_standin.forms import (
    GenerationRequest,
    ImageRequest,
    VideoUpload,
    check_model,
    image_format,
    image_generation_request,
    require_json,
    video_form,
)
from omni_standin.jobs import VideoJobs, failure_status
from omni_standin.limits import Limits
from omni_standin.references import FetchPolicy
from omni_standin.storage import Storage

SYNC_TIMEOUT_ENV = "VLLM_OMNI_VIDEO_SYNC_TIMEOUT"
log = logging.getLogger("uvicorn.error")  # the server log's own stream, as in omni_standin.cli
IMAGE_MEDIA_TYPES = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}


@dataclass
class ServerState:
    """What the routes share. `engine` stays None until the model has loaded (then /health turns 200)."""

    served_model_name: str
    storage: Storage
    api_key: str | None = None
    default_flow_shift: float | None = None
    limits: Limits = field(default_factory=Limits)
    fetch_policy: FetchPolicy = field(default_factory=FetchPolicy)
    engine: DiffusersEngine | None = None
    created: int = field(default_factory=lambda: int(time.time()))
    jobs: VideoJobs = field(init=False)

    def __post_init__(self) -> None:
        self.jobs = VideoJobs(self.storage)

    def ready_engine(self) -> DiffusersEngine:
        if self.engine is None:
            raise HTTPException(503, "No engine initialized")
        return self.engine

    def engine_with_room(self) -> DiffusersEngine:
        """The engine, for a route that will queue a generation on it: refused at once when its queue is full."""
        engine = self.ready_engine()
        self.limits.check_queue(engine.queued_or_running)
        return engine

    async def video_request(self, upload: VideoUpload) -> GenerationRequest:
        """The form stage of both video routes: limits first, then the references, then the settings."""
        upload.check_limits(self.limits)
        image, video = await upload.conditioning(self.limits, self.fetch_policy, self.storage.partial)
        return upload.generation_request(self.default_flow_shift, self.limits, image, video)


def _model_card(state: ServerState) -> dict[str, Any]:
    return {
        "id": state.served_model_name,
        "object": "model",
        "created": state.created,
        "owned_by": "vllm",
        "root": state.served_model_name,
        "parent": None,
        "max_model_len": None,
        "permission": [
            {
                "id": f"modelperm-{uuid.uuid4().hex}",
                "object": "model_permission",
                "created": state.created,
                "allow_create_engine": False,
                "allow_sampling": True,
                "allow_logprobs": True,
                "allow_search_indices": False,
                "allow_view": True,
                "allow_fine_tuning": False,
                "organization": "*",
                "group": None,
                "is_blocking": False,
            }
        ],
    }


def _sync_timeout_s() -> float:
    return float(os.environ.get(SYNC_TIMEOUT_ENV, "600.0"))


class BearerTokenMiddleware:
    """As in vLLM: with --api-key only /v1/* is guarded; /health stays open for probes.

    A plain ASGI middleware rather than `@app.middleware("http")`: Starlette's BaseHTTPMiddleware hides the client's
    disconnect from the route, and the generation routes must see it to cancel their work.
    """

    def __init__(self, app: ASGIApp, api_key: str):
        self.app = app
        self.key = api_key.encode()

    def authorized(self, header: bytes) -> bool:
        scheme, _, token = header.strip().partition(b" ")
        # The scheme is case-insensitive (RFC 9110 §11.1); compare_digest's time does not depend on how much of the
        # key a guess gets right.
        return scheme.lower() == b"bearer" and secrets.compare_digest(token.strip(), self.key)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["path"].startswith("/v1")
            and scope["method"] != "OPTIONS"
            and not self.authorized(dict(scope["headers"]).get(b"authorization", b""))
        ):
            await JSONResponse({"error": "Unauthorized"}, status_code=401)(scope, receive, send)
            return
        await self.app(scope, receive, send)


class BodyLimitMiddleware:
    """Refuses a request body over --max-request-size: at once when its Content-Length says so, else as it arrives."""

    def __init__(self, app: ASGIApp, limits: Limits):
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        try:
            if declared.isdigit():
                self.limits.check_bytes("request body", int(declared))
        except HTTPException as exc:
            await error_response(str(exc.detail), 400)(scope, receive, send)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            self.limits.check_bytes("request body", received)  # the route's body parsing re-raises it as a 400
            return message

        await self.app(scope, counted, send)


async def _cancel_on_disconnect(request: Request, cancel: threading.Event, poll_s: float = 0.2) -> None:
    while not await request.is_disconnected():
        await asyncio.sleep(poll_s)
    cancel.set()


def _stopped(engine: DiffusersEngine, what: str) -> Response:
    """The answer for a generation stopped early: the server is going down (503), or the client left."""
    if engine.stopping:
        raise HTTPException(503, "The server is shutting down; the generation was stopped.")
    log.info("%s generation cancelled: the client disconnected.", what)
    return Response(status_code=499)  # nginx's "client closed request": nobody is left to read it


async def _generate(
    engine: DiffusersEngine,
    what: str,
    work: Callable[[], Generated],
    cancel: threading.Event,
    http_request: Request,
    timeout_s: float | None = None,
) -> Generated | Response:
    """Run `work` on the engine's worker and answer for it as vLLM-Omni's generation routes do.

    As vLLM-Omni's @with_cancellation, a client that hangs up sets `cancel`, so it does not keep the model busy.
    """
    watcher = asyncio.create_task(_cancel_on_disconnect(http_request, cancel))
    future = asyncio.wrap_future(engine.submit(work))
    try:
        if timeout_s is None:
            return await future
        return await asyncio.wait_for(asyncio.shield(future), timeout_s)
    except TimeoutError:
        cancel.set()  # nobody will receive the result: free the generator for the next request
        raise HTTPException(504, f"{what} generation timed out after {timeout_s}s.") from None
    except JobCancelled:
        return _stopped(engine, what)
    except HTTPException:
        raise
    except Exception as exc:
        raise HTTPException(500, f"{what} generation failed: {describe(exc)}") from exc
    finally:
        watcher.cancel()


def create_app(state: ServerState) -> FastAPI:
    app = FastAPI(title="Cosmos 3 vLLM-Omni stand-in")
    app.state.omni = state
    register_handlers(app)
    jobs = state.jobs

    app.add_middleware(BodyLimitMiddleware, limits=state.limits)
    if state.api_key:
        app.add_middleware(BearerTokenMiddleware, api_key=state.api_key)  # added last, so it runs first

    @app.get("/health")
    async def health() -> JSONResponse:
        if state.engine is None:
            return JSONResponse({"status": "unhealthy", "reason": "No engine initialized"}, status_code=503)
        return JSONResponse({"status": "healthy"})

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [_model_card(state)]}

    @app.post("/v1/images/generations", dependencies=[Depends(require_json)], response_model=None)
    async def generate_images(body: ImageRequest, http_request: Request) -> Response | dict[str, Any]:
        engine = state.engine_with_room()
        check_model(body.model, state.served_model_name)
        request = image_generation_request(body, state.limits)
        fmt = image_format(body.output_format)
        cancel = threading.Event()
        work = functools.partial(engine.images, request, fmt, body.output_compression, cancel)
        result = await _generate(engine, "Image", work, cancel, http_request)
        if isinstance(result, Response):
            return result
        if body.response_format == "file":
            return _image_file(result, fmt)
        return {
            "created": int(time.time()),
            "data": [
                {"b64_json": base64.b64encode(data).decode("ascii"), "url": None, "revised_prompt": None}
                for data in result.data
            ],
            "output_format": fmt,
            "size": f"{result.width}x{result.height}",
            "cot_output": None,
            "metrics": {"stage_durations": result.stage_durations, "peak_memory_mb": result.peak_memory_mb},
        }

    @app.post("/v1/videos/sync", response_model=None)
    async def create_video_sync(upload: Annotated[VideoUpload, Depends(video_form)], http_request: Request) -> Response:
        engine = state.engine_with_room()
        check_model(upload.form.model, state.served_model_name)
        try:
            request = await state.video_request(upload)
        except ValueError as exc:
            raise HTTPException(500, f"Video generation failed: {describe(exc)}") from None
        cancel = threading.Event()
        path = state.storage.partial_path(f"video_sync-{uuid.uuid4().hex}.mp4")
        work = functools.partial(engine.video, request, path, cancel, read_back=True)
        result = await _generate(engine, "Video", work, cancel, http_request, timeout_s=_sync_timeout_s())
        if isinstance(result, Response):
            return result
        return Response(
            result.data[0],
            media_type="video/mp4",
            headers={
                "X-Request-Id": f"video_sync-{uuid.uuid4()}",
                "X-Model": state.served_model_name,
                "X-Inference-Time-S": f"{result.seconds:.3f}",
                "X-Stage-Durations": _compact_json(result.stage_durations),
                "X-Peak-Memory-MB": f"{result.peak_memory_mb:.3f}",
            },
        )

    @app.post("/v1/videos")
    async def create_video(upload: Annotated[VideoUpload, Depends(video_form)]) -> dict[str, Any]:
        engine = state.engine_with_room()
        check_model(upload.form.model, state.served_model_name)
        request = await state.video_request(upload)
        return jobs.create(engine, upload.form, request, state.served_model_name).record

    @app.get("/v1/videos")
    async def list_videos(
        after: str | None = None,
        limit: Annotated[int, Query(ge=0, le=100)] = 20,
        order: Annotated[str, Query(pattern="^(asc|desc)$")] = "desc",
    ) -> dict[str, Any]:
        return jobs.page(after, limit, order)

    @app.get("/v1/videos/{video_id}")
    async def retrieve_video(video_id: str) -> JSONResponse:
        record = jobs.get(video_id).record
        if record["status"] == "failed":
            status = failure_status(record)
            return JSONResponse({**record, "error": {**record["error"], "code": status}}, status_code=status)
        return JSONResponse(record)

    @app.get("/v1/videos/{video_id}/content")
    async def video_content(video_id: str) -> FileResponse:
        return FileResponse(jobs.content_path(video_id), media_type="video/mp4", filename=f"{video_id}.mp4")

    @app.delete("/v1/videos/{video_id}")
    async def delete_video(video_id: str) -> dict[str, Any]:
        return await jobs.delete(video_id)

    return app


def _compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _image_file(result: Generated, fmt: str) -> Response:
    ext = "jpg" if fmt == "jpeg" else fmt
    tag = uuid.uuid4().hex[:8]
    if len(result.data) == 1:
        return Response(
            result.data[0],
            media_type=IMAGE_MEDIA_TYPES[fmt],
            headers={"Content-Disposition": f'attachment; filename="image_{tag}.{ext}"'},
        )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for i, data in enumerate(result.data):
            archive.writestr(f"image_{i}.{ext}", data)
    return Response(
        buffer.getvalue(),
        media_type="application/zip",
        headers={"Content-Disposition": f'attachment; filename="images_{tag}.zip"'},
    )
