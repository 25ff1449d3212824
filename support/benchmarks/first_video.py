"""Time from nothing to the first video on each route, and what a shared server does with several clients at once.

Diffusers: a fresh Python process imports the libraries, resolves MODEL, loads it with `from_pretrained`, moves it
to the device and makes one text-to-video (the notebook's cells, through `tuning.pipelines`). vLLM-Omni:
the real server (`vllm serve MODEL --omni`, as the notebook starts it) is started, waited for until ready, and sent
the same request over HTTP. Then
four clients send a job each at the same time; each one's total by its own clock, the job record's
`inference_time_s` (from the moment the server accepted the job) and its `stage_durations` are recorded.
Results: support/benchmarks/results/first_video_<device>.json.

    python support/benchmarks/first_video.py                                   # tiny checkpoint, smoke preset, CPU
    python support/benchmarks/first_video.py --model nano-random --preset draft --speed fast --device cuda --tier 256p
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import result_file

RESULTS = Path(__file__).parent / "results"
DIFFUSERS_RUN = """
import json, sys, time
started = time.perf_counter()
import torch, diffusers
from tuning.pipelines import load_pipeline, notebook_call
from helpers import audiovisual_settings, prompts
imported = time.perf_counter()
model, preset, speed, device, tier = sys.argv[1:6]
pipe, checkpoint = load_pipeline(model, device=device, speed=speed)
loaded = time.perf_counter()
s = audiovisual_settings.settings_for("t2v", preset, tier=int(tier.removesuffix("p") or 0) or None)
notebook_call(pipe)(s, prompts.prompt_text(s), prompts.negative_prompt())  # the notebook's own call
done = time.perf_counter()
print(json.dumps({"import_s": imported - started, "load_s": loaded - imported, "first_video_s": done - loaded}))
"""


def diffusers_route(args: argparse.Namespace) -> dict[str, float]:
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", DIFFUSERS_RUN, args.model, args.preset, args.speed, args.device, args.tier],
        capture_output=True,
        text=True,
        check=True,
    )
    parts = json.loads(out.stdout.strip().splitlines()[-1])
    return {**{k: round(v, 2) for k, v in parts.items()}, "total_s": round(time.perf_counter() - started, 2)}


async def _clients(base_url: str, settings, count: int) -> list[dict[str, float]]:
    import dataclasses

    import openai

    from helpers import prompts
    from local_server import omni_http
    from tuning.notebook_calls import omni_fields

    async def one(client: openai.AsyncOpenAI, index: int) -> dict[str, float]:
        started = time.perf_counter()
        fields = omni_fields()(dataclasses.replace(settings, seed=settings.seed + index))  # the notebook's fields
        job = await client.videos.create(
            model=(await client.models.list()).data[0].id,
            prompt=prompts.prompt_text(settings),
            size=fields.pop("size"),
            extra_body=fields,
            extra_headers=omni_http.MULTIPART,
        )
        while job.status in ("queued", "in_progress"):
            await asyncio.sleep(0.05)
            job = await client.videos.retrieve(job.id)
        await client.videos.delete(job.id)
        stages = job.model_extra["stage_durations"]
        return {
            "client": index,
            "total_s": round(time.perf_counter() - started, 2),
            "server_s": round(float(job.model_extra["inference_time_s"]), 3),
            "queue_wait_s": round(stages["queue_wait_ms"] / 1000, 3),
            "generation_stage_s": round(stages["stage_0_gen_ms"] / 1000, 3),
        }

    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="EMPTY", max_retries=0)
    try:
        return list(await asyncio.gather(*(one(client, i) for i in range(count))))
    finally:
        await client.close()


def vllm_omni_route(args: argparse.Namespace) -> tuple[dict[str, float], list[dict[str, float]]]:
    from helpers import audiovisual_settings, prompts
    from local_server import omni_http
    from local_server.server import LocalServer, server_flags
    from tuning.notebook_calls import omni_fields

    s = audiovisual_settings.settings_for("t2v", args.preset, tier=int(args.tier.removesuffix("p") or 0) or None)
    started = time.perf_counter()
    flags = server_flags(args.model, "auto", args.speed)
    with LocalServer.start(args.model, device=args.device, flags=flags, progress=False) as server:
        ready = time.perf_counter()
        with omni_http.http_client(server.base_url) as http:
            form = {
                "model": args.model,
                "prompt": prompts.prompt_text(s),
                **omni_fields()(s, prompts.negative_prompt()),  # the vLLM-Omni notebook's own fields
            }
            http.post("/v1/videos/sync", data=form)
        done = time.perf_counter()
        clients = asyncio.run(_clients(server.base_url, s, args.clients))
    route = {
        "server_ready_s": round(ready - started, 2),
        "first_video_s": round(done - ready, 2),
        "total_s": round(done - started, 2),
    }
    return route, clients


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--preset", default="smoke")
    parser.add_argument("--tier", default="")
    parser.add_argument("--speed", default="none")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--routes", default="diffusers,vllm_omni", help="which routes to time")
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    routes = args.routes.split(",")
    diffusers = diffusers_route(args) if "diffusers" in routes else {}  # first: the server would warm its caches
    route, clients = vllm_omni_route(args) if "vllm_omni" in routes else ({}, [])
    result = {
        "what": f"t2v, MODEL={args.model}, PRESET={args.preset}, TIER={args.tier or 'preset'}, SPEED={args.speed}, "
        f"{args.device}; fresh processes",
        "machine": {"cpu": platform.processor() or platform.machine(), "python": platform.python_version()},
        "diffusers": diffusers,
        "vllm_omni": route,
        "clients_at_once": clients,
    }
    result_file.write(result, Path(args.out) if args.out else RESULTS / f"first_video_{args.device}.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
