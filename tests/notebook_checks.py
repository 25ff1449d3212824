"""Checks shared by the notebook tests: every file a run lists is decoded and must match its settings."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import numpy as np
from papermill.iorw import load_notebook_node
from papermill.parameterize import parameterize_notebook

from cookbook_tools import notebooks
from cosmos3_audiovisual import long_video
from cosmos3_audiovisual.modes import distilled_settings, parse_modes
from helpers import audiovisual_settings, media
from helpers.assets import notebook_path

ALL_MODES = list(audiovisual_settings.MODES)

# What each file of a mode must be: (kind, suffix). Sound modes also write the audio as a WAV.
EXPECTED_FILES = {
    "t2i": [("image", ".png")],
    "t2v": [("video", ".mp4")],
    "i2v": [("video", ".mp4")],
    "v2v": [("video", ".mp4")],
    "t2v_sound": [("video", ".mp4"), ("audio", ".wav")],
    "i2v_sound": [("video", ".mp4"), ("audio", ".wav")],
    "v2v_sound": [("video", ".mp4"), ("audio", ".wav")],
    "fl2v": [("video", ".mp4")],
}


# The Diffusers notebook's flow-shift section writes t2v again at these shifts, as `t2v-shift<shift>`, with at most
# SHORT_FRAMES frames (so that a first "Run All" stays cheap).
FLOW_SHIFTS = (3.0, 10.0, 30.0)
SHORT_FRAMES = 33
# The quickstart's literal call: 480p as published, and a smoke size on the tiny checkpoint. (width, height, frames)
QUICKSTART_TINY = (160, 96, 17)
QUICKSTART_PUBLISHED = (832, 480, 189)


# The action and transfer notebooks at their smallest: the tiny checkpoint, two steps, quiet.
SMOKE = {"MODEL": "tiny", "PRESET": "smoke", "SEED": 0, "PROGRESS": False}
# What the session's run of each notebook (tests/conftest.py) sets beyond `SMOKE`: the audiovisual pair every mode,
# the comparison and the offline 4-step checkpoint. The tuning notebook's own test runs `fast`.
SESSION = {
    notebooks.PAIR[0]: {"MODES": "all", "COMPARE": "smoke", "DISTILLED_MODEL": "tiny-distilled"},
    notebooks.PAIR[1]: {"MODES": "all", "COMPARE": "smoke", "DISTILLED_MODEL": "tiny-distilled"},
    notebooks.TUNING: {"SPEED": "fast"},
    **{name: {} for name in (*notebooks.ACTION_PAIR, *notebooks.TRANSFER_PAIR)},
    **{name: {"MAX_IN_FLIGHT": 2} if "vllm" in name else {} for name in notebooks.DATASET_PAIR},
    **{name: {} for name in notebooks.POST_TRAINING_PAIR},  # tests/post_training_checks.py
}

# What the nbmake runs of the audiovisual pair set beyond `SMOKE`: a reader's first "Run All" (the default modes and
# long video) in a fresh kernel, at the one aspect ratio that no other run of the suite takes.
NBMAKE = {name: {"ASPECT_RATIO": "16:9", "MODES": "t2v,i2v,t2v_sound", "LONG_CHUNKS": 3} for name in notebooks.PAIR}


def check_nbmake_run(name: str, media_dir: Path) -> None:
    """The nbmake run's one run folder under `media_dir`: every file decoded and checked (`check_run`)."""
    (run_dir,) = media_dir.iterdir()
    p = NBMAKE[name]
    modes = parse_modes(str(p["MODES"]))
    shifts = name == notebooks.PAIR[0] and "t2v" in modes  # the Diffusers notebook's flow-shift section
    aspect_ratio, long_chunks = str(p["ASPECT_RATIO"]), int(p["LONG_CHUNKS"])
    check_run(run_dir, modes, "smoke", 0, shifts=shifts, aspect_ratio=aspect_ratio, long_chunks=long_chunks)


