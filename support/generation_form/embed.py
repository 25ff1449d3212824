"""Media as self-contained HTML (data URIs), for widgets, which cannot take IPython display objects."""

from __future__ import annotations

import os
from pathlib import Path

from helpers.display import waveform


def embedded_html(path: str | os.PathLike[str], kind: str, width: int = 480) -> str:
    """Self-contained HTML for a media file (data URI), for widgets that cannot take IPython display objects."""
    import base64

    data = base64.b64encode(Path(path).read_bytes()).decode()
    if kind == "image":
        return f'<img src="data:image/png;base64,{data}" style="max-width:{width}px">'
    if kind == "video":
        return f'<video src="data:video/mp4;base64,{data}" controls loop style="max-width:{width}px"></video>'
    wave = base64.b64encode(waveform(path).data).decode()
    return (
        f'<audio src="data:audio/wav;base64,{data}" controls></audio><br>'
        f'<img src="data:image/png;base64,{wave}" style="max-width:{width}px">'
    )
