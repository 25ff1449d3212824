"""The vLLM-Omni HTTP contract as the real server answers it: the cases, and their recorded answers.

Each case sends one request (or a short sequence, for jobs) to a `vllm serve <tiny> --omni` server and keeps what
came back: the status, the content type, the `X-*` and `Content-Disposition` headers and the JSON body, with what
changes from run to run (ids, clocks, timings, base64 pictures, the checkpoint folder) replaced by its shape. The
answers are committed under `tests/fixtures/vllm_omni/`; the client code's tests read them, and a test re-sends the
quick cases to the session's server and requires the same answers, so the fixtures stay the real server's.

The server is the cookbook's (`serve_vllm_omni.sh`): vLLM-Omni behind the room limits (`local_server.room_limits`),
which answer a `WxH` size that is not positive, one too large, or a value Cosmos 3's pipeline would fail, before
vLLM-Omni reads it (the cases `ROOM_LIMITS` names; docs/vllm-omni-contract.md gives vLLM-Omni's own answers to
them). Every other answer is vLLM-Omni's own.

Record them again (after a vLLM-Omni upgrade) with `python -m cookbook_tools.contract`, which starts a server on
`tiny` (or uses `--base-url`); `--cases a,b` records only those.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "vllm_omni"
MODEL = "tiny"
SMALL = {"model": MODEL, "size": "64x64", "num_frames": "5", "fps": "24", "num_inference_steps": "1", "seed": "1"}
SMALL_IMAGE = {"model": MODEL, "size": "64x64", "num_inference_steps": 1, "guidance_scale": 1.0, "seed": 3}
# Accepted by vLLM-Omni's form and refused by Cosmos 3's pipeline once generation starts (a 500); the room limits
# refuse it first, naming the key.
PIPELINE_ERROR = json.dumps({"negative_metadata_mode": "sideways"})
# Forward dynamics for a car: eight 9-D ego-pose deltas (translation, 6-D rotation) from a start image, 256p.
AV_CHUNK, AV_WIDTH = 8, 9
ACTION_FIELDS = {"action_mode": "forward_dynamics", "domain_name": "av", "raw_action_dim": AV_WIDTH}
ACTION_FIELDS |= {"action_chunk_size": AV_CHUNK, "resolution": "256"}
VOLATILE_NUMBERS = {"created", "created_at", "completed_at", "expires_at", "inference_time_s", "peak_memory_mb"}


def _png(width: int = 32, height: int = 32) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(buffer, format="PNG")
    return buffer.getvalue()


def _clip(frames: int, width: int, height: int, fps: float) -> bytes:
    from PIL import Image

    from helpers import media

    return media.lossless_clip([Image.new("RGB", (width, height), (20 * i, 90, 160)) for i in range(frames)], fps)


def _finished(http: httpx.Client, created: httpx.Response, timeout_s: float = 300) -> httpx.Response:
    job_id = created.json()["id"]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        answer = http.get(f"/v1/videos/{job_id}")
        if answer.json().get("status") in ("completed", "failed"):
            return answer
        time.sleep(0.2)
    raise TimeoutError(f"job {job_id} did not finish within {timeout_s:.0f} s")


def _job(http: httpx.Client, then: str = "", **form: str) -> httpx.Response:
    """Create a job, wait for it, then GET `then` under it (or the finished job itself); the job is deleted."""
    done = _finished(http, http.post("/v1/videos", data={**SMALL, "prompt": "a ball", **form}))
    job_id = done.json()["id"]
    answer = http.get(f"/v1/videos/{job_id}{then}") if then else done
    http.delete(f"/v1/videos/{job_id}")
    return answer


def _mixed_references() -> dict[str, str]:
    """An image and a video reference together: the job is accepted, then fails with vLLM-Omni's own 400."""
    import base64

    png = base64.b64encode(_png()).decode()
    mp4 = base64.b64encode(_clip(5, 32, 32, 24)).decode()
    return {
        "image_reference": json.dumps({"image_url": f"data:image/png;base64,{png}"}),
        "video_reference": json.dumps({"video_url": f"data:video/mp4;base64,{mp4}"}),
    }


def _deleted(http: httpx.Client) -> httpx.Response:
    done = _finished(http, http.post("/v1/videos", data={**SMALL, "prompt": "a ball"}))
    return http.delete(f"/v1/videos/{done.json()['id']}")


def _forward_dynamics(http: httpx.Client) -> httpx.Response:
    actions = [[0.1 * step] + [0.0] * (AV_WIDTH - 1) for step in range(AV_CHUNK)]
    form = {
        "model": MODEL,
        "prompt": "A car drives along a straight road.",
        "num_frames": str(AV_CHUNK + 1),
        "fps": "10",
        "num_inference_steps": "1",
        "seed": "1",
        "extra_params": json.dumps({**ACTION_FIELDS, "action": actions}),
    }
    created = http.post("/v1/videos", data=form, files={"input_reference": ("start.png", _png(320, 192), "image/png")})
    return _finished(http, created)


