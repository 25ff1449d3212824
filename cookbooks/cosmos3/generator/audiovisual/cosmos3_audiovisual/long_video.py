"""A long video, chunk by chunk: how many chunks a notebook takes, how the chunks join without repeating the frames
each one continues from, their sound crossfaded at the seams, and what the seams and the drift measure (`plot` draws
them).

Each chunk after the first is a video-to-video call conditioned on the last frames of the chunk before: with
`condition_video_keep="last"` and `condition_frame_indexes_vision` = the first L latent frames, the model keeps the
previous chunk's last 4(L-1)+1 pictures clean at the start of the new chunk (the VAE packs 4 pictures into each latent
frame after the first) and generates the rest. Those pictures are the previous chunk's own, so the join keeps them
once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from helpers import media
from helpers.errors import InvalidSettingError

MAX_CHUNKS = 8  # 8 chunks of NVIDIA's 189 frames at 24 fps with 2 latent frames kept: 61.5 s
LATENT_FRAMES_KEPT = 2  # the pipeline's default, condition_frame_indexes_vision=(0, 1)
CROSSFADE_S = 0.05


def check_chunks(chunks: Any) -> int:
    """LONG_CHUNKS as a notebook gives it: 0 skips the long video, else 2 to `MAX_CHUNKS` chunks."""
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks not in (0, *range(2, MAX_CHUNKS + 1)):
        raise InvalidSettingError(
            f"LONG_CHUNKS={chunks!r} is not a length: give 0 to skip the long video, or 2 to {MAX_CHUNKS} chunks "
            f"(each adds the preset's frames less the ones it continues from; {MAX_CHUNKS} of NVIDIA's 189 make a "
            "minute)."
        )
    return chunks


def kept_frames(latent_frames: int) -> int:
    """The pictures a chunk continues from when it keeps `latent_frames` latent frames clean."""
    return 4 * (latent_frames - 1) + 1


def condition_indexes(latent_frames: int) -> tuple[int, ...]:
    """`condition_frame_indexes_vision` for a chunk that keeps `latent_frames` latent frames of the one before."""
    return tuple(range(latent_frames))


@dataclass(frozen=True)
class ChunkPlan:
    """The frames of a long video: `chunks` calls of `frames` each, every chunk after the first repeating `kept`."""

    chunks: int
    frames: int
    kept: int
    fps: float

    @property
    def new_frames(self) -> int:
        return self.frames - self.kept

    @property
    def total_frames(self) -> int:
        return self.frames + (self.chunks - 1) * self.new_frames

    @property
    def seconds(self) -> float:
        return self.total_frames / self.fps

    @property
    def seams(self) -> list[int]:
        """The index in the long video of each chunk's first new frame, after the first chunk."""
        return [self.frames + k * self.new_frames for k in range(self.chunks - 1)]


def plan(chunks: int, frames: int, fps: float, latent_frames: int = LATENT_FRAMES_KEPT) -> ChunkPlan:
    kept = kept_frames(latent_frames)
    if frames <= kept:
        raise InvalidSettingError(
            f"A chunk of {frames} frames keeps {kept} of the one before and adds none: use a PRESET with more frames."
        )
    return ChunkPlan(chunks, frames, kept, fps)


def join(clips: list[np.ndarray], kept: int) -> np.ndarray:
    """The chunks as one [frames, H, W, 3] stack, each chunk after the first without the `kept` pictures it repeats."""
    return np.concatenate([clips[0], *(clip[kept:] for clip in clips[1:])])


def join_sound(sounds: list[np.ndarray], sample_rate: int, kept_s: float, crossfade_s: float = CROSSFADE_S):
    """Each chunk's [channels, samples] sound, every chunk after the first without its first `kept_s` seconds (the
    repeated pictures' time), joined with a linear crossfade of `crossfade_s` that ends at the seam, so the whole is as
    long as the joined pictures. The model makes each chunk's sound anew: only the fade joins them."""
    start = round(kept_s * sample_rate)
    fade = min(round(crossfade_s * sample_rate), start)  # the fade lies within the repeated pictures' time
    joined = np.asarray(sounds[0], np.float32)
    ramp = np.linspace(0.0, 1.0, fade, dtype=np.float32)
    for sound in sounds[1:]:
        sound = np.asarray(sound, np.float32)
        mixed = joined[:, len(joined[0]) - fade :] * (1 - ramp) + sound[:, start - fade : start] * ramp
        joined = np.concatenate([joined[:, : len(joined[0]) - fade], mixed, sound[:, start:]], axis=1)
    return joined


