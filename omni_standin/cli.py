"""`python -m omni_standin MODEL`: a local server that speaks the vLLM-Omni API, backed by Diffusers.

Flags mirror `vllm serve`: `--host` (default 127.0.0.1, so nothing outside this machine can reach it), `--port`,
`--served-model-name`, `--api-key` (or `$VLLM_API_KEY`), `--no-guardrails`, `--flow-shift`,
`--max-generated-image-size`, `--allowed-media-domains`; `--device` picks the accelerator and `--speed` one of the
cookbook's SPEED choices; the other `--max-*` flags and `--media-fetch-timeout` are the stand-in's own limits
(`omni_standin.limits`). `/health` answers 503 until the model has loaded, then the log prints `Application startup
complete.`, as a real server does. SIGTERM or Ctrl-C stops the generation in progress at its next checkpoint, fails
the unfinished jobs and exits. `omni_standin.launcher` starts one in the background for a notebook or
a test.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

import uvicorn

from helpers.with_diffusers.speed import SPEEDS
from omni_standin import limits
from omni_standin.launcher import READY_LINE, SERVER_KEY_ENV

if TYPE_CHECKING:
    from omni_standin.engine import DiffusersEngine
    from omni_standin.storage import Storage

log = logging.getLogger("uvicorn.error")
# After a stop signal: how long requests in flight may take to answer, then how long the worker may take to reach
# its next checkpoint; together well under the 10 s a process manager usually allows before SIGKILL.
GRACEFUL_S = 4.0
WORKER_STOP_S = 4.0


def _positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        value = kind(text)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its error message
    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m omni_standin", description=__doc__.splitlines()[0])
    parser.add_argument("model", help="Hugging Face id, local checkpoint folder, or 'tiny'")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--served-model-name", default=None, help="name in /v1/models (default: MODEL)")
    parser.add_argument("--api-key", default=None, help="require `Authorization: Bearer KEY` on /v1/*")
    parser.add_argument("--no-guardrails", action="store_true", help="never load the guardrail models")
    parser.add_argument("--flow-shift", type=float, default=None, help="default flow shift for video requests")
    parser.add_argument("--device", default="auto", help="auto | cuda | cuda:N | cpu")
    parser.add_argument("--speed", default="none", choices=list(SPEEDS), help="the cookbook's speed/memory switches")
    limit = parser.add_argument_group("limits (a request over one is a 400 naming its flag)")
    int_, float_ = _positive(int), _positive(float)
    limit.add_argument(
        "--max-generated-image-size",
        type=int_,
        default=limits.MAX_IMAGE_PIXELS,
        help="pixels of an image or video frame (default: %(default)s)",
    )
    limit.add_argument(
        "--max-generated-video-size",
        type=int_,
        default=limits.MAX_VIDEO_PIXEL_FRAMES,
        help="width x height x frames of a video (default: %(default)s, 720p at 297 frames)",
    )
    limit.add_argument(
        "--max-num-frames", type=int_, default=limits.MAX_NUM_FRAMES, help="frames of a video (default: %(default)s)"
    )
    limit.add_argument(
        "--max-sound-duration",
        type=float_,
        default=limits.MAX_SOUND_DURATION_S,
        help="seconds of sound (default: %(default)s)",
    )
    limit.add_argument(
        "--max-reference-image-size",
        type=int_,
        default=limits.MAX_IMAGE_PIXELS,
        help="pixels of a conditioning image or reference-video frame (default: %(default)s)",
    )
    limit.add_argument(
        "--max-request-size",
        type=int_,
        default=limits.MAX_REQUEST_BYTES,
        help="bytes of a request body, and of a reference download (default: %(default)s)",
    )
    limit.add_argument(
        "--max-queued-requests",
        type=int_,
        default=limits.MAX_QUEUED_REQUESTS,
        help="generations queued or running at once; more are a 429 (default: %(default)s)",
    )
    limit.add_argument(
        "--allowed-media-domains",
        nargs="+",
        default=[],
        metavar="HOST",
        help="fetch reference URLs from these hosts only, private addresses included (default: any public host)",
    )
    limit.add_argument(
        "--media-fetch-timeout",
        type=float_,
        default=30.0,
        help="seconds for a whole reference download (default: %(default)s)",
    )
    return parser


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv: list[str] | None = None) -> int:
    from omni_standin.app import ServerState, create_app
    from omni_standin.engine import DiffusersEngine
    from omni_standin.references import FetchPolicy
    from omni_standin.storage import Storage

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        storage = Storage.from_environment()
    except ValueError as exc:
        parser.error(str(exc))
    api_key = args.api_key or os.environ.get(SERVER_KEY_ENV)
    state = ServerState(
        served_model_name=args.served_model_name or args.model,
        storage=storage,
        api_key=api_key,
        default_flow_shift=args.flow_shift,
        limits=limits.Limits(
            max_generated_image_size=args.max_generated_image_size,
            max_generated_video_size=args.max_generated_video_size,
            max_num_frames=args.max_num_frames,
            max_sound_duration=args.max_sound_duration,
            max_reference_image_size=args.max_reference_image_size,
            max_request_size=args.max_request_size,
            max_queued_requests=args.max_queued_requests,
        ),
        fetch_policy=FetchPolicy(frozenset(h.lower() for h in args.allowed_media_domains), args.media_fetch_timeout),
    )

    def stop_work() -> None:
        log.info("Shutting down: stopping the generation in progress and failing unfinished jobs.")
        state.jobs.fail_unfinished()
        if state.engine is not None:
            state.engine.stop()

    config = uvicorn.Config(
        create_app(state), host=args.host, port=args.port, lifespan="off", timeout_graceful_shutdown=GRACEFUL_S
    )
    # lifespan="off": uvicorn serves (and /health answers 503) while the model loads; the ready line is ours.
    server = _Server(config, stop_work)
    failure: list[BaseException] = []

    def load() -> None:
        try:
            engine = DiffusersEngine.load(
                args.model, device=args.device, guardrails=False if args.no_guardrails else "auto", speed=args.speed
            )
        except Exception as exc:
            failure.append(exc)
            log.error("Could not load %s: %s", args.model, exc)
            server.should_exit = True
            return
        while not server.started and not server.should_exit:
            time.sleep(0.05)
        state.engine = engine
        log.info(READY_LINE)

    log.info("Starting vLLM-Omni stand-in API server (pure diffusion mode) on http://%s:%d", args.host, args.port)
    if not api_key and not _is_loopback(args.host):
        log.warning(
            "Serving on %s without --api-key: anyone who can reach this address can generate and delete videos. "
            "Start the server with --api-key KEY (or set %s).",
            args.host,
            SERVER_KEY_ENV,
        )
    threading.Thread(target=load, name="load-model", daemon=True).start()
    storage.start_sweeper()
    # uvicorn raises a stop signal again once it has shut down. As KeyboardInterrupt, Python's own answer to
    # SIGINT, it lets the cleanup below run before the process ends; the default action for SIGTERM would not.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        server.run()
    finally:
        _clean_up(state.engine, storage)
    return 1 if failure else 0


def _clean_up(engine: DiffusersEngine | None, storage: Storage) -> None:
    if engine is not None:
        engine.stop()
    idle = engine is None or engine.wait_idle(WORKER_STOP_S)
    storage.close()
    if not idle:
        # The worker is inside a step that cannot be interrupted (the MP4 encoder, a long denoising step); the
        # interpreter would wait for it at exit, for minutes perhaps.
        log.error("The generation in progress did not stop within %.0f s; exiting without it.", WORKER_STOP_S)
        os._exit(1)


class _Server(uvicorn.Server):
    """uvicorn's server, which also tells the app the moment a stop signal arrives: uvicorn alone would wait for the
    requests in flight, and a generation can take minutes."""

    def __init__(self, config: uvicorn.Config, on_stop: Callable[[], None]):
        super().__init__(config)
        self.on_stop = on_stop

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if not self.should_exit:
            try:
                # The signal interrupts whatever the event loop was doing: act on the loop's next turn instead.
                asyncio.get_running_loop().call_soon_threadsafe(self.on_stop)
            except RuntimeError:  # no loop yet or any more
                self.on_stop()
        super().handle_exit(sig, frame)
