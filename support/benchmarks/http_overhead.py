"""What the server costs: the same generation through the real vLLM-Omni server vs directly in-process.

Direct: the Diffusers notebook's `pipe(...)` call plus `helpers.media.write_video`. Server: the client's
`/v1/videos/sync` round trip to `vllm serve <tiny> --omni` on the same CPU (form upload, queueing, vLLM-Omni's own
Cosmos 3 pipeline in float32, its own MP4 encoder, the MP4 back). Both on the tiny
checkpoint, on the CPU, with the `smoke` t2v settings and the bundled prompt; the median of several runs after a
warm-up. Also times the whole run_with_vllm_omni.ipynb on tiny/smoke. Writes
support/benchmarks/results/http_overhead.json.

    python support/benchmarks/http_overhead.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from pathlib import Path

import result_file

from cookbook_tools import notebooks
from helpers import audiovisual_settings, media, prompts
from local_server import omni_http
from local_server.server import LocalServer
from tuning import notebook_calls
from tuning.pipelines import load_pipeline

RESULTS = Path(__file__).parent / "results" / "http_overhead.json"


def _interleaved_medians(direct, http, repeats: int) -> tuple[float, float]:
    """Alternate the two so that load from other users of the machine hits both alike."""
    direct(), http()  # warm-up: first-call allocations and caches
    times: dict[str, list[float]] = {"direct": [], "http": []}
    for _ in range(repeats):
        for name, fn in (("direct", direct), ("http", http)):
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return statistics.median(times["direct"]), statistics.median(times["http"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    s = audiovisual_settings.settings_for("t2v", "smoke", seed=0)
    text, negative = prompts.prompt_text(s), prompts.negative_prompt()
    form = {"model": "tiny", "prompt": text, **notebook_calls.omni_fields()(s, negative)}  # the notebook's fields

    pipe, _ = load_pipeline("tiny", device="cpu")
    generate = notebook_calls.define("run_with_diffusers.ipynb", pipe=pipe)["generate"]  # the notebook's own call
    with (
        tempfile.TemporaryDirectory() as folder,
        LocalServer.start("tiny", device="cpu", flags=["--no-guardrails"], progress=False) as server,
        omni_http.http_client(server.base_url) as http,
    ):

        def direct() -> None:
            output = generate(s, text, negative, enable_sound=s.enable_sound)
            media.write_video(Path(folder) / "direct.mp4", output.video, s.fps)

        direct_s, http_s = _interleaved_medians(direct, lambda: http.post("/v1/videos/sync", data=form), args.repeats)

    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        notebooks.execute(
            "run_with_vllm_omni.ipynb",
            Path(folder) / "executed.ipynb",
            {"MODEL": "tiny", "PRESET": "smoke", "BASE_URL": "auto", "OUTPUT_DIR": str(Path(folder) / "media")},
        )
        notebook_s = time.perf_counter() - start

    overhead = http_s - direct_s
    allowed = max(0.05 * direct_s, 0.100)
    result = {
        "what": "t2v, tiny checkpoint, smoke preset (160x96, 17 frames, 2 steps), CPU; medians, runs interleaved",
        "machine": {"cpu": platform.processor() or platform.machine(), "python": platform.python_version()},
        "repeats": args.repeats,
        "direct_s": round(direct_s, 3),
        "http_sync_s": round(http_s, 3),
        "overhead_s": round(overhead, 3),
        "overhead_pct": round(100 * overhead / direct_s, 1),
        "overhead_target_s": round(allowed, 3),
        "overhead_within_target": overhead <= allowed,
        "notebook_wall_s": round(notebook_s, 1),
        "notebook_target_s": 90,
        "notebook_within_target": notebook_s < 90,
    }
    result_file.write(result, RESULTS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
