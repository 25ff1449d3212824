"""Write, read and probe media: H.264 MP4 with AAC sound, PNG and WAV.

Every writer writes to a temporary file beside the target and renames it into place, so a failure never leaves
a half-written file under the final name.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import wave
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from helpers.errors import MediaError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp")
H264_OPTIONS = {"preset": "ultrafast", "crf": "18"}


@dataclass(frozen=True)
class AudioInfo:
    codec: str
    channels: int
    sample_rate: int
    duration_s: float


@dataclass(frozen=True)
class MediaInfo:
    """What a media file really contains, read back by decoding it."""

    path: str
    kind: str  # "video", "image" or "audio"
    width: int
    height: int
    num_frames: int
    fps: float
    codec: str
    pix_fmt: str
    audio: AudioInfo | None

    @property
    def has_audio(self) -> bool:
        return self.audio is not None


@contextlib.contextmanager
def atomic_target(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it to `path` only if the block succeeds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def to_uint8_frames(frames: Any) -> np.ndarray:
    """[T, H, W, 3] uint8 from pipeline output (`np` floats in [0, 1], PIL frames or uint8 arrays)."""
    if isinstance(frames, list | tuple) and frames and hasattr(frames[0], "convert"):
        return np.stack([np.asarray(f.convert("RGB")) for f in frames])
    array = frames.detach().cpu().float().numpy() if hasattr(frames, "detach") else np.asarray(frames)
    if array.ndim == 3:
        array = array[None]
    if array.ndim != 4 or array.shape[-1] != 3:
        raise MediaError(f"Expected frames shaped [frames, height, width, 3], got {array.shape}.")
    if array.dtype == np.uint8:
        return array
    return (np.clip(array, 0.0, 1.0) * 255.0).round().astype(np.uint8)


def fit_audio(audio: Any, sample_rate: int, duration_s: float) -> np.ndarray:
    """[channels, samples] float32, padded with silence or trimmed to `duration_s` (as vLLM-Omni does)."""
    array = audio.detach().cpu().float().numpy() if hasattr(audio, "detach") else np.asarray(audio, np.float32)
    if array.ndim == 1:
        array = array[None]
    want = round(duration_s * sample_rate)
    if array.shape[1] < want:
        array = np.pad(array, ((0, 0), (0, want - array.shape[1])))
    return np.ascontiguousarray(array[:, :want], dtype=np.float32)


def write_video(
    path: str | os.PathLike[str],
    frames: Any,
    fps: float,
    audio: Any | None = None,
    sample_rate: int | None = None,
    audio_duration_s: float | None = None,
) -> Path:
    """MP4, H.264 yuv420p (plays in every browser), with stereo AAC of `audio_duration_s` (default: the picture's).

    Encoded as vLLM-Omni encodes (libx264 ultrafast, CRF 18), which is reproducible: same frames, same bytes, in both
    notebooks and the server. libx264's default preset (`diffusers.utils.encode_video`) varied by up to 60 levels.
    """
    import av

    target = Path(path)
    video = to_uint8_frames(frames)
    sound = None
    if audio is not None:
        if not sample_rate:
            raise MediaError("write_video needs sample_rate when audio is given.")
        sound = fit_audio(audio, sample_rate, audio_duration_s or video.shape[0] / fps)
        if sound.shape[0] == 1:
            sound = np.repeat(sound, 2, axis=0)
    with atomic_target(target) as tmp, av.open(str(tmp), mode="w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1001), options=H264_OPTIONS)
        stream.width, stream.height, stream.pix_fmt = video.shape[2], video.shape[1], "yuv420p"
        audio_stream = container.add_stream("aac", rate=sample_rate, layout="stereo") if sound is not None else None
        for index, pixels in enumerate(video):
            frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
            frame.pts = index
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
        if audio_stream is not None:
            _encode_audio(container, audio_stream, sound[:2], sample_rate)
    return target


def _encode_audio(container: Any, stream: Any, sound: np.ndarray, sample_rate: int) -> None:
    """Planar float stereo fed to the AAC encoder in its frame size (1024 samples)."""
    import av

    step = stream.codec_context.frame_size or 1024
    for start in range(0, sound.shape[1], step):
        chunk = np.ascontiguousarray(sound[:, start : start + step])
        frame = av.AudioFrame.from_ndarray(chunk, format="fltp", layout="stereo")
        frame.sample_rate = sample_rate
        frame.pts = start
        container.mux(stream.encode(frame))
    container.mux(stream.encode())


def write_image(path: str | os.PathLike[str], frame: Any) -> Path:
    from PIL import Image

    target = Path(path)
    pixels = to_uint8_frames(frame)[0]
    with atomic_target(target) as tmp:
        Image.fromarray(pixels).save(tmp, format="PNG")
    return target


def write_wav(path: str | os.PathLike[str], audio: Any, sample_rate: int) -> Path:
    """16-bit PCM WAV, channels interleaved."""
    target = Path(path)
    array = audio.detach().cpu().float().numpy() if hasattr(audio, "detach") else np.asarray(audio, np.float32)
    if array.ndim == 1:
        array = array[None]
    pcm = (np.clip(array, -1.0, 1.0) * 32767.0).round().astype("<i2").T
    with atomic_target(target) as tmp, wave.open(str(tmp), "wb") as out:
        out.setnchannels(pcm.shape[1])
        out.setsampwidth(2)
        out.setframerate(sample_rate)
        out.writeframes(pcm.tobytes())
    return target


def _open_container(path: Path):
    import av

    if not path.is_file():
        raise MediaError(f"No such file: {path}. Check the path (it is resolved from {Path.cwd()}).")
    try:
        return av.open(str(path))
    except (av.FFmpegError, OSError) as exc:
        raise MediaError(f"{path} is not a readable image, video or audio file: {exc}") from exc


def probe(path: str | os.PathLike[str]) -> MediaInfo:
    """Decode a file and report what it really holds: frames, size, fps and its audio stream."""
    target = Path(path)
    if target.suffix.lower() == ".wav":
        return _probe_wav(target)
    with _open_container(target) as container:
        if not container.streams.video:
            raise MediaError(f"{target} has no picture stream.")
        stream = container.streams.video[0]
        num_frames = sum(1 for _ in container.decode(stream))
        rate = stream.average_rate or stream.guessed_rate or Fraction(0)
        audio = None
        if container.streams.audio:
            a = container.streams.audio[0]
            duration = float(a.duration * a.time_base) if a.duration and a.time_base else 0.0
            audio = AudioInfo(codec=a.codec_context.name, channels=a.channels, sample_rate=a.rate, duration_s=duration)
        kind = "image" if target.suffix.lower() in IMAGE_SUFFIXES else "video"
        return MediaInfo(
            path=str(target),
            kind=kind,
            width=stream.width,
            height=stream.height,
            num_frames=num_frames,
            fps=float(rate) if kind == "video" else 0.0,
            codec=stream.codec_context.name,
            pix_fmt=stream.codec_context.pix_fmt or "",
            audio=audio,
        )


def _probe_wav(path: Path) -> MediaInfo:
    if not path.is_file():
        raise MediaError(f"No such file: {path}.")
    with wave.open(str(path), "rb") as wav:
        rate, channels, frames = wav.getframerate(), wav.getnchannels(), wav.getnframes()
    audio = AudioInfo(codec="pcm_s16le", channels=channels, sample_rate=rate, duration_s=frames / rate)
    return MediaInfo(
        path=str(path),
        kind="audio",
        width=0,
        height=0,
        num_frames=0,
        fps=0.0,
        codec="pcm_s16le",
        pix_fmt="",
        audio=audio,
    )


def read_frames(path: str | os.PathLike[str], max_frames: int | None = None) -> np.ndarray:
    """Decoded RGB frames [T, H, W, 3] uint8 of a video or image file."""
    target = Path(path)
    frames: list[np.ndarray] = []
    with _open_container(target) as container:
        if not container.streams.video:
            raise MediaError(f"{target} has no picture stream.")
        try:
            for frame in container.decode(video=0):
                frames.append(frame.to_ndarray(format="rgb24"))
                if max_frames is not None and len(frames) >= max_frames:
                    break
        except Exception as exc:  # PyAV raises many decoder-specific types
            raise MediaError(f"{target} could not be decoded: {exc}") from exc
    if not frames:
        raise MediaError(f"{target} contains no decodable frames.")
    return np.stack(frames)


def read_audio(path: str | os.PathLike[str]) -> tuple[np.ndarray, int]:
    """Decoded audio [channels, samples] float32 in [-1, 1] and its sample rate, from a WAV or an MP4."""
    target = Path(path)
    if target.suffix.lower() == ".wav":
        with wave.open(str(target), "rb") as wav:
            channels, rate = wav.getnchannels(), wav.getframerate()
            pcm = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")
        return (pcm.reshape(-1, channels).T / 32767.0).astype(np.float32), rate
    with _open_container(target) as container:
        if not container.streams.audio:
            raise MediaError(f"{target} has no audio stream.")
        stream = container.streams.audio[0]
        chunks = [f.to_ndarray() for f in container.decode(stream)]
    data = np.concatenate(chunks, axis=-1) if chunks else np.zeros((stream.channels, 0), np.float32)
    return data.astype(np.float32), stream.rate


def load_image(path: str | os.PathLike[str]):
    """A conditioning image as an RGB PIL image, with a clear error when it is missing or unreadable."""
    from PIL import Image, UnidentifiedImageError

    target = Path(path).expanduser()
    if not target.is_file():
        raise MediaError(f"Conditioning image not found: {target}. Pass the path of a PNG or JPEG file.")
    try:
        with Image.open(target) as image:
            return image.convert("RGB")
    except (UnidentifiedImageError, OSError) as exc:
        raise MediaError(f"Conditioning image {target} is not a readable image (PNG, JPEG, WebP): {exc}") from exc


def load_video(path: str | os.PathLike[str], max_frames: int | None = None) -> list[Any]:
    """A conditioning video as a list of RGB PIL frames (the pipeline's canonical video input)."""
    from PIL import Image

    target = Path(path).expanduser()
    if not target.is_file():
        raise MediaError(f"Conditioning video not found: {target}. Pass the path of an MP4 file.")
    return [Image.fromarray(f) for f in read_frames(target, max_frames=max_frames)]


def fit_frame(image: Any, width: int, height: int) -> Any:
    """The image scaled to cover `width` x `height` and centre-cropped, as the pipeline prepares an i2v image (it
    stretches `video=` frames instead, so a clip's frames are fitted first)."""
    from PIL import Image

    scale = max(width / image.width, height / image.height)
    size = (max(width, round(image.width * scale)), max(height, round(image.height * scale)))
    resized = image.resize(size, Image.Resampling.LANCZOS)
    left, top = (size[0] - width) // 2, (size[1] - height) // 2
    return resized.crop((left, top, left + width, top + height))


def hstack(clips: Sequence[Sequence[Any]]) -> list[Any]:
    """PIL clips joined side by side, frame by frame, as long as the shortest (several controls in one preview)."""
    from PIL import Image

    out = []
    for frames in zip(*clips, strict=False):
        row = Image.new("RGB", (sum(f.width for f in frames), max(f.height for f in frames)))
        left = 0
        for frame in frames:
            row.paste(frame.convert("RGB"), (left, 0))
            left += frame.width
        out.append(row)
    return out


def lossless_clip(frames: Sequence[Any], fps: float) -> bytes:
    """An MP4 whose frames decode to exactly these pixels (H.264 in RGB, lossless), for uploading a clip as is."""
    import av

    pixels = [np.asarray(f.convert("RGB")) for f in frames]
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format="mp4") as container:
        stream = container.add_stream("libx264rgb", rate=Fraction(fps).limit_denominator(1001), options={"qp": "0"})
        stream.width, stream.height, stream.pix_fmt = pixels[0].shape[1], pixels[0].shape[0], "rgb24"
        for index, frame_pixels in enumerate(pixels):
            frame = av.VideoFrame.from_ndarray(frame_pixels, format="rgb24")
            frame.pts = index
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    return buffer.getvalue()


def png_bytes(image: Any) -> bytes:
    """A picture as PNG bytes, for uploading it without loss."""
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, format="PNG")
    return buffer.getvalue()


