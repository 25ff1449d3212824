"""Time the attention kernels Cosmos 3 Nano's generation tokens run, at the cookbook's sizes, on one GPU.

Per mode and tier (16:9; videos 189 frames): queries are the output's tokens and keys/values the text's plus the
output's (32 query heads, 8 key/value heads, head_dim 128, bf16), for the conditional pass (our prompt: 1,667 tokens
for t2v, 1,492 for t2i) and the unconditional one (389 tokens), called through diffusers' `dispatch_attention_fn`
as the pipeline calls it. Backends: `native` (PyTorch SDPA's own choice, the pipeline's default), `_native_cudnn`,
`_native_flash`, `_native_efficient`; FlashAttention-4 (`tuning.flash_attention`) eagerly and inside
`torch.compile(fullgraph=True)`; and `switch_compiled`, what the `flash_attention` switch runs in a compiled layer
(FlashAttention-4 from `MIN_QUERY_TOKENS` queries, SDPA below). Reports the median time per call (host time
included where the host is the slower side), TFLOP/s, and the largest deviation from `native`.

    python support/benchmarks/attention_kernels.py --out support/benchmarks/results/attention_h200.json
    python support/benchmarks/attention_kernels.py --table support/benchmarks/results/attention_h200.json
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from helpers import audiovisual_settings
from tuning import flash_attention

# Our prompts' lengths in Qwen tokens (gpu_benchmark.py counts them): conditional per mode, and the negative prompt.
PROMPT_TOKENS = {"t2v": 1667, "t2i": 1492}
NEGATIVE_TOKENS = 389
HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128
NATIVE = ("native", "_native_cudnn", "_native_flash", "_native_efficient")


def video_tokens(tier: str, frames: int) -> int:
    """The generation tokens of a `frames`-frame 16:9 output (1 frame: an image)."""
    width, height = audiovisual_settings.SIZES[int(tier.removesuffix("p"))]["16:9"]
    latent_frames = (frames - 1) // 4 + 1
    return latent_frames * math.ceil(height / 32) * math.ceil(width / 32)


def time_ms(fn, reps: int) -> float:
    import torch

    for _ in range(2):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def backends() -> dict[str, Any]:
    """Name -> a function (q, k, v) -> out, as the pipeline's attention calls it."""
    import torch
    from diffusers.models.attention_dispatch import dispatch_attention_fn

    def through(backend):
        return lambda q, k, v: dispatch_attention_fn(q, k, v, is_causal=False, enable_gqa=True, backend=backend)

    found = {name: through(name) for name in NATIVE}
    reason = flash_attention.unavailable_reason(torch.device("cuda"))
    if reason is None:
        op = flash_attention.attention_op()

        def fa4(q, k, v):
            return op(q, k, v, False, None)

        found["flash_attention_4"] = fa4
        found["flash_attention_4_compiled"] = torch.compile(fa4, fullgraph=True)
        # What the `flash_attention` switch runs in a compiled layer: FlashAttention-4 from MIN_QUERY_TOKENS queries.
        processor = flash_attention.FlashAttention4Processor()

        def switch(q, k, v):
            return processor.attend(q[0], k[0], v[0], is_causal=False)[None]

        found["switch_compiled"] = torch.compile(switch, fullgraph=True)
    else:
        print(f"FlashAttention-4 not timed: {reason}", flush=True)
    return found


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    torch.manual_seed(0)
    kernels = backends()
    rows = []
    shapes = [(mode, tier) for mode in args.modes.split(",") for tier in args.tiers.split(",")]
    for mode, tier in shapes:
        q_len = video_tokens(tier, args.frames if mode == "t2v" else 1)
        for name, text in (("cond", PROMPT_TOKENS[mode]), ("uncond", NEGATIVE_TOKENS)):
            kv_len = q_len + text
            q = torch.randn(1, q_len, HEADS, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
            k = torch.randn(1, kv_len, KV_HEADS, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
            v = torch.randn(1, kv_len, KV_HEADS, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
            flops = 4 * q_len * kv_len * HEADS * HEAD_DIM
            reference = kernels["native"](q, k, v)
            for backend, fn in kernels.items():
                try:
                    out = fn(q, k, v)
                    ms = time_ms(functools.partial(fn, q, k, v), args.reps)
                except Exception as error:  # a backend that refuses these shapes is a result, not a crash
                    rows.append(
                        {"mode": mode, "tier": tier, "pass": name, "backend": backend, "error": repr(error)[:300]}
                    )
                    print(json.dumps(rows[-1]), flush=True)
                    continue
                rows.append(
                    {
                        "mode": mode,
                        "tier": tier,
                        "pass": name,
                        "backend": backend,
                        "q_tokens": q_len,
                        "kv_tokens": kv_len,
                        "ms": round(ms, 3),
                        "tflops": round(flops / ms / 1e9, 1),
                        "max_abs_dev_vs_native": float((out.float() - reference.float()).abs().max()),
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
    result = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(),
        "frames": args.frames,
        "command": " ".join(sys.argv),
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(result, indent=1))
    return result


def table(path: str) -> str:
    """A markdown table of a results file: per shape, each backend's time and TFLOP/s."""
    rows = [r for r in json.loads(Path(path).read_text())["rows"] if "error" not in r]
    names = list(dict.fromkeys(r["backend"] for r in rows))
    head = "| mode | tier | pass | queries | keys | " + " | ".join(f"{n} ms (TFLOP/s)" for n in names) + " |"
    lines = [head, "|" + "---|" * (5 + len(names))]
    for shape in dict.fromkeys((r["mode"], r["tier"], r["pass"]) for r in rows):
        cells = {r["backend"]: r for r in rows if (r["mode"], r["tier"], r["pass"]) == shape}
        first = next(iter(cells.values()))
        timed = [f"{cells[n]['ms']} ({cells[n]['tflops']})" if n in cells else "" for n in names]
        lines.append(f"| {' | '.join(shape)} | {first['q_tokens']} | {first['kv_tokens']} | {' | '.join(timed)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", default="t2v,t2i", help="t2v (189-frame videos) and/or t2i (images)")
    parser.add_argument("--tiers", default="256p,480p,720p")
    parser.add_argument("--frames", type=int, default=189)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--out", default="attention_kernels.json")
    parser.add_argument("--table", metavar="JSON", help="print the markdown table of a results file")
    args = parser.parse_args(argv)
    if args.table:
        print(table(args.table))
        return
    run(args)


if __name__ == "__main__":
    main()