def execute_smoke(name: str, out: Path, **parameters: object) -> Path:
    """Run the notebook `name` by papermill at `SMOKE` (and `parameters`), its media under `out`/media. (The dataset
    notebooks take their seeds from their spec: they have no SEED.)"""
    smoke = {k: v for k, v in SMOKE.items() if k in notebooks.parameter_names(name)}
    return notebooks.execute(name, out / Path(name).name, {**smoke, "OUTPUT_DIR": str(out / "media"), **parameters})


def execute_in_process(name: str, out: Path, **parameters: object) -> Path:
    """Run the notebook `name` at `SMOKE` (and `parameters`) as papermill runs it, but in this process instead of a
    fresh kernel: its code cells in order through an IPython shell of their own (so a cell's `%magic` and top-level
    `await` run as they do in a kernel), the parameters injected after the parameters cell, the notebook's folder as
    the working directory, what each cell prints kept as its output, and the executed copy written to `out` with
    papermill's record of its parameters, so that the same checks read it. A variation run saves a kernel's start and
    its imports this way; the session's runs stay in kernels of their own. A cell that fails raises its own error,
    after the executed copy is written up to that cell, as papermill writes it. What a run sets for the whole process
    is put back after it: the environment, the working directory, `__main__`, warning filters and diffusers' progress
    bars; and torch's compiled code is let go."""
    import atexit
    import contextlib
    import io
    import warnings

    import torch
    from diffusers.utils import logging as diffusers_logging
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    smoke = {k: v for k, v in SMOKE.items() if k in notebooks.parameter_names(name)}
    given = {**smoke, "OUTPUT_DIR": str(out / "media"), **parameters}
    unknown = sorted(set(given) - notebooks.parameter_names(name))
    assert not unknown, f"{name} has no parameter(s) {unknown}"
    document = nbformat.read(notebook_path(name), as_version=4)
    config = Config()
    config.HistoryManager.enabled = False  # no history database written under the home folder
    environment, cwd, bars = dict(os.environ), os.getcwd(), diffusers_logging.is_progress_bar_enabled()
    document.metadata["papermill"] = {"parameters": given}
    executed = out / Path(name).name
    executed.parent.mkdir(parents=True, exist_ok=True)
    shell = InteractiveShell(config=config, user_ns={})
    atexit.unregister(shell.atexit_operations)
    try:
        os.chdir(notebook_path(name).parent)
        with warnings.catch_warnings():
            for cell in document.cells:
                if cell.cell_type != "code":
                    continue
                printed_text = io.StringIO()
                with contextlib.redirect_stdout(printed_text), contextlib.redirect_stderr(printed_text):
                    # silent: no output prompts, as the exec this replaces had none; an error still raises below
                    result = shell.run_cell(cell.source, store_history=False, silent=True)
                    if "parameters" in cell.metadata.get("tags", []):
                        shell.user_ns.update(given)
                text = printed_text.getvalue()
                cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)] if text else []
                if not result.success:
                    print(text[-4000:])  # the cell's own traceback, which the shell printed into its output
                    nbformat.write(document, executed)
                    result.raise_error()
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(environment)
        (diffusers_logging.enable_progress_bar if bars else diffusers_logging.disable_progress_bar)()
        shell.user_ns.clear()
        shell.restore_sys_module_state()
        torch._dynamo.reset()  # compiled code keyed on this run's modules, and its recompile counts
    nbformat.write(document, executed)
    return executed


def check_quickstart(path: Path, size: tuple[int, int, int]) -> None:
    """The quickstart's MP4, written by diffusers' `export_to_video` or by the server: H.264 at 24 fps, no sound."""
    info = media.probe(path)
    assert (info.codec, info.pix_fmt, info.fps, info.has_audio) == ("h264", "yuv420p", 24, False), info
    assert (info.width, info.height, info.num_frames) == size, info


