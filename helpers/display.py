"""Show media in a notebook: video players, images, audio with a waveform, and the run summary.

Media are files first (see helpers.media); these functions only display them. Videos are embedded as data so
an executed notebook stays self-contained; large files are linked instead of embedded.
"""

from __future__ import annotations

import base64
import html
import io
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from helpers import media

EMBED_LIMIT_BYTES = 8 * 2**20


def show(*objs: Any) -> None:
    """Display objects from anywhere in a cell (inside a loop or an `if`, where a last expression is not shown)."""
    from IPython.display import display

    display(*objs)


def video(path: str | os.PathLike[str], width: int = 480) -> Any:
    from IPython.display import Video

    target = Path(path)
    embed = target.stat().st_size <= EMBED_LIMIT_BYTES
    return Video(str(target), embed=embed, width=width, html_attributes="controls loop")


def side_by_side(videos: Mapping[str, str | os.PathLike[str]], width: int = 360) -> Any:
    """Videos in one row, each under its caption (a control beside what was generated from it), embedded like
    `video`, playing in a loop."""
    from IPython.display import HTML

    cells = []
    for caption, path in videos.items():
        target = Path(path)
        if target.stat().st_size <= EMBED_LIMIT_BYTES:
            source = "data:video/mp4;base64," + base64.b64encode(target.read_bytes()).decode()
        else:
            source = target.as_posix()
        cells.append(
            f"<td style='text-align:center'><video src='{html.escape(source)}' width='{width}' controls loop autoplay "
            f"muted></video><br><small>{html.escape(caption)}</small></td>"
        )
    return HTML(f"<table><tr>{''.join(cells)}</tr></table>")


def image(path: str | os.PathLike[str], width: int = 320) -> Any:
    from IPython.display import Image

    return Image(filename=str(path), width=width)


def waveform(path: str | os.PathLike[str]) -> Any:
    """A small plot of each channel of a WAV or of the AAC track of an MP4, as a PNG image."""
    import numpy as np
    from IPython.display import Image
    from matplotlib.figure import Figure

    samples, rate = media.read_audio(path)
    # A bare Figure renders without touching the kernel's pyplot backend.
    fig = Figure(figsize=(6, 1.6))
    ax = fig.subplots()
    t = np.arange(samples.shape[1]) / rate
    for i, channel in enumerate(samples):
        ax.plot(t, channel, linewidth=0.6, label=["left", "right"][i] if samples.shape[0] == 2 else f"ch{i}")
    ax.set_xlabel("seconds")
    ax.set_ylim(-1.05, 1.05)
    ax.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100)
    return Image(data=png.getvalue(), format="png")


def audio(path: str | os.PathLike[str]) -> Any:
    from IPython.display import Audio

    return Audio(filename=str(path))


def show_outputs(gen: Any) -> None:
    """Display each file one generation wrote (`run.generation`'s handle): player, picture, waveform."""
    root = Path(gen.run.path)
    for out in gen.outputs:
        path = root / out.path
        if out.kind == "image":
            show(image(path))
        elif out.kind == "video":
            show(video(path))
        elif out.kind == "audio":
            show(audio(path))
            show(waveform(path))
        show(_caption(out))


def _caption(out: Any) -> Any:
    from IPython.display import Markdown

    size = f"{out.width}x{out.height}, " if out.width else ""
    frames = f"{out.num_frames} frames @ {out.fps:g} fps, " if out.kind == "video" else ""
    sound = "with AAC sound, " if out.has_audio and out.kind == "video" else ""
    return Markdown(f"`{out.path}`: {size}{frames}{sound}{out.seconds:.2f} s")


def preview_grid(rows: Mapping[str, Mapping[str, Any]], width: int = 200) -> Any:
    """Frames in a grid: one row per label, one picture per column (`{row: {column: frames [T, H, W, 3] in 0..1}}`);
    each cell shows the middle frame of its video."""
    from IPython.display import HTML
    from PIL import Image

    def cell(caption: str, frames: Any) -> str:
        png = io.BytesIO()
        Image.fromarray(media.to_uint8_frames(frames)[len(frames) // 2]).save(png, format="PNG")
        data = base64.b64encode(png.getvalue()).decode()
        return (
            f"<td style='text-align:center'><img src='data:image/png;base64,{data}' style='width:{width}px'>"
            f"<br><small>{html.escape(caption)}</small></td>"
        )

    body = "".join(
        f"<tr><th>{html.escape(label)}</th>{''.join(cell(c, f) for c, f in columns.items())}</tr>"
        for label, columns in rows.items()
    )
    return HTML(f"<table>{body}</table>")


def announce_run(run: Any) -> None:
    """Say where this run writes: its files and their `manifest.json`."""
    print(f"Writing to {run.path}")


def settings_table(settings: Mapping[str, Any], **columns: Any) -> Any:
    """One row per mode with every setting that decides its output (plus `columns`, the same in every row)."""
    return table(
        {
            "mode": mode,
            "size": s.size,
            "frames": s.num_frames,
            "fps": s.fps,
            "steps": s.num_inference_steps,
            "guidance": s.guidance_scale,
            "flow_shift": s.flow_shift,
            "sound": s.enable_sound,
            "seed": s.seed,
            **columns,
        }
        for mode, s in settings.items()
    )


def table(rows: Iterable[Mapping[str, Any]]) -> Any:
    """An HTML table of dict rows (no pandas needed)."""
    from IPython.display import HTML

    rows = list(rows)
    if not rows:
        return HTML("<p><em>Nothing to show.</em></p>")
    head = "".join(f"<th>{html.escape(str(k))}</th>" for k in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row.values()) + "</tr>" for row in rows)
    return HTML(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