def _step(video: np.ndarray) -> np.ndarray:
    """The mean absolute difference between each frame and the one before, in levels of 255."""
    frames = np.asarray(video, np.float32)
    return np.abs(frames[1:] - frames[:-1]).mean(axis=(1, 2, 3))


def seams(video: np.ndarray, p: ChunkPlan) -> list[dict[str, float]]:
    """At each seam: the jump from a chunk's last frame to the next chunk's first new one, beside the mean step
    between neighbouring frames inside the two chunks, in levels of 255. A seam that shows has a jump well above it."""
    steps = _step(video)
    rows = []
    bounds = [0, *p.seams, p.total_frames]
    for k, seam in enumerate(p.seams):
        inside = np.concatenate([steps[bounds[k] : seam - 1], steps[seam : bounds[k + 2] - 1]])
        jump = float(steps[seam - 1])
        rows.append(
            {
                "seam": k + 1,
                "frame": seam,
                "jump": round(jump, 2),
                "step inside": round(float(inside.mean()), 2),
                "ratio": round(jump / max(float(inside.mean()), 1e-6), 2),
            }
        )
    return rows


def drift(video: np.ndarray, p: ChunkPlan) -> list[dict[str, float]]:
    """Chunk after chunk, the same statistics of its new frames: mean level, contrast (the standard deviation) and the
    mean step between neighbouring frames. A video that drifts moves away in them as the chunks go on."""
    frames = np.asarray(video, np.float32)
    bounds = [0, *p.seams, p.total_frames]
    rows = []
    for k in range(p.chunks):
        chunk = frames[bounds[k] : bounds[k + 1]]
        rows.append(
            {
                "chunk": k + 1,
                "level": round(float(chunk.mean()), 2),
                "contrast": round(float(chunk.std()), 2),
                "step": round(float(_step(chunk).mean()), 2) if len(chunk) > 1 else 0.0,
            }
        )
    return rows


def write(path: Any, clips: list[np.ndarray], sounds: list[np.ndarray], sample_rate: int, p: ChunkPlan) -> Any:
    """The chunks joined (`join`, `join_sound`) as one H.264 MP4 with AAC sound. Returns its path."""
    sound = join_sound(sounds, sample_rate, p.kept / p.fps)
    return media.write_video(path, join(clips, p.kept), p.fps, audio=sound, sample_rate=sample_rate)


def plot(video: Any, sound: Any, sample_rate: int, plan: ChunkPlan, around_s: float = 0.25) -> Any:
    """A long video's seams, as a PNG image for the notebook: the step between neighbouring frames along the video
    with each seam dashed, and the sound's waveform around the first seam with its crossfade shaded."""
    import io

    from IPython.display import Image
    from matplotlib.figure import Figure

    frames = np.asarray(video, np.float32)
    steps = np.abs(frames[1:] - frames[:-1]).mean(axis=(1, 2, 3))
    fig = Figure(figsize=(8, 4))
    top, bottom = fig.subplots(2, 1)
    top.plot(np.arange(1, len(frames)), steps, linewidth=1)
    for seam in plan.seams:
        top.axvline(seam, color="tab:red", linestyle="--", linewidth=1)
    top.set_xlabel("frame")
    top.set_ylabel("step (levels)")
    top.set_title("step from the frame before; seams dashed", fontsize="medium")
    seam_s = plan.seams[0] / plan.fps
    first, last = (max(0, round((seam_s + d) * sample_rate)) for d in (-around_s, around_s))
    samples = np.asarray(sound, np.float32)[:, first:last]
    t = np.arange(first, first + samples.shape[1]) / sample_rate
    for channel in samples:
        bottom.plot(t, channel, linewidth=0.6)
    bottom.axvspan(seam_s - CROSSFADE_S, seam_s, color="tab:red", alpha=0.2)
    bottom.set_xlabel("seconds (the first seam's crossfade shaded)")
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100)
    return Image(data=png.getvalue(), format="png")