def check_run(
    run_dir: Path,
    modes: list[str],
    preset: str,
    seed: int,
    compared: tuple[str, ...] = (),
    shifts: bool = False,
    quickstart: tuple[int, int, int] | None = QUICKSTART_TINY,
    four_step: str = "",
    tier: int = 0,
    aspect_ratio: str = "",
    long_chunks: int = 0,
) -> dict[str, Any]:
    """Decode every output listed in the manifest and compare it with the settings of its mode (at `tier` and
    `aspect_ratio`, the notebook's TIER and ASPECT_RATIO).

    `compared` are the presets of the comparison section, whose t2v outputs are listed as `t2v-vs-<preset>`;
    `shifts`: the run holds the flow-shift section's outputs too (when t2v was among the modes); `quickstart`: the
    (width, height, frames) of the quickstart's video, listed first, or None for a run without one; `four_step`: the
    4-step checkpoint of the distilled section, whose outputs are listed as `<mode>_4step`; `long_chunks`: the chunks
    of the long video, listed as `long` (`check_long_video`).
    """
    manifest = json.loads((run_dir / "manifest.json").read_text())
    outputs = manifest["outputs"]
    if quickstart is not None:
        assert outputs[0]["mode"] == "quickstart", [o["mode"] for o in outputs]
        check_quickstart(run_dir / outputs[0]["path"], quickstart)
        outputs = outputs[1:]
    listed = sorted((o["mode"], o["kind"]) for o in outputs)
    extra = [f"t2v-vs-{p}" for p in compared] + ([f"t2v-shift{s:g}" for s in FLOW_SHIFTS] if shifts else [])
    size = {k: v for k, v in {"tier": tier, "aspect_ratio": aspect_ratio}.items() if v}
    distilled = distilled_settings(four_step, preset, seed=seed, **size)
    expected = sorted(
        [(m, kind) for m in modes for kind, _ in EXPECTED_FILES[m]]
        + [(e, "video") for e in extra]
        + [(f"{m}_4step", "image" if m == "t2i" else "video") for m in distilled]
    )
    expected = sorted(expected + ([("long", "video")] if long_chunks else []))
    assert listed == expected, f"manifest lists {listed}, expected {expected}"
    for out in outputs:
        if out["mode"] == "long":
            check_long_video(run_dir, out, long_chunks, preset, seed, **size)
            continue
        mode, _, other = out["mode"].partition("-vs-")
        mode, _, shift = mode.partition("-shift")
        if mode.endswith("_4step"):
            s = distilled[mode.removesuffix("_4step")]
            assert (out["settings"]["num_inference_steps"], out["settings"]["guidance_scale"]) == (4, 1.0)
        else:
            s = audiovisual_settings.settings_for(
                mode, other or preset, seed=seed, flow_shift=float(shift) if shift else None, **size
            )
        if shift:
            s = dataclasses.replace(s, num_frames=min(s.num_frames, SHORT_FRAMES))
        assert out["settings"]["flow_shift"] == s.flow_shift, f"{out['path']} records the shift it used"
        path = run_dir / out["path"]
        info = media.probe(path)
        assert out["seed"] == seed and out["settings"]["preset"] == (other or preset)
        assert out["seconds"] > 0
        if out["kind"] == "image":
            assert path.suffix == ".png"
            assert (info.width, info.height) == (s.width, s.height)
        elif out["kind"] == "video":
            assert path.suffix == ".mp4" and (info.codec, info.pix_fmt) == ("h264", "yuv420p")
            assert (info.width, info.height, info.num_frames, info.fps) == (
                s.width,
                s.height,
                s.num_frames,
                s.fps,
            )
            assert info.has_audio == s.enable_sound, f"{path}: audio stream present={info.has_audio}"
            if s.enable_sound:
                assert (info.audio.codec, info.audio.channels, info.audio.sample_rate) == ("aac", 2, 48000)
                assert abs(info.audio.duration_s - s.duration_s) < 0.05
        else:
            assert path.suffix == ".wav" and info.audio.channels == 2
            assert abs(info.audio.duration_s - s.duration_s) < 1e-3
        # The manifest reports what the file holds, not what was asked.
        assert (out["width"], out["height"], out["num_frames"], out["has_audio"]) == (
            info.width,
            info.height,
            info.num_frames,
            info.has_audio,
        )
    if shifts:
        # Each shift really changed the schedule: with the published Karras scheduler and no
        # `use_karras_sigmas=False`, the three videos were the same.
        shifted = {
            o["mode"]: media.read_frames(run_dir / o["path"]) for o in manifest["outputs"] if "-shift" in o["mode"]
        }
        names = sorted(shifted)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                assert frame_difference(shifted[a], shifted[b]) > 0, f"{a} and {b} hold the same frames"
    return manifest


