"""Time and peak memory of each action task through Diffusers, eager and with the `fast` switches, and how far each
switch moves the output.

    python support/benchmarks/action_tasks.py --model nano-random --preset default \
        --out support/benchmarks/results/action_tasks_h200.json

Each task runs through the action notebook's own `act` (its `call` cell, run by `tuning.notebook_calls`) on the
bundled start images, clips and trajectories fitted to the tier's canvas: forward dynamics for the car (60 actions,
61 frames) and for the arm (16, 17), inverse dynamics for both, and the DROID policy (on MODEL itself: a random Nano
carries the same action heads as the policy checkpoint). Three rounds, each on the same loaded pipeline: `none`
(diffusers as it comes), then diffusers' public `compile_repeated_blocks(fullgraph=True)` (the main notebooks'
`fast`), then the cookbook's own `fast` patches added (the text tower's keys and values computed once, the first
frame through the VAE in 2-D, FlashAttention-4 where the GPU has it). Each task runs twice per round; the second
call is the one timed, and its video (0-255) and actions are compared with the eager ones.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import result_file

from cosmos3_action import action_settings, actions
from helpers import assets, environment, media
from tuning import notebook_calls, pipelines

ROUNDS = {
    "none": [],
    "public fast": ["compile"],
    "cookbook fast": ["text_kv_cache", "first_frame_2d", "flash_attention"],
}


def tasks(preset: str) -> list[tuple[str, action_settings.ActionSettings, object, np.ndarray | None]]:
    folder = assets.assets_dir("action")
    car = actions.read(folder / "trajectories" / "av_drive.npy")[0]
    arm = actions.DROID_NORMALIZATION.normalize(actions.read(folder / "trajectories" / "droid_pick.npy")[0][:16])
    road, table = (media.load_image(folder / "images" / f"{n}_start.png") for n in ("av_drive", "droid_pick"))
    drive, pick = (media.load_video(folder / "videos" / f"{n}.mp4") for n in ("av_drive", "droid_pick"))
    return [
        ("fd_av", action_settings.settings_for("fd_av", preset), road, car),
        ("id_av", action_settings.settings_for("id_av", preset), drive, None),
        ("fd_droid", action_settings.settings_for("fd_droid_lerobot", preset), table, arm),
        (
            "id_droid",
            action_settings.settings_for("id_droid_lerobot", preset),
            pick[:17],
            None,
        ),
        ("policy_droid", action_settings.settings_for("policy_droid_lerobot", preset), table, None),
    ]


def fitted(s: action_settings.ActionSettings, picture: object) -> object:
    """The start picture, or the clip for inverse dynamics, on the tier's canvas, as the notebook hands it to `act`."""
    clip = picture if isinstance(picture, list) else [picture]
    width, height = s.canvas(*clip[0].size)
    clip = [media.fit_frame(frame, width, height) for frame in clip]
    return clip if s.task == "inverse_dynamics" else clip[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="nano-random")
    parser.add_argument("--preset", default="published", choices=list(action_settings.PRESETS))
    parser.add_argument("--device", default="auto")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    pipe, checkpoint = pipelines.load_pipeline(args.model, device=args.device)
    act = notebook_calls.define("action/run_with_diffusers.ipynb", pipe=pipe)["act"]
    rows, reference = [], {}
    for round_name, switches in ROUNDS.items():
        pipelines.apply(pipe, switches, checkpoint.device)
        for name, s, picture, given in tasks(args.preset):
            picture = fitted(s, picture)
            first_started = time.perf_counter()
            act(s, s.prompt, picture, action=given)
            first = time.perf_counter() - first_started
            environment.peak_memory_gib(reset=True)
            started = time.perf_counter()
            video, predicted = act(s, s.prompt, picture, action=given)
            seconds = time.perf_counter() - started
            frames = media.to_uint8_frames(video).astype(np.int16)
            reference.setdefault(name, (frames, predicted))
            want_frames, want_actions = reference[name]
            row = {"round": round_name, "task": name, "frames": int(frames.shape[0])}
            row |= {"size": f"{frames.shape[2]}x{frames.shape[1]}", "steps": s.num_inference_steps}
            row |= {"first_call_s": round(first, 2), "seconds": round(seconds, 2)}
            row |= {"peak_gib": round(environment.peak_memory_gib(), 2)}
            row["frame_difference"] = round(float(np.abs(frames - want_frames).mean()), 3)
            if predicted is not None:
                row["action_difference"] = round(float(np.abs(predicted - want_actions).mean()), 5)
            print(row, flush=True)
            rows.append(row)
    result = {
        "what": "each action task through Diffusers, eager and with the fast switches",
        "model": args.model,
        "preset": args.preset,
        "switches": {"applied": list(pipelines.applied(pipe)), "skipped": list(pipelines.skipped(pipe))},
        "environment": environment.report(),
        "rows": rows,
    }
    result_file.write(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
