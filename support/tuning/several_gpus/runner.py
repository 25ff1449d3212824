"""The process `torchrun` starts on each GPU:
`torchrun --nproc-per-node N -m tuning.several_gpus --model ... `.

Every rank loads the pipeline as the Diffusers notebook does (`from_pretrained`, the `SPEED` switches), then installs
what its place in the layout needs: context parallelism, the split VAE decode, CFG parallelism (in that order, each
wrapping what came before). Every rank makes the notebook's own call for each generation (run_with_diffusers.ipynb's
`generate`, `tuning.pipelines.notebook_call`), on the same seed;
at the last step every rank takes rank 0's latents (they are already equal, and the manifest records by how much
they were not), and rank 0 writes the files and the manifest exactly as the notebook does, into a new run folder
whose path it publishes as JSON (`--publish`) for the launcher.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checkpoints import resolve
from cosmos3_audiovisual import diffusers_pipe, modes
from helpers import media, prompts, runs, speeds
from helpers.audiovisual_settings import AudiovisualSettings
from tuning import pipelines
from tuning.pipelines import load_pipeline
from tuning.several_gpus import cfg_parallel, context_parallel, layout, split_decode
from tuning.several_gpus.request import Request

if TYPE_CHECKING:
    from diffusers import Cosmos3OmniPipeline

# How long a rank waits for the others; loading builds `nano-random` (31 GB) on rank 0 the first time.
TIMEOUT = datetime.timedelta(minutes=60)


def load(request: Request, place: layout.Layout) -> tuple[Cosmos3OmniPipeline, Any]:
    """The notebook's load cells on every rank (`SPEED`'s switches included), then this rank's part of the layout.

    Rank 0 resolves MODEL first, so that a checkpoint that has to be built or downloaded is fetched once; then every
    rank loads it at the same time. The guardrails are loaded and run on rank 0 alone, which sees every prompt and
    the whole video.
    """
    import torch.distributed as dist

    if place.is_writer:
        resolve(request.model, device=str(place.device), guardrails=request.guardrails)
    dist.barrier()
    pipe, checkpoint = load_pipeline(
        request.model,
        device=str(place.device),
        guardrails=request.guardrails if place.is_writer else False,
        speed=request.speed,
    )
    pipe.set_progress_bar_config(disable=not (request.progress and place.is_writer))
    install(pipe, request, place)
    return pipe, checkpoint


def install(pipe: Cosmos3OmniPipeline, request: Request, place: layout.Layout) -> None:
    """Context parallelism, the split VAE decode and CFG parallelism, as `place` needs them, over the switches
    already on `pipe`: each wraps what came before, and CFG parallelism must see the transformer as the pipeline
    calls it."""
    import torch.distributed as dist

    degrees = place.degrees
    if degrees.context > 1:
        context_parallel.enable(pipe, place.context_group)
    if degrees.world_size > 1 and request.decode == "split":
        split_decode.enable(pipe, dist.group.WORLD)
    if degrees.cfg > 1:
        cfg_parallel.enable(pipe, place.cfg_group)


class SameLatents:
    """`callback_on_step_end` that hands every rank rank 0's latents at the last step, and measures how far apart
    they were (the ranks compute the same numbers, so this is 0 unless a kernel is not deterministic)."""

    def __init__(self) -> None:
        self.deviation = 0.0

    def __call__(self, pipe: Any, step: int, timestep: Any, tensors: dict[str, Any]) -> dict[str, Any]:
        import torch.distributed as dist

        if step != pipe.num_timesteps - 1:
            return tensors
        latents = tensors["latents"]
        reference = latents.clone()
        dist.broadcast(reference, src=0)
        deviation = (latents - reference).abs().max().reshape(1).float()
        dist.all_reduce(deviation, op=dist.ReduceOp.MAX)
        self.deviation = float(deviation.item())
        return {**tensors, "latents": reference}


def generate_on_rank(
    generate: Any, request: Request, place: layout.Layout, s: AudiovisualSettings
) -> tuple[Any, float]:
    """The notebook's `generate` for `s` on this rank, with its mode's inputs as the notebook gives them; its output
    and how far the ranks' latents were apart. Ranks that neither write nor share the VAE decode skip it
    (`output_type="latent"`), and only the writer runs the guardrails."""
    inputs: dict[str, Any] = {"enable_sound": True} if s.enable_sound else {}
    if s.mode in ("i2v", "i2v_sound"):
        inputs["image"] = media.load_image(request.image or modes.conditioning(s.mode))
    elif s.mode == "v2v":
        inputs["video"] = media.load_video(request.video or modes.conditioning(s.mode))
        inputs["condition_frame_indexes_vision"] = s.condition_frame_indexes
    same = SameLatents() if place.degrees.world_size > 1 else None
    output = generate(
        s,
        prompts.prompt_text(s),
        prompts.negative_prompt(s.mode),
        output_type="np" if decodes(request, place) else "latent",
        enable_safety_check=place.is_writer,
        callback_on_step_end=same,
        **inputs,
    )
    return output, same.deviation if same else 0.0


def decodes(request: Request, place: layout.Layout) -> bool:
    """Whether this rank runs the VAE decode: rank 0 always, the others when they share it."""
    return place.is_writer or (request.decode == "split" and place.degrees.world_size > 1)


def publish(path: str, run: runs.Run, done: bool) -> None:
    """Tell the launcher where the run folder is (atomically: it never reads half a file)."""
    if not path:
        return
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=".publish-", dir=target.parent)
    with os.fdopen(fd, "w") as out:
        json.dump({"run_dir": str(run.path), "manifest": str(run.manifest_path), "done": done}, out)
    os.replace(tmp, target)


def failure_path(publish: str, rank: int) -> str:
    """Where a failing rank writes its error, beside the published run folder."""
    return f"{publish}.rank{rank}.error"


def run(request: Request, place: layout.Layout) -> runs.Run | None:
    """Every generation of `request` on this rank; rank 0 returns the run it wrote."""
    named = request.settings()
    pipe, checkpoint = load(request, place)
    diffusers_pipe.check_sound(pipe, [s for _, s in named])
    generate = pipelines.notebook_call(pipe)
    run_ = None
    if place.is_writer:
        run_ = runs.Run.create(request.output_dir, backend="diffusers", model=request.model)
        run_.sample_rate = diffusers_pipe.sample_rate(pipe)
        run_.note(
            **checkpoint.info(),
            speed=request.speed,
            switches=list(speeds.switches(request.speed, "tuning")),
            **place.info(),
            vae_decode=request.decode if place.degrees.world_size > 1 else "one process",
        )
        publish(request.publish, run_, done=False)
        print(f"run folder: {run_.path}", flush=True)
    for name, s in named:
        if request.warmup_steps:
            generate_on_rank(generate, request, place, dataclasses.replace(s, num_inference_steps=request.warmup_steps))
        if run_ is None:
            generate_on_rank(generate, request, place, s)
            continue
        with run_.generation(s, name=name) as gen:
            output, deviation = generate_on_rank(generate, request, place, s)
            gen.save(output, ranks_latent_deviation=deviation)
        print(f"{name}: {gen.outputs[0].seconds:.2f} s, {', '.join(o.path for o in gen.outputs)}", flush=True)
    if run_ is not None:
        publish(request.publish, run_, done=True)
    return run_


def main(argv: list[str] | None = None) -> None:
    import torch.distributed as dist

    request = Request.parse(argv)
    place = layout.join(request.degrees, request.device_type(), timeout=TIMEOUT)
    try:
        run(request, place)
    except Exception as exc:
        # The launcher puts this first in its error; torchrun's own report names only an exit code.
        if request.publish:
            failure = f"rank {place.rank}: {type(exc).__name__}: {exc}"
            Path(failure_path(request.publish, place.rank)).write_text(failure)
        raise
    finally:
        dist.destroy_process_group()