def check_long_video(run_dir: Path, out: dict[str, Any], chunks: int, preset: str, seed: int, **size: Any) -> None:
    """The long video: one H.264 MP4 of `chunks` chunks of the t2v_sound settings joined without the 5 pictures each
    chunk repeats, its seams where the chunks meet, and AAC sound as long as the pictures."""
    s = audiovisual_settings.settings_for("t2v_sound", preset, seed=seed, **size)
    p = long_video.plan(chunks, s.num_frames, s.fps)
    info = media.probe(run_dir / out["path"])
    assert (info.codec, info.width, info.height, info.fps) == ("h264", s.width, s.height, s.fps), info
    assert info.num_frames == p.total_frames == s.num_frames + (chunks - 1) * (s.num_frames - 5), info
    assert out["seams"] == p.seams and len(out["chunk_seconds"]) == chunks, out
    assert (info.audio.codec, info.audio.channels, info.audio.sample_rate) == ("aac", 2, 48000), info
    assert abs(info.audio.duration_s - p.seconds) < 0.05, (info.audio.duration_s, p.seconds)


def _absolute_difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    left, right = np.asarray(a, dtype=np.int16), np.asarray(b, dtype=np.int16)
    assert left.shape == right.shape, f"frame stacks differ in shape: {left.shape} vs {right.shape}"
    return np.abs(left - right)


def frame_difference(a: np.ndarray, b: np.ndarray) -> float:
    """Largest absolute difference between two decoded frame stacks, in 0-255 units (shapes must match)."""
    difference = _absolute_difference(a, b)
    return float(difference.max()) if difference.size else 0.0


def mean_frame_difference(a: np.ndarray, b: np.ndarray) -> float:
    """Mean absolute difference between two decoded frame stacks, in 0-255 units (shapes must match)."""
    return float(_absolute_difference(a, b).mean())


def error_outputs(executed: Path) -> list[str]:
    nb = json.loads(executed.read_text())
    return [
        f"{o.get('ename')}: {o.get('evalue')}"
        for cell in nb["cells"]
        for o in cell.get("outputs", [])
        if o.get("output_type") == "error"
    ]


# How far `fast` may move the frames from the reference, in levels of 255 (mean absolute difference): it changes
# only the order of floating-point sums. Measured on one H200, nano-random in bf16 (torch 2.11.0, diffusers 0.42.1):
# 0.9 for a video, 0.3 for an image; on a CPU in float32 (torch 2.13.0) the sums move by about 1e-6, under a level.
FAST_TOLERANCE = 2.0


