"""make_it_fast_with_diffusers.ipynb end to end on the tiny checkpoint: the reference and the timed runs are written
and decoded, `fast` keeps the output, and the several-GPU section prints its command without running it."""

from __future__ import annotations

import nbformat
import pytest

from cookbook_tools import notebooks
from tests.notebook_checks import check_tuning_run, error_outputs

NAME = notebooks.TUNING

pytestmark = pytest.mark.notebook


def test_fast_is_timed_against_the_reference_and_keeps_the_output(tmp_path):
    executed = notebooks.execute(
        NAME,
        tmp_path / NAME,
        {"MODEL": "tiny", "PRESET": "smoke", "SPEED": "fast", "SEED": 2, "OUTPUT_DIR": str(tmp_path / "media")},
    )
    assert error_outputs(executed) == []
    info = notebooks.run_info(executed)
    check_tuning_run(notebooks.run_folder_from(executed), info["timings"], ["t2v", "t2i"], "smoke", 2, "fast")
    # The several-GPU section, with GPUS=1, prints the torchrun command and runs nothing.
    printed = "".join(
        o.get("text", "") for c in nbformat.read(executed, as_version=4).cells for o in c.get("outputs", [])
    )
    assert "-m tuning.several_gpus" in printed and "GPUS=1" in printed
    assert info["memory_after_cleanup"]["allocated_gib"] < 0.1