def write_array(stem: str | os.PathLike[str], array: Any, about: dict[str, Any]) -> tuple[Path, Path]:
    """A float32 array as `<stem>.npy` and its description as `<stem>.json` (its shape, then `about`), so that anyone
    can read the numbers back without this package. Returns both paths."""
    array = np.asarray(array, dtype=np.float32)
    stem = Path(stem)
    npy, meta = stem.with_suffix(".npy"), stem.with_suffix(".json")
    np.save(npy, array)
    description = {"shape": list(array.shape), "dtype": "float32", **about, "file": npy.name}
    meta.write_text(json.dumps(description, indent=2) + "\n")
    return npy, meta


def read_array(path: str | os.PathLike[str]) -> tuple[np.ndarray, dict[str, Any]]:
    """The array and the description of a `write_array` pair, from either of its two paths."""
    path = Path(path)
    npy, meta = path.with_suffix(".npy"), path.with_suffix(".json")
    if not npy.is_file() or not meta.is_file():
        raise MediaError(f"An array file is a pair {npy.name} + {meta.name}; {path.parent} lacks one of them.")
    array = np.load(npy)
    about = json.loads(meta.read_text())
    if list(array.shape) != about.get("shape"):
        raise MediaError(f"{npy} holds shape {list(array.shape)} but {meta.name} says {about.get('shape')}.")
    return array, about
