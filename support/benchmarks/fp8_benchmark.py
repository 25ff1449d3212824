"""FP8 and the 4-step checkpoints at Nano's size (random weights built on the GPU), on one H200.

Parts (`--parts`, in this order):
- `video`: text to video at `--tier` (720p), `--frames` (189). The bf16 reference as diffusers runs it (eager,
  PyTorch's SDPA) at seed S and at S+1, the seed's effect; then each FP8 switch alone, eager (`fp8_attention`, then
  `fp8_linears`, which stays), then `SPEED="fp8"` whole (compiled). Each timed over `--steps-timed` steps after a
  warm-up, extrapolated to `--steps` (35): setup + first step + (steps - 1) x median step + decode. Each video is
  compared with the reference at the same steps, seed and size: mean absolute difference of the decoded frames in
  levels of 255, and PSNR; the seed's effect is the same measure between seeds S and S+1.
- `images`: text to image at 256p, 480p and 720p, 50 steps: bf16 eager before any switch, `fp8` after `video`.
- `full`: `SPEED="fp8"` over all `--steps` on a fresh build, timed whole (no extrapolation), with its peak memory.
- `published`: the same weights in the `@fp8` revisions' format (`nano-random-fp8`: ModelOpt FP8, built and saved
  once), loaded the published way (`enable_huggingface_checkpointing()`, `from_pretrained`) and run with the
  checkpoint's own schedule over `--steps-timed` steps (8: three weight-only steps at each end, FP8 products
  between), against bf16 at the same steps; the 35-step total is extrapolated from each kind of step's median.
- `four_steps`: Nano's random weights in `Cosmos3DistilledModularPipeline` with the distilled checkpoints' scheduler
  and schedule (the transformer of the 4-step checkpoints is Super's; Nano's is what fits beside everything on one
  GPU with bf16 weights). 4-step text to image and image to video at `--tier`, each timed whole, with the share of
  the VAE decode, then again with diffusers' VAE switches: tiling, and the decoder compiled.

    python support/benchmarks/fp8_benchmark.py --parts video,images --out fp8_h200.json        # on one H200
    python support/benchmarks/fp8_benchmark.py --arch tiny --device cpu --tier 256p --frames 9 --steps 3 \\
        --steps-timed 2 --out check.json                                                      # CPU check of the script
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import gpu_benchmark
import result_file

from checkpoints import random_weights
from cosmos3_audiovisual import modes
from helpers import audiovisual_settings, media, prompts, speeds
from tuning import fp8, patches
from tuning.pipelines import applied, apply, skipped

# NVIDIA's published one-H200 Nano figures at 720p, 189 frames, 35 steps (inference_benchmarks/ in NVIDIA/cosmos).
PUBLISHED_720P = {"pytorch_fp8_s": 94.57, "nim_fp8_s": 177.23, "diffusers_fp8_s": 237.18, "pytorch_bf16_s": 214.28}
IMAGE_TIERS = ("256p", "480p", "720p")


def _levels(row: dict[str, Any], video, reference) -> None:
    """The difference of `video` from `reference` (frames in 0..1), in levels of 255, and PSNR."""
    found = gpu_benchmark.deviation(video, reference)
    row.update(mean_abs_levels=round(found["mean_abs_dev"] * 255, 3), psnr_db=found["psnr_db"])


def _timed(pipe, clock, args, mode: str, tier: str, steps: int, seed: int = gpu_benchmark.SEED, label: str = ""):
    full = 50 if mode == "t2i" else args.steps
    row, video = gpu_benchmark.generate(pipe, clock, mode, tier, args.frames, steps, full, seed=seed)
    row.update(label=label, speedups=list(applied(pipe)), skipped=list(skipped(pipe)), seed=seed)
    return row, video


def video_and_images(args, save, parts: set[str]) -> None:
    import torch

    pipe = gpu_benchmark.build_pipeline(args.arch, args.device)
    clock = gpu_benchmark.StepClock(pipe)
    n = args.steps_timed
    gpu_benchmark.generate(pipe, clock, "t2v", args.tier, args.frames, 1, 1)  # one-time CUDA set-up
    references = {}
    if "images" in parts:
        for tier in IMAGE_TIERS:
            row, image = _timed(pipe, clock, args, "t2i", tier, 50, label="bf16, eager")
            references[tier] = image
            save(row)
    row, reference = _timed(pipe, clock, args, "t2v", args.tier, n, label="bf16, eager (the reference)")
    save(row)
    row, other_seed = _timed(pipe, clock, args, "t2v", args.tier, n, gpu_benchmark.SEED + 1, "bf16, eager, seed + 1")
    _levels(row, other_seed, reference)
    save(row)  # the seed's effect

    if fp8.attention_unavailable_reason(torch.device(args.device)) is None:
        processors = [layer.self_attn.processor for layer in pipe.transformer.layers]
        patches.use_fp8_attention(pipe)
        gpu_benchmark.generate(pipe, clock, "t2v", args.tier, args.frames, 1, 1)
        row, video = _timed(pipe, clock, args, "t2v", args.tier, n, label="fp8_attention alone, eager")
        _levels(row, video, reference)
        save(row)
        for layer, processor in zip(pipe.transformer.layers, processors, strict=True):
            layer.self_attn.set_processor(processor)
    apply(pipe, ["fp8_linears"])
    row, video = _timed(pipe, clock, args, "t2v", args.tier, n, label="fp8_linears alone, eager")
    _levels(row, video, reference)
    save(row)
    apply(pipe, speeds.switches("fp8_attention", "tuning"))
    started = time.perf_counter()
    gpu_benchmark.generate(pipe, clock, "t2v", args.tier, args.frames, 2, 2)  # compiles for this size
    compile_s = round(time.perf_counter() - started, 1)
    row, video = _timed(pipe, clock, args, "t2v", args.tier, n, label='SPEED="fp8_attention", compiled')
    _levels(row, video, reference)
    row["first_call_2_steps_s"] = compile_s
    save(row)
    if "images" in parts:
        for tier in IMAGE_TIERS:
            gpu_benchmark.generate(pipe, clock, "t2i", tier, None, 2, 2)  # compiles and records for this size
            row, image = _timed(pipe, clock, args, "t2i", tier, 50, label='SPEED="fp8_attention", compiled')
            _levels(row, image, references[tier])
            save(row)


def full_run(args, save) -> None:
    pipe = gpu_benchmark.build_pipeline(args.arch, args.device)
    clock = gpu_benchmark.StepClock(pipe)
    apply(pipe, speeds.switches("fp8_attention", "tuning"))
    started = time.perf_counter()
    gpu_benchmark.generate(pipe, clock, "t2v", args.tier, args.frames, 2, 2)
    compile_s = round(time.perf_counter() - started, 1)
    label = 'SPEED="fp8_attention", compiled, every step'
    row, _ = _timed(pipe, clock, args, "t2v", args.tier, args.steps, label=label)
    row.update(first_call_2_steps_s=compile_s, **PUBLISHED_720P if args.tier == "720p" else {})
    save(row)


def published(args, save) -> None:
    import torch
    from diffusers import Cosmos3OmniPipeline
    from diffusers.pipelines.cosmos.mixed_precision import Cosmos3MixedPrecisionConfig

    import checkpoints

    n = args.steps_timed
    reference = None
    if not args.no_reference:
        bf16 = gpu_benchmark.build_pipeline(args.arch, args.device)
        clock = gpu_benchmark.StepClock(bf16)
        gpu_benchmark.generate(bf16, clock, "t2v", args.tier, args.frames, 1, 1)
        row, reference = _timed(bf16, clock, args, "t2v", args.tier, n, label="bf16, eager (the reference)")
        save(row)
        del bf16, clock
        _release()
    started = time.perf_counter()
    checkpoint = checkpoints.resolve("tiny-fp8" if args.arch == "tiny" else "nano-random-fp8", device=args.device)
    build_s = round(time.perf_counter() - started, 1)
    random_weights.enable_loading()
    started = time.perf_counter()
    pipe = Cosmos3OmniPipeline.from_pretrained(
        checkpoint.path, dtype=checkpoint.dtype, enable_safety_checker=False, use_native_flow_schedule=True
    ).to(checkpoint.device)
    load_s = round(time.perf_counter() - started, 1)
    pipe.set_progress_bar_config(disable=True)
    clock = gpu_benchmark.StepClock(pipe)
    gpu_benchmark.generate(pipe, clock, "t2v", args.tier, args.frames, 2, 2)  # two weight-only steps: runs anywhere
    row, video = _timed(pipe, clock, args, "t2v", args.tier, n, label="the published FP8 format, its own schedule")
    if reference is not None:
        _levels(row, video, reference)
    schedule = Cosmos3MixedPrecisionConfig.resolve(
        quantization_config=random_weights.published()["fp8"]["quantization_config"]
    )
    kinds = [schedule.precision_name(step, n) for step in range(n)]
    # Each kind's median step, without a call's first step (it also pays for the call's set-up).
    by_kind = {
        kind: statistics.median(
            t for step, (t, k) in enumerate(zip(row["step_s"], kinds, strict=True)) if k == kind and step
        )
        for kind in set(kinds)
    }
    total = row["setup_s"] + sum(by_kind[schedule.precision_name(step, args.steps)] for step in range(args.steps))
    row.update(
        schedule=kinds,
        step_s_by_kind=by_kind,
        total_s=round(total + row["decode_s"], 2),
        build_and_save_s=build_s,
        load_s=load_s,
        fp8_weight_gib=round(
            sum(p.numel() for p in pipe.transformer.parameters() if p.dtype == torch.float8_e4m3fn) / 2**30, 2
        ),
    )
    if args.tier == "720p":
        row.update(PUBLISHED_720P)
    save(row)


def distilled_pipeline(args):
    """The 4-step pipeline as diffusers builds it from a distilled checkpoint's modular index and scheduler, with
    the random weights of `--arch` in it."""
    import torch
    from diffusers import Cosmos3DistilledModularPipeline

    folder = random_weights.ensure_tiny_checkpoint(variant="tiny-distilled")
    pipe = Cosmos3DistilledModularPipeline.from_pretrained(str(folder))
    pipe.load_components(names=["scheduler"])
    weights = gpu_benchmark.build_pipeline(args.arch, args.device)
    pipe.update_components(transformer=weights.transformer, vae=weights.vae, text_tokenizer=weights.text_tokenizer)
    pipe.disable_safety_checker()
    pipe.to(torch.device(args.device))
    pipe.set_progress_bar_config(disable=True)
    return pipe


class DecodeClock:
    """When the transformer last finished in a call: the rest of the call is the VAE decode and the output."""

    def __init__(self, pipe) -> None:
        import torch

        self.sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
        self.last = 0.0
        pipe.transformer.register_forward_hook(self._after)

    def _after(self, module, args, output) -> None:
        self.sync()
        self.last = time.perf_counter()


def four_steps(args, save) -> None:
    import torch

    pipe = distilled_pipeline(args)
    clock = DecodeClock(pipe)
    image = media.load_image(modes.conditioning("i2v"))

    def once(mode: str, label: str) -> dict[str, Any]:
        s = audiovisual_settings.settings_for(
            mode,
            "published",
            tier=gpu_benchmark.tier_of(args.tier),
            seed=gpu_benchmark.SEED,
            num_inference_steps=4,
            guidance_scale=1.0,
            **({} if mode == "t2i" else {"num_frames": args.frames}),
        )
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        pipe(
            prompt=prompts.prompt_text(s),
            num_frames=s.num_frames,
            height=s.height,
            width=s.width,
            fps=s.fps,
            generator=torch.Generator("cpu").manual_seed(s.seed),
            output_type="np",
            add_resolution_template=False,
            add_duration_template=False,
            output="videos",
            **({"image": image} if mode == "i2v" else {}),
        )
        clock.sync()
        end = time.perf_counter()
        return {
            "part": "four_steps",
            "mode": mode,
            "tier": args.tier,
            "size": s.size,
            "frames": s.num_frames,
            "steps": 4,
            "label": label,
            "total_s": round(end - start, 2),
            "decode_s": round(end - clock.last, 2),
            "decode_share": round((end - clock.last) / (end - start), 3),
            "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if torch.cuda.is_available() else None,
        }

    for mode in ("t2i", "i2v"):
        once(mode, "warm-up")
        save(once(mode, "bf16, eager"))
    pipe.vae.enable_tiling()
    save(once("i2v", "bf16, eager, VAE tiling"))
    pipe.vae.disable_tiling()
    pipe.vae.decoder.compile()
    started = time.perf_counter()
    once("i2v", "warm-up")
    compile_s = round(time.perf_counter() - started, 1)
    row = once("i2v", "bf16, VAE decoder compiled")
    row["first_call_s"] = compile_s
    save(row)


def _release() -> None:
    """Give the previous part's weights and compiled code back before the next part builds its own."""
    import gc

    import torch

    torch._dynamo.reset()
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def main(argv: list[str] | None = None) -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", choices=("nano", "tiny"), default="nano")
    parser.add_argument("--device", default="cuda")
    parser.add_argument(
        "--parts", default="video,images", help="comma-separated: video, images, full, published, four_steps"
    )
    parser.add_argument("--tier", default="720p")
    parser.add_argument("--frames", type=int, default=189)
    parser.add_argument("--steps", type=int, default=35)
    parser.add_argument("--steps-timed", type=int, default=3)
    parser.add_argument("--no-reference", action="store_true", help="published: skip the bf16 run it is compared with")
    parser.add_argument("--out", default="fp8_benchmark.json")
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))
    started = time.perf_counter()
    results: dict[str, Any] = {
        "what": __doc__.split("\n\n")[0],
        "arch": args.arch,
        "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "tier": args.tier,
        "frames": args.frames,
        "steps": args.steps,
        "steps_timed": args.steps_timed,
        "seed": gpu_benchmark.SEED,
        "command": " ".join(sys.argv),
        "versions": result_file.versions(),
        "rows": [],
    }
    out = Path(args.out)

    def save(row: dict[str, Any]) -> None:
        results["rows"].append(row)
        results["elapsed_s"] = round(time.perf_counter() - started, 1)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=1) + "\n")
        print(json.dumps(row), flush=True)

    if parts & {"video", "images"}:
        video_and_images(args, save, parts)
    for part, run in (("full", full_run), ("published", published), ("four_steps", four_steps)):
        if part in parts:
            _release()
            run(args, save)
    print(f"elapsed {round(time.perf_counter() - started, 1)} s")


if __name__ == "__main__":
    main()
