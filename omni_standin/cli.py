"""`python -m omni_standin MODEL`: a local server that speaks the vLLM-Omni API, backed by Diffusers.

Flags mirror `vllm serve`: `--host` (default 127.0.0.1, so nothing outside this machine can reach it), `--port`,
`--served-model-name`, `--api-key` (or `$VLLM_API_KEY`), `--no-guardrails`, `--flow-shift`; `--device` picks the
accelerator and `--speed` one of the cookbook's SPEED choices. `/health` answers 503 until the model has loaded, then
the log prints `Application startup complete.`, as a real server does. `helpers.with_vllm_omni.local_server` starts
one in the background for a notebook or a test.
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import threading
import time
from pathlib import Path

from helpers.with_diffusers.speed import SPEEDS
from omni_standin.launcher import READY_LINE, SERVER_KEY_ENV

log = logging.getLogger("uvicorn.error")


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
    return parser


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    from omni_standin.app import ServerState, create_app
    from omni_standin.engine import DiffusersEngine

    args = build_parser().parse_args(argv)
    storage = Path(os.environ.get("VLLM_OMNI_SERVER_STORAGE__PATH") or tempfile.mkdtemp(prefix="omni-videos-"))
    storage.mkdir(parents=True, exist_ok=True)
    state = ServerState(
        served_model_name=args.served_model_name or args.model,
        storage=storage,
        api_key=args.api_key or os.environ.get(SERVER_KEY_ENV),
        default_flow_shift=args.flow_shift,
    )
    # lifespan="off": uvicorn serves (and /health answers 503) while the model loads; the ready line is ours.
    server = uvicorn.Server(uvicorn.Config(create_app(state), host=args.host, port=args.port, lifespan="off"))
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
    threading.Thread(target=load, name="load-model", daemon=True).start()
    server.run()
    if state.engine is not None:
        state.engine.shutdown()
    return 1 if failure else 0
