"""An interactive generation form (ipywidgets) on top of `generation_form.backends`.

ipywidgets swallows exceptions raised in button callbacks, so everything the button does goes through
`GenerationForm.submit()`, which tests call directly: it records the error in `last_error`, shows its message in
the form, and raises it. The button runs `submit()` in a worker thread so the Stop button stays clickable.
"""

from __future__ import annotations

import html
import threading
from pathlib import Path
from typing import Any

from generation_form import backends, embed
from helpers import audiovisual_settings
from helpers.errors import InvalidSettingError
from helpers.runs import Output, Run
from helpers.settings import TIERS, get_preset

PRESET_DEFAULT = "(preset)"


def _parse_optional(text: str, kind: type, name: str) -> Any:
    text = text.strip()
    if not text:
        return None
    try:
        return kind(text)
    except ValueError:
        raise InvalidSettingError(
            f"{name} must be a {kind.__name__}, got {text!r} (leave it empty for the preset's)."
        ) from None


class GenerationForm:
    """Mode, prompt, preset and overrides, an optional upload, Generate / Stop, progress and the result."""

    def __init__(self, backend: backends.Backend, run: Run, *, preset: str = "draft", seed: int = 0):
        import ipywidgets as w

        get_preset(audiovisual_settings.PRESETS, preset)
        self.backend = backend
        self.run = run
        self.last_error: BaseException | None = None
        self.last_outputs: list[Output] = []
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None

        # ipywidgets shows a None value as an empty box, so "use the preset's value" is "" or 0 here.
        keep_number = [(PRESET_DEFAULT, 0)]
        self.mode = w.Dropdown(
            options=[(f"{audiovisual_settings.MODE_TITLES[m]} ({m})", m) for m in audiovisual_settings.MODES],
            description="Mode",
        )
        self.prompt = w.Textarea(
            placeholder="Empty: the bundled structured prompt for the mode. Plain text or a JSON object.",
            description="Prompt",
            layout=w.Layout(width="95%", height="5em"),
        )
        self.preset = w.Dropdown(options=list(audiovisual_settings.PRESETS), value=preset, description="Preset")
        self.tier = w.Dropdown(options=keep_number + [(f"{t}p", t) for t in TIERS], description="Tier")
        self.aspect_ratio = w.Dropdown(
            options=list(audiovisual_settings.ASPECT_RATIOS), value="16:9", description="Aspect"
        )
        self.num_frames = w.Dropdown(
            options=keep_number + [(str(n), n) for n in audiovisual_settings.FRAME_CHOICES], description="Frames"
        )
        self.fps = w.Dropdown(
            options=keep_number + [(str(f), f) for f in audiovisual_settings.FPS_CHOICES], description="FPS"
        )
        self.steps = w.Text(placeholder=PRESET_DEFAULT, description="Steps")
        self.guidance = w.Text(placeholder=PRESET_DEFAULT, description="Guidance")
        self.seed = w.IntText(value=seed, description="Seed")
        self.sound = w.Checkbox(value=False, description="Sound (sound modes add it anyway)", indent=False)
        self.upload = w.FileUpload(accept="image/*,video/*", multiple=True, description="Condition")
        self.generate_button = w.Button(description="Generate", button_style="primary", icon="play")
        self.stop_button = w.Button(description="Stop", button_style="warning", icon="stop", disabled=True)
        self.progress = w.IntProgress(value=0, min=0, max=1, description="Progress")
        self.status = w.Label(value="")
        self.error = w.HTML(value="")
        self.error.add_class("cookbook-form-error")
        self.result = w.HTML(value="")
        self.result.add_class("cookbook-form-result")

        self.generate_button.on_click(lambda _: self.click_generate())
        self.stop_button.on_click(lambda _: self.stop())
        cells = [
            self.preset,
            self.tier,
            self.aspect_ratio,
            self.num_frames,
            self.fps,
            self.steps,
            self.guidance,
            self.seed,
        ]
        for cell in cells:  # fill the grid column, with room for the longest label
            cell.layout.width = "auto"
            cell.style.description_width = "64px"
        grid = w.GridBox(
            cells,
            layout=w.Layout(grid_template_columns="repeat(4, minmax(0, 1fr))", grid_gap="4px 12px", width="95%"),
        )
        self.widget = w.VBox(
            [
                w.HTML(
                    f"<b>Generate with Cosmos 3</b> <span style='color:#666'>({html.escape(backend.name)}, "
                    f"writing to {html.escape(str(run.path))})</span>"
                ),
                self.mode,
                self.prompt,
                grid,
                w.HBox([self.sound, self.upload]),
                w.HBox([self.generate_button, self.stop_button, self.progress, self.status]),
                self.error,
                self.result,
            ]
        )
        self.widget.add_class("cookbook-form")

    def _ipython_display_(self) -> None:
        from IPython.display import display as show

        show(self.widget)

    def settings(self) -> audiovisual_settings.AudiovisualSettings:
        """The settings the current widget values describe (validated; errors name the allowed values)."""
        overrides: dict[str, Any] = {
            "num_frames": self.num_frames.value or None,
            "fps": self.fps.value or None,
            "num_inference_steps": _parse_optional(self.steps.value, int, "Steps"),
            "guidance_scale": _parse_optional(self.guidance.value, float, "Guidance"),
            "seed": self.seed.value,
        }
        if self.tier.value:
            overrides.update(tier=self.tier.value, aspect_ratio=self.aspect_ratio.value)
        if self.sound.value:
            overrides["enable_sound"] = True
        return audiovisual_settings.settings_for(self.mode.value, self.preset.value, **overrides)

    def _uploaded_references(self) -> list[Path]:
        """Save the uploaded files into the run folder (new names where one exists) and return their paths."""
        inputs = self.run.path / "inputs"
        saved = []
        for item in self.upload.value:
            inputs.mkdir(exist_ok=True)
            name = Path(item["name"]).name or "upload"
            target = inputs / name
            n = 1
            while target.exists():
                target = inputs / f"{Path(name).stem}-{n}{Path(name).suffix}"
                n += 1
            target.write_bytes(bytes(item["content"]))
            saved.append(target)
        return saved

    def request(self) -> backends.Request:
        return backends.build_request(
            self.mode.value, self.settings(), prompt=self.prompt.value, references=self._uploaded_references()
        )

    def _on_progress(self, done: int, total: int, status: str) -> None:
        self.progress.max = max(total, 1)
        self.progress.value = min(done, self.progress.max)
        self.status.value = f"{status} {done}/{total}"

    def submit(self) -> list[Output]:
        """Generate with the current values; show the result (or the error) in the form and return the outputs."""
        self._stop.clear()
        self.last_error = None
        self.error.value = ""
        self.generate_button.disabled, self.stop_button.disabled = True, False
        try:
            req = self.request()
            with self.run.generation(req.settings) as gen:
                self.backend.generate(req, gen, self._on_progress, self._stop.is_set)
            self.last_outputs = list(gen.outputs)
            self._show(gen.outputs, req)
            return self.last_outputs
        except BaseException as exc:
            self.last_error = exc
            self.status.value = "stopped" if isinstance(exc, backends.GenerationStopped) else "failed"
            self.error.value = (
                f"<pre style='color:#b00020;white-space:pre-wrap'>{html.escape(type(exc).__name__)}: "
                f"{html.escape(str(exc))}</pre>"
            )
            raise
        finally:
            self.generate_button.disabled, self.stop_button.disabled = False, True

    def _show(self, outputs: list[Output], req: backends.Request) -> None:
        s = req.settings
        players = "".join(embed.embedded_html(self.run.path / o.path, o.kind) for o in outputs)
        frames = "" if s.is_image else f", {s.num_frames} frames @ {s.fps} fps"
        facts = (
            f"{html.escape(req.mode)} · {s.size}{frames} · {s.num_inference_steps} steps · guidance "
            f"{s.guidance_scale:g} · seed {s.seed} · preset {html.escape(s.preset)} · "
            f"{outputs[0].seconds:.2f} s · {html.escape(outputs[0].path)}"
        )
        self.result.value = f"<div>{players}</div><p>{facts}</p>"
        self.status.value = f"done in {outputs[0].seconds:.1f} s"

    def click_generate(self) -> None:
        """What the Generate button does: `submit()` in a worker thread, so that Stop stays clickable."""
        if self._worker is not None and self._worker.is_alive():
            return

        def work() -> None:
            try:
                self.submit()
            except BaseException:  # noqa: BLE001 - already in last_error and shown in the form
                pass

        self._worker = threading.Thread(target=work, name="cookbook-form", daemon=True)
        self._worker.start()

    def wait(self, timeout_s: float | None = None) -> None:
        """Block until a generation started by the button has finished."""
        if self._worker is not None:
            self._worker.join(timeout_s)

    def close(self) -> None:
        """Close the widgets and let go of the backend (and so of the pipeline or client it holds).

        ipywidgets keeps every open widget, and with it the button callbacks that refer to this form, alive until
        it is closed; a notebook that wants its GPU memory back closes the form first.
        """
        self.stop()
        self.wait(timeout_s=60)
        _close_tree(self.widget)
        self.backend.close()

    def stop(self) -> None:
        """Ask the running generation to stop at the next denoising step (or cancel the server job)."""
        self._stop.set()
        self.status.value = "stopping..."


def _close_tree(widget: Any) -> None:
    for child in getattr(widget, "children", ()):
        _close_tree(child)
    widget.close()
