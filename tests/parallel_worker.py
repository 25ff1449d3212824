"""One rank of tests/test_parallel.py's parallel runs: `torchrun --nproc-per-node N tests/parallel_worker.py OUT`.

For each layout that fits N processes it loads the tiny checkpoint on the CPU, turns on the exact switches of `fast`
that run without compilation (compiling on every rank would take minutes on a CPU; the GPU benchmark compiles),
installs the runner's parallel pieces and makes the runner's generation call. Rank 0 saves the frames, the sound and
how far apart the ranks' latents were into OUT/<cfg>x<context>-<mode>.npz for the test to compare with one process.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from tuning.pipelines import apply, load_pipeline, notebook_call
from tuning.several_gpus import layout, runner
from tuning.several_gpus.request import Request

MODES = "t2v,t2v_sound"
STEPS = 3
SWITCHES = ("text_kv_cache", "zero_encode_cache")


def main(out: Path) -> None:
    import torch.distributed as dist

    world = int(os.environ["WORLD_SIZE"])
    # 2 processes: CFG 2, then context 2; 4 processes: CFG 2 x context 2.
    for cfg, context in [(2, 1), (1, 2)] if world == 2 else [(2, world // 2)]:
        request = Request(
            model="tiny",
            gpus=world,
            cfg=cfg,
            context=context,
            modes=MODES,
            preset="smoke",
            speed="none",
            steps=STEPS,
            device="cpu",
        ).check()
        place = layout.join(request.degrees, "cpu")
        pipe, _ = load_pipeline("tiny", device="cpu")
        apply(pipe, SWITCHES)
        runner.install(pipe, request, place)
        generate = notebook_call(pipe)
        for mode, s in request.settings():
            output, deviation = runner.generate_on_rank(generate, request, place, s)
            if place.is_writer:
                sound = output.sound.float().numpy() if output.sound is not None else np.zeros(0)
                np.savez(out / f"{cfg}x{context}-{mode}.npz", video=output.video, sound=sound, deviation=deviation)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
