"""The benchmark scripts on the tiny checkpoint (CPU): they run, and their result files hold the rows the docs quote.

They measure nothing here; the numbers come from the same scripts on a GPU (docs/performance.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Each benchmark script runs whole generations in processes of its own (minutes on a CPU).
pytestmark = pytest.mark.slow


def _run(args: list[str]) -> None:
    subprocess.run([sys.executable, *args], cwd=REPO, check=True, capture_output=True, text=True, timeout=900)


def test_every_benchmark_script_imports() -> None:
    """The scripts that run only on a GPU (attention kernels, the first video, the HTTP overhead, ...) are not run
    here; importing each still catches a name that moved, as `cookbook_tools.pipelines` once did."""
    scripts = sorted(p.stem for p in (REPO / "support" / "benchmarks").glob("*.py"))
    code = "import sys; sys.path.insert(0, 'support/benchmarks'); " + "; ".join(f"import {name}" for name in scripts)
    _run(["-c", code])


def test_gpu_benchmark_times_every_preset_and_a_memory_cap_in_one_process(tmp_path: Path) -> None:
    out = tmp_path / "table.json"
    _run(
        [
            "support/benchmarks/gpu_benchmark.py",
            "--arch",
            "tiny",
            "--device",
            "cpu",
            "--modes",
            "t2v,t2i",
            "--tiers",
            "256p",
            "--frames",
            "9",
            "--plan",
            "256p:2",
            "--speeds",
            "baseline,fast,low_vram",
            "--caps",
            "low_vram:256p:24:2",
            "--out",
            str(out),
        ]
    )
    rows = json.loads(out.read_text())["rows"]
    assert [(r["speed"], r["mode"]) for r in rows] == [
        ("baseline", "t2v"),
        ("baseline", "t2i"),
        ("fast", "t2v"),
        ("fast", "t2i"),
        ("low_vram", "t2v"),
    ]
    image = next(r for r in rows if r["speed"] == "fast" and r["mode"] == "t2i")
    assert image["steps_timed"] == image["steps"] == 50 and not image["extrapolated"]  # images: every step
    assert all("psnr_db" in r for r in rows if r["speed"] != "baseline")  # each compared with the baseline
    assert rows[-1]["cap_gib"] == 24.0 and "text_tower_offload" in rows[-1]["speedups"]
    table = subprocess.run(
        [sys.executable, "support/benchmarks/gpu_benchmark.py", "--table", str(out)],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert table.count("\n| t2") == len(rows)


def test_cold_start_runs_each_speed_in_its_own_process_with_one_shared_cache(tmp_path: Path) -> None:
    out = tmp_path / "cold.json"
    _run(
        [
            "support/benchmarks/cold_start.py",
            "--arch",
            "tiny",
            "--device",
            "cpu",
            "--frames",
            "9",
            "--steps",
            "2",
            "--out",
            str(out),
        ]
    )
    rows = json.loads(out.read_text())["rows"]
    assert [r["run"] for r in rows] == ["none", "fast, cold", "fast, warm"]
    assert all(r["first"]["frames"] == 9 and r["first"]["total_s"] > 0 for r in rows)
    assert "second" in rows[-1]  # the warm run also times its steady second video


def test_image_steps_reports_each_tiers_step_time(tmp_path: Path) -> None:
    out = tmp_path / "steps.json"
    _run(
        [
            "support/benchmarks/image_steps.py",
            "--arch",
            "tiny",
            "--device",
            "cpu",
            "--tiers",
            "256p,480p",
            "--steps",
            "3",
            "--out",
            str(out),
        ]
    )
    rows = json.loads(out.read_text())["rows"]
    assert [r["tier"] for r in rows] == ["256p", "480p"]
    # No CUDA graphs here: the graph and host-wait fields appear only on a GPU.
    assert all(r["step_wall_ms"] > 0 and "cond_graph_ms" not in r for r in rows)


def test_speed_table_compares_each_row_with_the_saved_reference(tmp_path: Path) -> None:
    out, reference = tmp_path / "table.json", tmp_path / "reference.safetensors"
    _run(
        ["support/benchmarks/speed_table.py", "--arch", "tiny", "--device", "cpu", "--tier", "256", "--frames", "9"]
        + ["--steps", "3", "--rows", "none,fp8_turbo", "--reference", str(reference), "--out", str(out)]
    )
    none, turbo = json.loads(out.read_text())["rows"]
    assert reference.stat().st_size > 0 and none["mean_abs_levels"] == 0
    # fp8_turbo on a CPU: compiled with the text cache, its FP8 and FlashAttention-3 skipped, no step skipped in 3;
    # its first call decoded the saved reference, which it then matches up to numerical noise.
    assert turbo["skipped"] == ["fp8_linears", "flash_attention_3"] and turbo["decoder_passes"] == "6 of 6"
    assert turbo["mean_abs_levels"] < 1 and turbo["cache"] == "nvidia", turbo
    assert all(r["end_to_end_s"] >= r["sampling_s"] > 0 and r["first_call_s"] > 0 for r in (none, turbo))


def test_a_speed_table_row_is_a_speed_with_switches_dropped_or_added_a_threshold_and_a_seed() -> None:
    import sys

    sys.path.insert(0, str(REPO / "support" / "benchmarks"))
    from speed_table import Row

    row = Row.parse("fp8-cuda_graphs+sea_cache:threshold=0.5:seed=1")
    assert (row.speed, row.dropped, row.added, row.settings) == (
        "fp8",
        ("cuda_graphs",),
        ("sea_cache",),
        {"threshold": 0.5, "seed": 1.0},
    )
    assert "sea_cache" in row.switches() and "cuda_graphs" not in row.switches() and not row.is_reference
    assert Row.parse("none").is_reference and not Row.parse("none:seed=1").is_reference
    for wrong in ("warp", "fp8:speed=2"):
        with pytest.raises(SystemExit):
            Row.parse(wrong)