def _edge_control(http: httpx.Client) -> httpx.Response:
    form = {**SMALL, "prompt": "a street", "size": "320x192", "num_frames": "9", "fps": "10", "control_type": "edge"}
    form["extra_params"] = json.dumps({"resolution": "256"})
    files = {"control_reference": ("edge.mp4", _clip(9, 320, 192, 10), "video/mp4")}
    return http.post("/v1/videos/sync", data=form, files=files)


@dataclass(frozen=True)
class Case:
    name: str
    send: Callable[[httpx.Client], httpx.Response]
    quick: bool = True  # re-sent to the session's server by the tests (the slow action and transfer ones are not)
    key: bool = True  # sends the API key (False: the 401 case)


CASES = (
    Case("health", lambda h: h.get("/health")),
    Case("models", lambda h: h.get("/v1/models")),
    Case("models_without_key", lambda h: h.get("/v1/models"), key=False),
    Case("unknown_route", lambda h: h.get("/v1/nothing")),
    Case("wrong_method", lambda h: h.get("/v1/images/generations")),
    Case("image_b64", lambda h: h.post("/v1/images/generations", json={"prompt": "a red cube", **SMALL_IMAGE})),
    Case(
        "image_file_unknown_format",
        lambda h: h.post(
            "/v1/images/generations",
            json={"prompt": "x", **SMALL_IMAGE, "response_format": "file", "output_format": "bmp"},
        ),
    ),
    Case("image_missing_prompt", lambda h: h.post("/v1/images/generations", json={"model": MODEL})),
    Case("image_size_without_x", lambda h: h.post("/v1/images/generations", json={"prompt": "x", "size": "1024"})),
    Case(
        "image_url_format", lambda h: h.post("/v1/images/generations", json={"prompt": "x", "response_format": "url"})
    ),
    Case("image_zero_size", lambda h: h.post("/v1/images/generations", json={"prompt": "x", "size": "0x64"})),
    Case("image_form_body", lambda h: h.post("/v1/images/generations", data={"prompt": "x"})),
    Case(
        "image_model_mismatch",
        lambda h: h.post("/v1/images/generations", json={"prompt": "x", "model": "nvidia/Cosmos3-Super"}),
    ),
    Case("video_sync", lambda h: h.post("/v1/videos/sync", data={**SMALL, "prompt": "a ball"})),
    Case(
        "video_sync_sound",
        lambda h: h.post("/v1/videos/sync", data={**SMALL, "prompt": "rain", "generate_sound": "true"}),
    ),
    Case(
        "video_sync_image_reference",
        lambda h: h.post(
            "/v1/videos/sync",
            data={**SMALL, "prompt": "go on"},
            files={"input_reference": ("a.png", _png(), "image/png")},
        ),
    ),
    Case("video_json_body", lambda h: h.post("/v1/videos", json={"prompt": "x"})),
    Case("video_bad_size", lambda h: h.post("/v1/videos/sync", data={**SMALL, "prompt": "x", "size": "12"})),
    Case("video_zero_size_sync", lambda h: h.post("/v1/videos/sync", data={**SMALL, "prompt": "x", "size": "0x64"})),
    Case("video_zero_size_job", lambda h: h.post("/v1/videos", data={**SMALL, "prompt": "x", "size": "0x64"})),
    Case(
        "video_steps_zero",
        lambda h: h.post("/v1/videos/sync", data={**SMALL, "prompt": "x", "num_inference_steps": "0"}),
    ),
    Case("video_bad_json", lambda h: h.post("/v1/videos/sync", data={**SMALL, "prompt": "x", "extra_params": "{no"})),
    Case("video_model_mismatch", lambda h: h.post("/v1/videos/sync", data={**SMALL, "prompt": "x", "model": "other"})),
    Case(
        "video_not_a_picture",
        lambda h: h.post(
            "/v1/videos/sync",
            data={**SMALL, "prompt": "x"},
            files={"input_reference": ("notes.png", b"text, not a picture", "image/png")},
        ),
    ),
    Case(
        "video_oversize_part",
        lambda h: h.post(
            "/v1/videos/sync",
            data={**SMALL, "prompt": "x", "extra_params": json.dumps({"pad": "x" * (1024 * 1024 + 10)})},
            files={"unused": ("a.txt", b"x", "text/plain")},
        ),
    ),
    Case(
        "video_pipeline_error_sync",
        lambda h: h.post("/v1/videos/sync", data={**SMALL, "prompt": "x", "extra_params": PIPELINE_ERROR}),
    ),
    Case("job_created", lambda h: h.post("/v1/videos", data={**SMALL, "prompt": "a ball"})),
    Case("job_completed", lambda h: _job(h)),
    Case("job_content", lambda h: _job(h, "/content")),
    Case("job_failed", lambda h: _job(h, **_mixed_references())),
    Case("job_failed_content", lambda h: _job(h, "/content", **_mixed_references())),
    Case("job_deleted", _deleted),
    Case("job_unknown", lambda h: h.get("/v1/videos/video_gen_unknown")),
    Case("job_list_limit_too_large", lambda h: h.get("/v1/videos", params={"limit": 101})),
    Case("action_forward_dynamics_job", _forward_dynamics, quick=False),
    Case("transfer_edge_upload", _edge_control, quick=False),
)


