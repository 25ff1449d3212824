"""What the room limits cost and spare: the real vLLM-Omni server on `tiny`, on this machine's CPU, started as
`serve_vllm_omni.sh` starts it (the room limits on, the CPU defaults).

- An oversized request (`size=100000x96`, 9 frames, 1 step: the typo that grew an unguarded server to 11 GB) and a
  size of `0x96`: how long each 400 takes (the median of several), and the server's resident memory (its whole
  process group) before and after.
- A room: sixteen participants, each from an address of their own, send a smoke video at once while a seventeenth
  sends the typo: each one's wall time, and the typo's.
- What the middleware adds to an accepted request: a smoke video with the limits on and on a second server with
  `--room-limits off`, alternated (the median of several).

    python support/benchmarks/room_limits.py [--repeats 5]

Writes support/benchmarks/results/room_limits_cpu.json.
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import result_file

from helpers import environment
from local_server.server import LocalServer

RESULTS = Path(__file__).parent / "results" / "room_limits_cpu.json"
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
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
