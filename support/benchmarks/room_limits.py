"""What the room limits cost and spare: the real vLLM-Omni server on `tiny`, on this machine's CPU, started as
`serve_vllm_omni.sh` starts it (the room limits on, the CPU defaults).

- An oversized request (`size=100000x96`, 9 frames, 1 step: the typo that grew an unguarded server to 11 GB) and a
  size of `0x96`: how long each 400 takes (the median of several), and the server's resident memory (its whole
  process group) before and after.
- A room: sixteen participants, each from an address of their own, send a smoke video at once while a seventeenth
  sends the typo: each one's wall time, and the typo's.
- What the middleware adds to an accepted request: a smoke video with the limits on and on a second server with
  `--room-limits off`, alternated (the median of several).

- With `--slowest`: the slowest requests the CPU limits admit, each at every limit at once (50 steps, guidance 20, the
  largest flow shift the sampler takes at 50 steps, the longest sound, a prompt and a negative prompt of a mebibyte
  each), against one limited server (or `--base-url`): how long each takes, which `max_run_s` must exceed.

    python support/benchmarks/room_limits.py [--repeats 5]
    python support/benchmarks/room_limits.py --slowest [--base-url URL --api-key KEY]

Writes support/benchmarks/results/room_limits_cpu.json (or room_limits_slowest_cpu.json).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import result_file

from helpers import environment
from local_server.server import LocalServer

RESULTS = Path(__file__).parent / "results" / "room_limits_cpu.json"
SLOWEST = Path(__file__).parent / "results" / "room_limits_slowest_cpu.json"
KEY = "benchmark-key"
SMOKE = {"model": "tiny", "prompt": "A red ball rolls.", "size": "320x192", "num_frames": "9", "fps": "24"}
SMOKE |= {"num_inference_steps": "2", "seed": "0"}
TYPO = {**SMOKE, "size": "100000x96", "num_inference_steps": "1"}


def timed(client: httpx.Client, url: str, fields: dict[str, str]) -> tuple[int, float]:
    started = time.perf_counter()
    answer = client.post(f"{url}/v1/videos/sync", data=fields, headers={"Authorization": f"Bearer {KEY}"})
    return answer.status_code, time.perf_counter() - started


def participant(url: str, index: int) -> dict[str, object]:
    fields = TYPO if index == 16 else {**SMOKE, "prompt": f"ball {index}", "seed": str(index)}
    with httpx.Client(transport=httpx.HTTPTransport(local_address=f"127.0.0.{10 + index}"), timeout=600) as client:
        status, seconds = timed(client, url, fields)
    return {"participant": index, "status": status, "seconds": round(seconds, 3)}


def _clip(frames: int, width: int, height: int) -> bytes:
    from PIL import Image

    from helpers import media

    return media.lossless_clip([Image.new("RGB", (width, height), (i * 20 % 255, 90, 160)) for i in range(frames)], 10)


def slowest_requests() -> dict[str, tuple[str, dict]]:
    """The slowest requests the CPU limits admit: at each, the picture and frames at `max_pixel_frames`, 50 steps,
    guidance 20 and flow shift 20 (21.4 is the most the sampler takes at 50 steps)."""
    at_limits = {"model": "tiny", "seed": "0", "num_inference_steps": "50", "guidance_scale": "20", "flow_shift": "20"}
    words = ("word " * 209_000)[:1_040_000]  # a prompt of a mebibyte, and a negative prompt nearly as long
    controls = {"control_type": "depth", "fps": "10"}
    return {
        "t2v 1280x720, 9 frames, 4 s of sound, 1 MiB prompts, max_sequence_length 4096": (
            "/v1/videos/sync",
            {
                "data": {
                    **at_limits,
                    "prompt": words,
                    "negative_prompt": words[:1_000_000],
                    "size": "1280x720",
                    "num_frames": "9",
                    "fps": "2.25",
                    "generate_sound": "true",
                    "extra_params": json.dumps({"max_sequence_length": 4096, "use_system_prompt": True}),
                },
                "files": {"unused": ("a.txt", b"x", "text/plain")},  # multipart: an urlencoded form is 1 MiB at most
            },
        ),
        "t2v 288x288, 100 frames, 4 s of sound": (
            "/v1/videos/sync",
            {
                "data": {
                    **at_limits,
                    "prompt": "a",
                    "size": "288x288",
                    "num_frames": "100",
                    "fps": "25",
                    "generate_sound": "true",
                }
            },
        ),
        "images 1024x1024, n=7": (
            "/v1/images/generations",
            {
                "json": {
                    "prompt": "a",
                    "size": "1024x1024",
                    "n": 7,
                    "num_inference_steps": 50,
                    "guidance_scale": 20.0,
                    "flow_shift": 20.0,
                }
            },
        ),
        "transfer depth + edge at tier 720, 9 frames, control guidance 20": (
            "/v1/videos/sync",
            {
                "data": {
                    **at_limits,
                    **controls,
                    "prompt": "a",
                    "num_frames": "9",
                    "extra_params": json.dumps(
                        {"resolution": "720", "edge": {}, "control_guidance": 20, "num_video_frames_per_chunk": 9}
                    ),
                },
                "files": {
                    "control_reference": ("depth.mp4", _clip(9, 1280, 720), "video/mp4"),
                    "input_reference": ("source.mp4", _clip(9, 1280, 720), "video/mp4"),
                },
            },
        ),
        "transfer depth + edge at tier 256, 100 frames in a chunk of 101, control guidance 20": (
            "/v1/videos/sync",
            {
                "data": {
                    **at_limits,
                    **controls,
                    "prompt": "a",
                    "num_frames": "100",
                    "extra_params": json.dumps(
                        {"resolution": "256", "edge": {}, "control_guidance": 20, "num_video_frames_per_chunk": 101}
                    ),
                },
                "files": {
                    "control_reference": ("depth.mp4", _clip(100, 320, 256), "video/mp4"),
                    "input_reference": ("source.mp4", _clip(100, 320, 256), "video/mp4"),
                },
            },
        ),
    }


def slowest(base_url: str, key: str) -> None:
    rows = []
    with httpx.Client(timeout=3600, headers={"Authorization": f"Bearer {key}"}) as client:
        for name, (route, request) in slowest_requests().items():
            started = time.perf_counter()
            answer = client.post(f"{base_url}{route}", **request)
            seconds = time.perf_counter() - started
            rows.append(
                {
                    "request": name,
                    "status": answer.status_code,
                    "seconds": round(seconds, 2),
                    "peak_memory_mb": answer.headers.get("x-peak-memory-mb"),
                }
            )
            print(rows[-1], flush=True)
    result_file.write(
        {
            "what": "the slowest requests the room limits admit (CPU defaults), on the real vLLM-Omni server on tiny",
            "machine": environment.report(),
            "requests": rows,
            "slowest_s": max(r["seconds"] for r in rows),
        },
        SLOWEST,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--slowest", action="store_true", help="time the slowest requests the limits admit")
    parser.add_argument("--base-url", help="a running server started by serve_vllm_omni.sh (with --slowest)")
    parser.add_argument("--api-key", default=KEY)
    args = parser.parse_args()
    if args.slowest:
        if args.base_url:
            return slowest(args.base_url.rstrip("/"), args.api_key)
        with LocalServer.start("tiny", api_key=KEY, flags=["--no-guardrails"], progress=False) as server:
            return slowest(server.base_url, KEY)
    flags = ["--no-guardrails"]
    with (
        LocalServer.start("tiny", api_key=KEY, flags=flags, progress=False) as limited,
        LocalServer.start("tiny", api_key=KEY, flags=[*flags, "--room-limits", "off"], progress=False) as open_,
        httpx.Client(timeout=600) as client,
    ):
        for server in (limited, open_):  # warm-up: each server's first video pays for its first call
            timed(client, server.base_url, SMOKE)
        before = limited.memory_mib()
        refused = {
            name: [timed(client, limited.base_url, fields) for _ in range(args.repeats)]
            for name, fields in (("size=100000x96", TYPO), ("size=0x96", {**SMOKE, "size": "0x96"}))
        }
        after = limited.memory_mib()
        accepted: dict[str, list[float]] = {"limits on": [], "limits off": []}
        for _ in range(args.repeats):
            accepted["limits on"].append(timed(client, limited.base_url, SMOKE)[1])
            accepted["limits off"].append(timed(client, open_.base_url, SMOKE)[1])
        with ThreadPoolExecutor(17) as pool:
            room = list(pool.map(lambda i: participant(limited.base_url, i), range(17)))
    result_file.write(
        {
            "what": "the real vLLM-Omni server on tiny with the room limits (CPU defaults), on this machine's CPU",
            "machine": environment.report(),
            "refused": {
                name: {"status": answers[0][0], "median_s": round(statistics.median(t for _, t in answers), 4)}
                for name, answers in refused.items()
            },
            "server_memory_mib": {"before": before, "after_the_refusals": after},
            "accepted_smoke_video_median_s": {k: round(statistics.median(v), 3) for k, v in accepted.items()},
            "room_of_sixteen_and_a_typo": room,
        },
        RESULTS,
    )


if __name__ == "__main__":
    main()
