"""The one SPEED table (`helpers.speeds`): each notebook's parameters comment lists exactly the values the table gives
it, each name means one thing everywhere, a value a notebook does not take is refused naming the ones it takes, and
a server this notebook starts on a CPU (Linux only) leaves out the flags that need a GPU."""

from __future__ import annotations

import sys

import pytest

from cookbook_tools import notebooks
from helpers import speeds
from helpers.errors import InvalidSettingError
from local_server import server
from tests.offered import offered
from tuning import pipelines

# Each notebook's column of the table, and whether it is a vLLM-Omni notebook (which takes what its twin and a
# server both take).
COLUMNS = {
    notebooks.PAIR[0]: ("audiovisual", False),
    notebooks.PAIR[1]: ("audiovisual", True),
    notebooks.TUNING: ("tuning", False),
    notebooks.ACTION_PAIR[0]: ("action", False),
    notebooks.ACTION_PAIR[1]: ("action", True),
    notebooks.TRANSFER_PAIR[0]: ("transfer", False),
    notebooks.TRANSFER_PAIR[1]: ("transfer", True),
    notebooks.DATASET_PAIR[0]: ("dataset", False),
    notebooks.DATASET_PAIR[1]: ("dataset", True),
    notebooks.POST_TRAINING_PAIR[0]: ("post_training", False),
    notebooks.POST_TRAINING_PAIR[1]: ("post_training", True),
}
# What the main notebooks may turn on: diffusers' own public switches, one line each in the notebook.
PUBLIC_SWITCHES = {"compile", "sea_cache", "fp8_storage", "group_offload", "vae_tiling"}


@pytest.mark.parametrize("name", notebooks.NOTEBOOKS)
def test_each_notebooks_speed_comment_lists_exactly_what_the_table_gives_it(name: str) -> None:
    column, served = COLUMNS[name]
    assert set(offered(name)["SPEED"]) == set(speeds.offered(column, served=served))


def test_a_name_means_one_thing_each_column_uses_what_its_notebook_may_and_the_order_it_applies() -> None:
    for s in speeds.SPEEDS.values():
        for column in ("audiovisual", "action", "transfer", "dataset", "post_training"):
            assert set(s.switches(column) or ()) <= PUBLIC_SWITCHES, (s.name, column)
        tuning = s.tuning or ()
        assert tuning == pipelines.check(tuning), f"{s.name}: the tuning switches in the order they apply"
        for pair, _ in pipelines.EXCLUSIVE:  # a value never holds switches that cannot compose
            assert not pair <= set(tuning), (s.name, pair)
        # The promise holds in every notebook: an exact value turns on no switch that changes the output.
        changing = set(pipelines.SWITCHES) - pipelines.EXACT_SWITCHES
        assert not s.exact or not (set(tuning) | set(s.audiovisual or ())) & changing, s.name
    assert speeds.offered("tuning")[0] == "none" and all(
        s.server is not None for s in speeds.SPEEDS.values() if s.exact
    )
    assert [row["SPEED"] for row in speeds.table()] == list(speeds.SPEEDS)


def test_the_readme_shows_the_one_table_as_the_code_has_it() -> None:
    from helpers.assets import repo_root

    rows = speeds.table()
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(f"`{v}`" if k == "SPEED" else v for k, v in row.items()) + " |" for row in rows]
    assert "\n".join(lines) in (repo_root() / "README.md").read_text()


def test_the_performance_doc_lists_every_pair_of_switches_that_cannot_compose_with_its_reason() -> None:
    from helpers.assets import repo_root

    text = (repo_root() / "docs" / "performance.md").read_text()
    for pair, why in pipelines.EXCLUSIVE:
        first, second = sorted(pair, key=pipelines.SWITCHES.index)
        assert f"| `{first}` | `{second}` | {why} |" in text, (first, second)


def test_a_value_a_notebook_does_not_take_is_refused_with_the_ones_it_takes_and_where_it_is_offered() -> None:
    with pytest.raises(
        InvalidSettingError, match=r"SPEED='fp8' .* Allowed: 'none', 'fast'\. 'fp8' is offered by the tuning"
    ):
        speeds.switches("fp8", "action")
    with pytest.raises(InvalidSettingError, match=r"SPEED='turbo' .* Allowed: 'none', 'fast'\."):
        speeds.server_flags("turbo", "transfer")
    with pytest.raises(InvalidSettingError, match="SPEED='warp' is not one of this notebook's speeds"):
        speeds.switches("warp", "tuning")


def test_a_cpu_server_leaves_out_the_flags_that_need_a_gpu() -> None:
    assert speeds.server_flags("min_vram", gpu=True) == (
        "--quantization",
        "fp8",
        "--enable-layerwise-offload",
        "--vae-use-tiling",
    )
    assert speeds.server_flags("min_vram", gpu=False) == ("--vae-use-tiling",)
    assert speeds.server_flags("low_vram", gpu=False) == ("--vae-use-tiling",)
    assert speeds.server_flags("turbo", gpu=False) == ("--cache-backend", "sea_cache")
    assert server.server_flags("tiny", "auto", "low_vram", gpu=False) == ["--vae-use-tiling", "--no-guardrails"]


@pytest.mark.parametrize(("platform", "system"), [("darwin", "macOS"), ("win32", "Windows")])
def test_a_server_of_the_notebooks_own_is_refused_off_linux_naming_base_url_and_the_shared_server(
    platform: str, system: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(server.BASE_URL_ENV, raising=False)
    monkeypatch.setattr(sys, "platform", platform)
    with pytest.raises(InvalidSettingError) as err:
        server.where("auto")
    message = str(err.value)
    assert 'BASE_URL="auto"' in message and f"this is {system}" in message and "nothing was downloaded" in message
    assert "bash scripts/serve_vllm_omni.sh tiny --host 0.0.0.0" in message and "WSL" in message
    # A server elsewhere is fine on any laptop.
    assert server.where("http://room-server:8000") == ""
    monkeypatch.setenv(server.BASE_URL_ENV, "http://room-server:8000")
    assert server.where("auto") == ""


def test_on_linux_a_server_of_the_notebooks_own_runs_where_device_says(monkeypatch: pytest.MonkeyPatch) -> None:
    from local_server import launcher

    monkeypatch.delenv(server.BASE_URL_ENV, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    assert server.where("auto", "cpu") == "cpu"
    assert server.where("auto") == ("cuda" if launcher.has_nvidia_gpu() else "cpu")
