"""What a reader meets, read from the committed notebooks: the quickstart is the published call with literal
numbers (and the vLLM-Omni one's `curl` sends exactly what its Python cell sends), the tour writes the call once,
and the main pair turns on diffusers' own switches only, leaving the cookbook's patches to the tuning notebook."""

from __future__ import annotations

import ast
import re

import nbformat

from helpers.assets import notebook_path

DIFFUSERS, VLLM, TUNING = "run_with_diffusers.ipynb", "run_with_vllm_omni.ipynb", "make_it_fast_with_diffusers.ipynb"
# NVIDIA's published text-to-video call, at the 480p tier.
PUBLISHED = {"height": 480, "width": 832, "num_frames": 189, "num_inference_steps": 35, "fps": 24, "guidance": 6.0}


def _quickstart(name: str) -> tuple[str, str]:
    """(markdown, code) of the quickstart: the cell tagged `quickstart`, and the text between it and the code before."""
    cells = nbformat.read(notebook_path(name), as_version=4).cells
    at = next(i for i, c in enumerate(cells) if "quickstart" in c.metadata.get("tags", []))
    start = max(i for i in range(at) if cells[i].cell_type == "code") + 1
    return "\n".join(c.source for c in cells[start:at]), cells[at].source


def _mode_cell(name: str, mode: str) -> str:
    """The tour's code cell that makes `mode`: the first that names it and calls `generate`."""
    cells = nbformat.read(notebook_path(name), as_version=4).cells
    return next(
        c.source for c in cells if c.cell_type == "code" and f'"{mode}"' in c.source and "generate(" in c.source
    )


def _code(name: str) -> str:
    cells = nbformat.read(notebook_path(name), as_version=4).cells
    return "\n".join(c.source for c in cells if c.cell_type == "code")


def _calls(code: str, name: str) -> list[ast.Call]:
    tree = ast.parse(re.sub(r"^(\s*)[%!].*", r"\1pass", code, flags=re.M))
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and (getattr(n.func, "attr", None) or getattr(n.func, "id", None)) == name
    ]


def _literal_keywords(call: ast.Call) -> dict[str, object]:
    return {k.arg: k.value.value for k in call.keywords if isinstance(k.value, ast.Constant)}


def test_the_diffusers_quickstart_is_the_published_call_with_literal_numbers():
    _, code = _quickstart(DIFFUSERS)
    assert "Cosmos3OmniPipeline.from_pretrained(" in code
    (scheduler,) = _calls(code, "from_config")
    assert _literal_keywords(scheduler) == {"use_karras_sigmas": False, "flow_shift": 10.0}
    (call,) = [c for c in _calls(code, "pipe")]
    literal = _literal_keywords(call)
    assert (literal["fps"], literal["guidance_scale"]) == (PUBLISHED["fps"], PUBLISHED["guidance"])
    keywords = {k.arg for k in call.keywords}
    assert {
        "prompt",
        "negative_prompt",
        "num_frames",
        "height",
        "width",
        "num_inference_steps",
        "generator",
    } <= keywords
    sizes = "height, width, num_frames, num_inference_steps = {height}, {width}, {num_frames}, {num_inference_steps}"
    assert sizes.format(**PUBLISHED) in code
    assert "export_to_video(result.video" in code


def _curl_fields(markdown: str) -> dict[str, str]:
    curl = markdown[markdown.index("curl ") :]
    curl = curl[: curl.index("```")]
    return dict(re.findall(r"--form-string ['\"]([a-z_]+)=(.*?)['\"](?= |\n|$)", curl, flags=re.M))


def test_the_vllm_quickstart_sends_what_its_curl_shows_and_shows_the_published_launch_command():
    markdown, code = _quickstart(VLLM)
    launch = "\n".join(
        c.source for c in nbformat.read(notebook_path(VLLM), as_version=4).cells if c.cell_type == "markdown"
    )
    assert "docker run" in launch and "vllm serve nvidia/Cosmos3-Nano --omni" in launch
    curl = _curl_fields(markdown)
    (post,) = _calls(code, "post")
    (data,) = [k.value for k in post.keywords if k.arg == "data"]
    # The literals the cell assigns before the request (the prompt), as the request's fields name them.
    named = {
        node.targets[0].id: node.value
        for node in ast.parse(code).body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }
    sent = {
        ast.literal_eval(k): named.get(v.id, v) if isinstance(v, ast.Name) else v
        for k, v in zip(data.keys, data.values, strict=True)
    }
    assert set(curl) == set(sent), (sorted(curl), sorted(sent))
    for field in ("fps", "guidance_scale", "flow_shift", "seed"):
        assert float(curl[field]) == ast.literal_eval(sent[field]), field
    assert curl["prompt"] == ast.literal_eval(sent["prompt"]) and curl["negative_prompt"] == ast.literal_eval(
        sent["negative_prompt"]
    )
    published = "{width}x{height}".format(**PUBLISHED)
    assert curl["size"] == published and (int(curl["num_frames"]), int(curl["num_inference_steps"])) == (
        PUBLISHED["num_frames"],
        PUBLISHED["num_inference_steps"],
    )
    assert f'size, num_frames, num_inference_steps = "{published}", 189, 35' in code


def test_the_tour_writes_the_call_once_and_each_mode_shows_what_it_adds():
    # Diffusers: the quickstart's pipe(...), the tour's generate(...) that holds the call once, and the section
    # that shows a wrong call; the 4-step checkpoints' call is its own pipeline's (`fast_pipe`), without steps or
    # guidance. Every mode section calls generate with its own inputs only.
    assert len(_calls(_code(DIFFUSERS), "pipe")) == 3 and len(_calls(_code(DIFFUSERS), "fast_pipe")) == 1
    # the quickstart, generate, the 4-step checkpoint's image to video, and the two wrong requests (a model the
    # server does not serve, a size the room limits refuse)
    assert len(_calls(_code(VLLM), "post")) == 5
    for name, added in [
        (
            DIFFUSERS,
            {"i2v": "image", "v2v": "video", "t2v_sound": "enable_sound"},
        ),
        (
            VLLM,
            {"i2v": "files", "v2v": "extra_params", "t2v_sound": "generate_sound"},
        ),
    ]:
        for mode, keyword in added.items():
            calls = _calls(_mode_cell(name, mode), "generate")
            assert calls and all(keyword in {k.arg for k in c.keywords} for c in calls), (name, mode)


def test_the_main_pair_uses_only_diffusers_public_switches_and_the_tuning_notebook_the_cookbooks_own():
    code = _code(DIFFUSERS)
    used = set(re.findall(r"\bspeeds\.(\w+)", code))
    assert used <= {"switches", "configure_allocator", "meaning"}, used
    assert "torch.compile(" not in code and "compile_repeated_blocks(" in code
    tuning = set(re.findall(r"\bpatches\.(\w+)", _code(TUNING)))
    assert {"cache_text_keys_values", "replay_steps_as_cuda_graphs", "use_flash_attention"} <= tuning
