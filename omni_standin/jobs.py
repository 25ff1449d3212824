"""Asynchronous video jobs (`/v1/videos`): the in-memory store and each job's lifecycle.

docs/vllm-omni-contract.md §2.5-§2.9.

A job is `queued` until the worker thread starts it, `in_progress` while it runs, then `completed` (the MP4 is in
the storage folder) or `failed` (with `error.code` the HTTP status that GET answers with).

The video is written to the storage's partial folder and renamed to `<id>.mp4` only here, on the event loop, after
the worker has finished and only if the job was not deleted meanwhile. DELETE sets the job's cancel event (the
worker stops at its next checkpoint) and waits for the job's task, so no file of a deleted job can appear later.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import HTTPException

from omni_standin.engine import DiffusersEngine, JobCancelled, describe
from omni_standin.forms import GenerationRequest, VideoRequest
from omni_standin.storage import Storage

DEFAULT_SECONDS = "4"
DEFAULT_FPS = 24.0
ABORT_TIMEOUT_S = 2.0
SHUTDOWN = "The server shut down before this job finished."
log = logging.getLogger("uvicorn.error")


@dataclass
class Job:
    record: dict[str, Any]
    cancel: threading.Event = field(default_factory=threading.Event)
    task: asyncio.Task[None] | None = None
    future: Future[Any] | None = None
    deleted: bool = False

    @property
    def id(self) -> str:
        return str(self.record["id"])


def new_record(form: VideoRequest, model: str, ttl_s: float | None) -> dict[str, Any]:
    """The `VideoResponse` of a new job: request values, or the OpenAI defaults (4 s at 24 fps)."""
    fps = form.fps or DEFAULT_FPS
    seconds = form.seconds or DEFAULT_SECONDS
    num_frames = form.num_frames if form.num_frames is not None else int(int(seconds) * fps)
    created = int(time.time())
    return {
        "id": f"video_gen_{uuid.uuid4().hex}",
        "object": "video",
        "model": model,
        "prompt": form.prompt,
        "status": "queued",
        "progress": 0,
        "size": form.size,
        "seconds": seconds,
        "quality": form.quality or "default",
        "created_at": created,
        "completed_at": None,
        "expires_at": None if ttl_s is None else created + int(ttl_s),
        "remixed_from_video_id": None,
        "error": None,
        "media_type": "video/mp4",
        "file_name": None,
        "inference_time_s": None,
        "fps": fps,
        "num_frames": num_frames,
        "duration_s": float(seconds) if form.seconds else num_frames / fps,
        "metrics": None,
        "stage_durations": {},
        "peak_memory_mb": 0.0,
        "action": None,
    }


def failure_status(record: dict[str, Any]) -> int:
    code = (record.get("error") or {}).get("code")
    return code if isinstance(code, int) and 400 <= code <= 599 else 500


class VideoJobs:
    """Jobs by id, in creation order; each runs as an asyncio task waiting on the engine's worker."""

    def __init__(self, storage: Storage):
        self.storage = storage
        self._jobs: dict[str, Job] = {}

    def _path(self, job_id: str) -> Path:
        return self.storage.path / f"{job_id}.mp4"

    def create(self, engine: DiffusersEngine, form: VideoRequest, request: GenerationRequest, model: str) -> Job:
        job = Job(new_record(form, model, self.storage.ttl_s))
        self._jobs[job.id] = job
        job.task = asyncio.get_running_loop().create_task(self._run(engine, job, request))
        return job

    async def _run(self, engine: DiffusersEngine, job: Job, request: GenerationRequest) -> None:
        record = job.record
        partial = self.storage.partial_path(f"{job.id}.mp4")

        def started() -> None:
            record["status"] = "in_progress"

        job.future = engine.submit(engine.video, request, partial, job.cancel, started)
        try:
            result = await asyncio.wrap_future(job.future)
            if job.cancel.is_set():
                raise JobCancelled("after encoding, before the video was saved")
            os.replace(partial, self._path(job.id))
        except (JobCancelled, asyncio.CancelledError) as exc:
            if isinstance(exc, JobCancelled):
                stage = exc.stage
            else:
                stage = "before it started" if job.future.cancelled() else "when the server stopped"
            self._stopped(job, stage)
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            return
        except Exception as exc:
            code, message = (
                (exc.status_code, str(exc.detail)) if isinstance(exc, HTTPException) else (500, describe(exc))
            )
            record.update(status="failed", completed_at=int(time.time()), error={"code": code, "message": message})
            return
        finally:
            partial.unlink(missing_ok=True)
        record.update(
            status="completed",
            progress=100,
            completed_at=int(time.time()),
            file_name=f"{job.id}.mp4",
            inference_time_s=round(result.seconds, 3),
            fps=float(result.fps),
            num_frames=result.num_frames,
            duration_s=result.num_frames / float(result.fps),
            stage_durations=result.stage_durations,
            peak_memory_mb=result.peak_memory_mb,
        )

    def _stopped(self, job: Job, stage: str) -> None:
        """A job whose work stopped early: deleted (its record goes), or the server is shutting down (failed)."""
        log.info("Job %s stopped %s.", job.id, stage)
        if job.deleted:
            self._forget(job.id)
        elif job.record["status"] != "failed":
            self._fail_at_shutdown(job)

    def _fail_at_shutdown(self, job: Job) -> None:
        job.record.update(status="failed", completed_at=int(time.time()), error={"code": 503, "message": SHUTDOWN})

    def _forget(self, job_id: str) -> None:
        self._jobs.pop(job_id, None)
        self._path(job_id).unlink(missing_ok=True)

    def fail_unfinished(self) -> None:
        """At shutdown: every queued or running job fails now, and its work stops at the next checkpoint."""
        for job in list(self._jobs.values()):
            if job.record["status"] in ("queued", "in_progress"):
                job.cancel.set()
                self._fail_at_shutdown(job)
                log.warning("Job %s failed: %s", job.id, SHUTDOWN)

    def get(self, job_id: str) -> Job:
        try:
            return self._jobs[job_id]
        except KeyError:
            raise HTTPException(404, "Video not found") from None

    def content_path(self, job_id: str) -> Path:
        record = self.get(job_id).record
        if record["status"] == "failed":
            raise HTTPException(422, "Video generation failed. Check job status for error details.")
        if record["status"] != "completed":
            raise HTTPException(404, "Generation is still in-progress")
        path = self._path(job_id)
        if not path.is_file():
            raise HTTPException(404, "Generated video file not found on disk")
        return path

    def page(self, after: str | None, limit: int, order: str) -> dict[str, Any]:
        jobs = sorted(self._jobs.values(), key=lambda j: j.record["created_at"])  # stable: ties keep creation order
        if order == "desc":
            jobs.reverse()
        ids = [j.id for j in jobs]
        if after is not None:
            jobs = jobs[ids.index(after) + 1 :] if after in ids else []
        data = [j.record for j in jobs[:limit]]
        return {
            "object": "list",
            "data": data,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
            "has_more": len(jobs) > limit,
        }

    async def delete(self, job_id: str) -> dict[str, Any]:
        job = self.get(job_id)
        if job.task is not None and not job.task.done():
            job.deleted = True
            job.cancel.set()
            if job.future is not None:
                job.future.cancel()  # a queued job never starts
            done, _ = await asyncio.wait({job.task}, timeout=ABORT_TIMEOUT_S + 2.0)
            if not done:
                # The worker is inside the decoder or the encoder; the job goes when it comes out.
                raise HTTPException(409, "Cancellation in progress. Please try again later.")
        self._forget(job_id)
        return {"id": job_id, "deleted": True, "object": "video.deleted"}