# The cases the room limits answer in front of vLLM-Omni.
ROOM_LIMITS = ("image_zero_size", "video_zero_size_sync", "video_zero_size_job", "video_pipeline_error_sync")


def _shape(value: Any) -> str:
    return f"<{type(value).__name__}>"


def _normalize(value: Any, key: str = "") -> Any:
    """The body with what differs between runs replaced by its shape; everything else kept to the letter."""
    if isinstance(value, dict):
        if key == "stage_durations":
            return {k: _shape(v) for k, v in value.items()}
        return {k: _normalize(v, k) for k, v in value.items()}
    if isinstance(value, list):
        if key == "data" and value and all(isinstance(v, list | float | int) for v in value):
            return f"<list of {len(value)}>"  # an action array's numbers
        return [_normalize(v, key) for v in value]
    if value is None or isinstance(value, bool):
        return value
    if key in VOLATILE_NUMBERS and isinstance(value, int | float):
        return _shape(value)
    if key == "b64_json":
        return "<base64>"
    if key == "root":
        return "<the checkpoint folder given to vllm serve>"
    if isinstance(value, str):
        value = re.sub(r"video_gen_[0-9a-f]{32}", "video_gen_<hex>", value)
        value = re.sub(r"modelperm-[0-9a-f]+", "modelperm-<hex>", value)
    return value


def _header(name: str, value: str) -> str:
    if name == "x-stage-durations":
        return json.dumps({k: _shape(v) for k, v in json.loads(value).items()})
    if name in ("x-inference-time-s", "x-peak-memory-mb"):
        # The number varies, its format does not.
        return "<number with three decimals>" if re.fullmatch(r"\d+\.\d{3}", value) else value
    return re.sub(r"[0-9a-f]{8,}", "<hex>", value)


def snapshot(response: httpx.Response) -> dict[str, Any]:
    """What a fixture keeps of a response."""
    content_type = response.headers.get("content-type", "").split(";")[0]
    headers = {
        name: _header(name, value)
        for name, value in sorted(response.headers.items())
        if name.startswith("x-") or name == "content-disposition"
    }
    body: Any = f"<{'non-empty' if response.content else 'empty'} {content_type} body>"
    if content_type == "application/json":
        body = _normalize(response.json())
    return {"status": response.status_code, "content_type": content_type, "headers": headers, "body": body}


def client(base_url: str, api_key: str | None, case: Case) -> httpx.Client:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key and case.key else {}
    return httpx.Client(base_url=base_url, headers=headers, timeout=600)


def answer(base_url: str, api_key: str | None, case: Case) -> dict[str, Any]:
    with client(base_url, api_key, case) as http:
        return snapshot(case.send(http))


def case(name: str) -> Case:
    return next(c for c in CASES if c.name == name)


def fixture_path(case: Case) -> Path:
    return FIXTURES / f"{case.name}.json"


def recorded(case: Case) -> dict[str, Any]:
    return json.loads(fixture_path(case).read_text())


def record(
    base_url: str, api_key: str | None, folder: Path = FIXTURES, cases: list[Case] | tuple[Case, ...] = CASES
) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for case in cases:
        path = folder / f"{case.name}.json"
        path.write_text(json.dumps({"case": case.name, **answer(base_url, api_key, case)}, indent=2) + "\n")
        written.append(path)
        print(f"recorded {path.name}")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", help="a running `vllm serve <tiny> --omni --served-model-name tiny` server")
    parser.add_argument("--api-key", default="cookbook-contract-key", help="its --api-key (the 401 case needs one)")
    parser.add_argument("--cases", default="", help="record only these cases (comma-separated names)")
    args = parser.parse_args()
    cases = [case(name.strip()) for name in args.cases.split(",") if name.strip()] or list(CASES)
    if args.base_url:
        record(args.base_url.rstrip("/"), args.api_key, cases=cases)
        return
    from local_server.server import LocalServer

    with LocalServer.start(MODEL, api_key=args.api_key, flags=["--no-guardrails"]) as server:
        record(server.base_url, args.api_key, cases=cases)


if __name__ == "__main__":
    main()
