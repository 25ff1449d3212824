"""run_with_diffusers.ipynb used the way a person uses it: opened in JupyterLab in headless Chromium, run with the
Run menu's "Run All Cells" on the tiny checkpoint, then its generation form filled in and Generate clicked. Proves
every cell runs in a real JupyterLab kernel with no error shown, the outputs render, and the form's result is a
playable H.264 `<video>` in the page. A screenshot is kept as an artifact."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import nbformat
import papermill
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from helpers import media
from helpers.assets import notebook_path
from helpers.audiovisual_settings import MODE_TITLES
from tests.browser import (
    JupyterLab,
    assert_frames_decode,
    assert_playable,
    chromium,
    jupyterlab,
    media_state,
    page,
    screenshot,
    traceback_texts,
)

__all__ = ["chromium", "jupyterlab", "page"]  # fixtures used by name below

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

NAME = "run_with_diffusers.ipynb"
KERNEL_START_TIMEOUT_MS = 90_000
RUN_ALL_TIMEOUT_MS = 150_000
GENERATE_TIMEOUT_MS = 90_000
FORM_MODE = "t2v"  # a video mode: the form's result must be a <video>

# The open notebook panel, read from JupyterLab's own model (the server runs with expose_app_in_browser):
# null until `path` is the current tab, loaded, with a kernel; then the kernel status and every code cell's
# execution count and output types.
NOTEBOOK_STATE_JS = """
(path) => {
  const panel = window.jupyterapp?.shell?.currentWidget;
  if (!panel || !panel.content || !panel.context?.isReady || panel.context.path !== path) return null;
  const kernel = panel.sessionContext?.session?.kernel;
  if (!kernel) return null;
  const cells = [];
  for (const cell of panel.content.model.cells) {
    if (cell.type !== 'code') continue;
    cells.push({
      count: cell.executionCount,
      outputs: cell.outputs.toJSON().map((o) => o.output_type),
      errors: cell.outputs.toJSON().filter((o) => o.output_type === 'error').map((o) => `${o.ename}: ${o.evalue}`),
    });
  }
  return { kernel: kernel.status, kernelName: kernel.name, cells };
}
"""

# True once every code cell has finished ("[*]" is queued or running), none is stuck, and the kernel is idle.
RUN_FINISHED_JS = """
(path) => {
  const panel = window.jupyterapp.shell.currentWidget;
  if (panel.context.path !== path) return false;
  const prompts = [...panel.node.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
  const busy = prompts.some((p) => p.textContent.includes('*'));
  const ran = prompts.some((p) => /\\[\\d+\\]/.test(p.textContent));
  return ran && !busy && panel.sessionContext.session?.kernel?.status === 'idle';
}
"""

# Text of every rendered output in the notebook (error tracebacks render as stderr-style text).
OUTPUT_TEXTS_JS = "() => [...document.querySelectorAll('.jp-OutputArea-output')].map((o) => o.textContent)"


def _write_parameterized_copy(lab: JupyterLab) -> tuple[str, Path]:
    nb = papermill.iorw.load_notebook_node(str(notebook_path(NAME)))
    media_dir = lab.root / "media"
    # KEEP_LOADED: the form must still generate after "Run All" has reached the cleanup cell.
    params = {"MODEL": "tiny", "PRESET": "smoke", "MODES": "t2i", "OUTPUT_DIR": str(media_dir), "KEEP_LOADED": True}
    nbformat.write(papermill.parameterize.parameterize_notebook(nb, params), lab.root / NAME)
    return NAME, media_dir


def _listed(run_dir: Path, mode: str) -> list[tuple[str, str]]:
    """(kind, file) of each output of `mode` in the run's manifest."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    return [(o["kind"], o["path"]) for o in manifest["outputs"] if o["mode"] == mode]


def _assert_no_error_shown(page: Any, state: dict[str, Any]) -> None:
    errors = [e for cell in state["cells"] for e in cell["errors"]]
    assert errors == [], f"error outputs in the notebook: {errors}"
    shown = traceback_texts(page.evaluate(OUTPUT_TEXTS_JS))
    assert shown == [], f"tracebacks rendered in the notebook: {[t[:500] for t in shown]}"


def test_notebook_runs_in_jupyterlab_and_the_form_generates_a_playable_video(jupyterlab: JupyterLab, page: Any) -> None:
    path, media_dir = _write_parameterized_copy(jupyterlab)
    page.goto(jupyterlab.url(f"lab/tree/{path}?reset"))
    page.wait_for_function(
        f"(path) => {{ const s = ({NOTEBOOK_STATE_JS})(path); return s && s.kernel === 'idle'; }}",
        arg=path,
        timeout=KERNEL_START_TIMEOUT_MS,
    )
    state = page.evaluate(NOTEBOOK_STATE_JS, path)
    assert state["kernelName"] == "python3"
    assert all(c["count"] is None for c in state["cells"]), "the copy starts unexecuted"

    # Run > Run All Cells, through the menu bar as a person would.
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel").get_by_text("Run All Cells", exact=True).click()
    page.wait_for_function(RUN_FINISHED_JS, arg=path, timeout=RUN_ALL_TIMEOUT_MS)
    state = page.evaluate(NOTEBOOK_STATE_JS, path)
    _assert_no_error_shown(page, state)
    assert all(isinstance(c["count"], int) for c in state["cells"]), f"cells left unrun: {state['cells']}"
    # The run wrote its files and the t2i section shows the picture it made.
    (run_dir,) = media_dir.iterdir()
    assert [kind for kind, _ in _listed(run_dir, "t2i")] == ["image"]
    notebook_media = media_state(page, ".jp-Notebook")
    assert notebook_media["images"] and all(i["naturalWidth"] > 0 for i in notebook_media["images"])

    form = page.locator(".cookbook-form")
    try:
        form.wait_for(state="visible", timeout=10_000)
    except PlaywrightTimeoutError:
        pytest.fail(f"{NAME} shows no generation form (no element with class cookbook-form) after Run All")
    form.scroll_into_view_if_needed()
    mode = form.locator(".widget-dropdown").filter(has=page.locator("label", has_text=re.compile(r"^Mode$")))
    mode.locator("select").select_option(label=f"{MODE_TITLES[FORM_MODE]} ({FORM_MODE})")
    form.get_by_role("button", name="Generate").click()
    # The form generates in a background thread: wait for its result (or its error) to appear in the page.
    page.wait_for_function(
        """() => {
          const form = document.querySelector('.cookbook-form');
          const error = form.querySelector('.cookbook-form-error');
          return form.querySelector('video') || (error && error.textContent.trim());
        }""",
        timeout=GENERATE_TIMEOUT_MS,
    )
    error_text = form.locator(".cookbook-form-error").all_text_contents()
    assert all(not t.strip() for t in error_text), f"the form shows an error: {error_text}"
    result = media_state(page, ".cookbook-form")
    assert len(result["videos"]) == 1, result
    assert_playable(result["videos"])
    assert_frames_decode(page, ".cookbook-form")
    _assert_no_error_shown(page, page.evaluate(NOTEBOOK_STATE_JS, path))
    # What the page plays is the file the form wrote into the notebook's run folder and manifest.
    ((kind, video),) = _listed(run_dir, FORM_MODE)
    assert kind == "video" and media.probe(run_dir / video).codec == "h264"
    form.scroll_into_view_if_needed()
    screenshot(page, "notebook-form")
