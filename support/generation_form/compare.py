"""Side-by-side comparison: one prompt and seed through several presets or backends, shown in a grid."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from generation_form import backends
from helpers.audiovisual_settings import AudiovisualSettings
from helpers.errors import InvalidSettingError
from helpers.runs import Output, Run


@dataclass(frozen=True)
class Variant:
    label: str
    backend: backends.Backend
    settings: AudiovisualSettings


def compare(run: Run, variants: list[Variant], *, prompt: str = "") -> list[tuple[str, Output]]:
    """Generate every variant with the same mode, prompt and seed; the outputs are recorded in the run."""
    if len({(v.settings.mode, v.settings.seed) for v in variants}) > 1:
        raise InvalidSettingError("A comparison keeps mode and seed fixed: give every variant the same mode and seed.")
    results = []
    for v in variants:
        request = backends.build_request(v.settings.mode, v.settings, prompt=prompt)
        mode_label = f"{v.settings.mode}-vs-{v.label}".replace(" ", "_").replace("/", "_")
        with run.generation(v.settings, name=mode_label) as gen:
            gen.extra["compare_label"] = v.label
            v.backend.generate(request, gen, lambda *_: None, lambda: False)
        results.append((v.label, gen.outputs[0]))
    return results


def grid(run: Run, results: list[tuple[str, Output]]) -> Any:
    """An HTML grid of players with each variant's settings and time under it."""
    from IPython.display import HTML

    from generation_form.embed import embedded_html

    cells = []
    for label, out in results:
        s = out.settings
        cells.append(
            f"<div style='display:inline-block;margin:6px;vertical-align:top'><b>{html.escape(label)}</b><br>"
            f"{embedded_html(run.path / out.path, out.kind, width=320)}"
            f"<br><small>{s['width']}x{s['height']}, {s['num_frames']} frames, {s['num_inference_steps']} steps, "
            f"seed {s['seed']}, {out.seconds:.2f} s</small></div>"
        )
    return HTML("".join(cells))
