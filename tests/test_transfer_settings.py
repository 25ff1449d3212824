"""`cosmos3_transfer.transfer_settings`: the transfer settings and checks, and the tables copied from diffusers and
vLLM-Omni, kept equal to the installed sources."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cosmos3_transfer import transfer_settings
from helpers.errors import InvalidSettingError, MediaError
from local_server import launcher


def _frames(count: int, size: tuple[int, int] = (320, 192)) -> list[Image.Image]:
    return [Image.new("RGB", size, (i, i, i)) for i in range(count)]


def test_hints_are_in_diffusers_canonical_order() -> None:
    from diffusers.modular_pipelines.cosmos.before_encoder import Cosmos3TransferSetupStep

    source = inspect.getsource(Cosmos3TransferSetupStep.__call__)
    order = ast.literal_eval(re.search(r"hint_order = (\[.*?\])", source).group(1))
    assert list(transfer_settings.HINTS) == order
    assert transfer_settings.settings_for(["seg", "edge"], "smoke").hints == ("edge", "seg")


def _vllm_omni_tables() -> dict[str, object]:
    (path,) = launcher.environment_dir(gpu=False).glob(
        "lib/python3.*/site-packages/vllm_omni/diffusion/models/cosmos3/transfer.py"
    )
    tables = {}
    for node in ast.parse(Path(path).read_text()).body:
        target = (
            node.target
            if isinstance(node, ast.AnnAssign)
            else (node.targets[0] if isinstance(node, ast.Assign) else None)
        )
        if isinstance(target, ast.Name) and target.id.isupper():
            try:
                tables[target.id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return tables


@pytest.mark.slow
def test_the_tables_equal_vllm_omnis(omni_server) -> None:
    # The session's server installed vLLM-Omni 0.30.0; its transfer module is read, not imported.
    v = _vllm_omni_tables()
    assert tuple(transfer_settings.HINTS) == v["TRANSFER_HINT_KEYS"]
    for hint, h in transfer_settings.HINTS.items():
        defaults = v["TRANSFER_DEFAULTS"][hint]
        assert (h.control_guidance, h.guidance_scale) == (defaults["control_guidance"], defaults["guidance_scale"])
        assert defaults["flow_shift"] == transfer_settings.FLOW_SHIFT
        assert h.chunk == defaults.get("num_video_frames_per_chunk", h.chunk)
    assert transfer_settings.EDGE_THRESHOLDS == {k: t for k, t in v["EDGE_PRESETS"].items() if k != "none"}
    blur = {
        k: (v["BLUR_PRE_BLUR_DOWNSCALE_PRESETS"][k], v["BLUR_DOWNUP_PRESETS"][k])
        for k in transfer_settings.BLUR_FACTORS
    }
    assert transfer_settings.BLUR_FACTORS == blur


def test_presets_and_overrides() -> None:
    s = transfer_settings.settings_for("seg", "published")
    assert (s.num_frames, s.fps, s.resolution_tier, s.num_inference_steps, s.control_guidance) == (
        121,
        30,
        720,
        50,
        2.0,
    )
    assert (
        transfer_settings.settings_for(["edge", "depth"], "draft").control_guidance
        == transfer_settings.MULTI_CONTROL_GUIDANCE
    )
    wsm = transfer_settings.settings_for("wsm", "published")
    assert (wsm.num_frames, wsm.fps, wsm.num_video_frames_per_chunk, wsm.guidance_scale) == (100, 10, 101, 1.0)
    chunked = transfer_settings.settings_for("edge", "draft", num_video_frames_per_chunk=61)
    assert (
        chunked.num_chunks == 2
        and transfer_settings.settings_for("edge", "draft", num_video_frames_per_chunk=41).num_chunks == 3
    )


@pytest.mark.parametrize(
    ("hints", "overrides", "message"),
    [
        ("normal", {}, "hint 'normal' is not a Cosmos 3 control"),
        (["edge", "edge"], {}, "names a control twice"),
        ([], {}, "hints is empty"),
        ("edge", {"generate_sound": True}, "generate_sound cannot be combined with control videos"),
        ("edge", {"action_mode": "policy"}, "action_mode cannot be combined with control videos"),
        ("edge", {"num_video_frames_per_chunk": 60}, "num_video_frames_per_chunk=60 is not 4k + 1"),
        ("edge", {"num_conditional_frames": 9}, "num_conditional_frames=9 must be from 0"),
        ("edge", {"control_guidance": 0.5}, "control_guidance=0.5 is out of range"),
        ("edge", {"tier": 300}, "TIER=300 is not a resolution tier"),
        ("edge", {"height": 480}, "Unknown setting(s) ['height']"),
    ],
)
def test_bad_settings_name_the_field(hints, overrides: dict, message: str) -> None:
    with pytest.raises(InvalidSettingError, match=re.escape(message)):
        transfer_settings.settings_for(hints, "smoke", **overrides)


def test_controls_must_be_the_canvas_and_long_enough() -> None:
    s = transfer_settings.settings_for(["edge", "depth"], "smoke")
    assert transfer_settings.check_controls({"edge": _frames(9), "depth": _frames(12)}, s) == (320, 192)
    with pytest.raises(InvalidSettingError, match="The depth control is 832x480; .* generates 320x192"):
        transfer_settings.check_controls({"edge": _frames(9), "depth": _frames(9, (832, 480))}, s)
    with pytest.raises(InvalidSettingError, match="The edge control has 3 frames; num_frames=9"):
        transfer_settings.check_controls({"edge": _frames(3), "depth": _frames(9)}, s)
    with pytest.raises(InvalidSettingError, match="are not the settings' hints"):
        transfer_settings.check_controls({"edge": _frames(9)}, s)


def test_an_unreadable_control_is_named_with_its_hint(tmp_path: Path) -> None:
    bad = tmp_path / "depth.mp4"
    bad.write_bytes(b"not a video")
    with pytest.raises(MediaError, match=r"The depth control .*depth.mp4 cannot be read"):
        transfer_settings.load_control(bad, "depth")
    with pytest.raises(MediaError, match="The seg control .*missing.mp4 cannot be read"):
        transfer_settings.load_control(tmp_path / "missing.mp4", "seg")


def test_blur_map_keeps_size_and_smooths() -> None:
    rng = np.random.default_rng(0)
    frame = Image.fromarray(rng.integers(0, 255, (192, 320, 3), dtype=np.uint8))
    (blurred,) = transfer_settings.blur_map([frame])
    assert blurred.size == frame.size
    assert np.asarray(blurred).astype(float).std() < np.asarray(frame).astype(float).std() / 3
    with pytest.raises(InvalidSettingError, match="strength='soft' is not a blur strength"):
        transfer_settings.blur_map([frame], "soft")