def check_tuning_run(
    run_dir: Path, timings: list[dict[str, Any]], modes: list[str], preset: str, seed: int, speed: str, tier: int = 0
) -> dict[str, Any]:
    """The tuning notebook's run: per mode the reference, the first timed call and the second, each decoded and of
    the preset's size; its table has a row per mode, and `fast` kept the output."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    names = [f"{m}-reference" for m in modes] + [f"{m}-{suffix}" for m in modes for suffix in (f"{speed}-first", speed)]
    assert [o["mode"] for o in manifest["outputs"]] == names
    for out in manifest["outputs"]:
        s = audiovisual_settings.settings_for(out["mode"].split("-")[0], preset, seed=seed, tier=tier or None)
        info = media.probe(run_dir / out["path"])
        assert (info.width, info.height, info.num_frames) == (s.width, s.height, s.num_frames), out["path"]
        assert out["seconds"] > 0
    assert [row["mode"] for row in timings] == modes
    for row in timings:
        assert row["speed-up"] > 0 and row[f"{speed} (s)"] > 0
        if speed == "fast":
            assert row["difference"] < FAST_TOLERANCE, row
    return manifest


def printed(executed: Path) -> str:
    """Everything an executed notebook printed, in order."""
    cells = nbformat.read(executed, as_version=4).cells
    return "\n".join(o.get("text", "") for cell in cells for o in cell.get("outputs", []))


def setup_cells(name: str) -> list[str]:
    """What a notebook runs before it loads a model or starts a server: its parameters cell and every code cell
    before the quickstart (the set-up and, in the audiovisual vLLM-Omni notebook, the server's cell); in a notebook
    without a quickstart, the one cell after the parameters."""
    code = [c for c in nbformat.read(notebook_path(name), as_version=4).cells if c.cell_type == "code"]
    tagged = [i for i, c in enumerate(code) if "quickstart" in c.metadata.get("tags", [])]
    return [c.source for c in code[: tagged[0] if tagged else 2]]


class ReachedTheServer(AssertionError):
    """The set-up went on to wait for a server: the refusal under test did not come first."""


def run_setup(name: str, parameters: dict[str, object], monkeypatch: Any) -> dict[str, Any]:
    """Run notebook `name`'s set-up cells in this process, `parameters` replacing the parameters cell's values, and
    return their namespace. Each refusal is raised from the cell that checks it, as in a kernel, without a kernel's
    start. A vLLM-Omni notebook that gets as far as waiting for its server raises `ReachedTheServer` instead."""
    from helpers import speeds
    from local_server import omni_http

    def reached(base_url: str, **_: object) -> None:
        raise ReachedTheServer(f"{name}'s set-up went on to wait for the server at {base_url}")

    monkeypatch.setattr(omni_http, "wait_for_server", reached)
    for variable in ("OMNI_BASE_URL", speeds.ALLOCATOR_ENV):
        monkeypatch.setenv(variable, "")  # recorded, so that whatever the cells set is undone after the test
        monkeypatch.delenv(variable)
    first, *rest = setup_cells(name)
    namespace: dict[str, Any] = {}
    exec(compile(first, f"{name} [parameters]", "exec"), namespace)  # noqa: S102 - the cookbook's own cells
    namespace.update(parameters)
    for source in rest:
        exec(compile(source, f"{name} [set-up]", "exec"), namespace)  # noqa: S102
    return namespace


def media_files(output_dir: Path) -> list[Path]:
    """Every file a run wrote under `output_dir` but its manifest."""
    return (
        [p for p in output_dir.rglob("*") if p.is_file() and p.name != "manifest.json"] if output_dir.exists() else []
    )


def sections(name: str) -> list[str]:
    """A notebook's `## ` headings, in order."""
    nb = nbformat.read(notebook_path(name), as_version=4)
    return [c.source.splitlines()[0] for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("## ")]


def run_nbmake(name: str, parameters: dict[str, object], folder: Path, timeout_s: int = 600) -> Path:
    """nbmake takes no parameters: run a copy parameterized the way papermill injects them, written back with its
    outputs. A vLLM-Omni notebook's copy starts (and stops) its own server, as a reader's "Run All" does. The copy sits
    beside its family's assets, as the notebook does in its folder: the quickstart opens them by relative path."""
    copy = folder / Path(name).name
    (folder / "assets").symlink_to(notebook_path(name).parent / "assets", target_is_directory=True)
    nbformat.write(parameterize_notebook(load_notebook_node(str(notebook_path(name))), parameters), copy)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbmake",
            f"--nbmake-timeout={timeout_s}",
            "--overwrite",
            "-q",
            "-p",
            "no:cacheprovider",
            str(copy),
        ],
        cwd=folder,
        env={k: v for k, v in os.environ.items() if k != "OMNI_BASE_URL"},
        capture_output=True,
        text=True,
        timeout=2 * timeout_s,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return copy
