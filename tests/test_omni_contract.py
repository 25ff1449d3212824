"""The real vLLM-Omni server against its contract (docs/vllm-omni-contract.md), over real HTTP.

The session's `vllm serve <tiny> --omni` serves the whole module; requests are smoke-sized (64x64, 5 frames,
1 step) so the module stays quick on two CPU cores. The second half drives the same server with the OpenAI SDK
calls the spec lists as working against vLLM-Omni.
"""

from __future__ import annotations

import base64
import io
import json
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from PIL import Image

from cosmos3_audiovisual import modes
from helpers import media
from local_server.omni_http import MULTIPART
from local_server.server import LocalServer
from tests.conftest import SERVER_KEY

# Every test here talks to the session's real vLLM-Omni server.
pytestmark = pytest.mark.slow

SMALL = {"size": "64x64", "num_frames": "5", "fps": "24", "num_inference_steps": "1", "guidance_scale": "1.0"}
SMALL_IMAGE = {"size": "64x64", "num_inference_steps": 1, "guidance_scale": 1.0, "seed": 3}
# vLLM-Omni's form accepts any negative_metadata_mode and Cosmos 3's pipeline fails this one once generation starts
# (a 500); the room limits refuse it first, naming the key.
PIPELINE_ERROR = {"extra_params": json.dumps({"negative_metadata_mode": "sideways"})}


@pytest.fixture(scope="module")
def sdk(omni_server: LocalServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{omni_server.base_url}/v1", api_key=SERVER_KEY, max_retries=0) as client:
        yield client


@pytest.fixture(scope="module")
def small_png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (32, 32), (200, 30, 30)).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def small_mp4(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    import numpy as np

    path = tmp_path_factory.mktemp("clip") / "clip.mp4"
    media.write_video(path, np.zeros((5, 32, 32, 3), np.uint8), 24)
    return path.read_bytes()


def decoded(tmp_path: Path, data: bytes, name: str = "out.mp4") -> media.MediaInfo:
    path = tmp_path / name
    path.write_bytes(data)
    return media.probe(path)


def assert_envelope(response: httpx.Response, status: int, type_: str, param: str | None, message: str) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == status and error["type"] == type_ and error["param"] == param
    assert message in error["message"], error["message"]


def wait_done(http: httpx.Client, job_id: str, timeout_s: float = 120) -> httpx.Response:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        response = http.get(f"/v1/videos/{job_id}")
        if response.json()["status"] in ("completed", "failed"):
            return response
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not finish")


# --- health, models, unrouted --------------------------------------------------------------------------------


def test_health_and_models_have_the_vllm_shapes(http: httpx.Client) -> None:
    assert http.get("/health").json() == {"status": "healthy"}
    models = http.get("/v1/models").json()
    assert models["object"] == "list" and len(models["data"]) == 1
    card = models["data"][0]
    assert card["id"] == "tiny" and card["object"] == "model" and card["owned_by"] == "vllm"
    assert Path(card["root"], "model_index.json").is_file()  # the folder given to `vllm serve`, not the served name
    assert card["parent"] is None and card["max_model_len"] is None
    assert card["permission"][0]["object"] == "model_permission" and card["permission"][0]["allow_sampling"] is True


def test_unknown_route_and_wrong_method_keep_fastapis_detail_shape(http: httpx.Client) -> None:
    assert (http.get("/v1/nothing").status_code, http.get("/v1/nothing").json()) == (404, {"detail": "Not Found"})
    response = http.get("/v1/images/generations")
    assert (response.status_code, response.json()) == (405, {"detail": "Method Not Allowed"})


# --- /v1/images/generations -----------------------------------------------------------------------------------


def test_image_b64_response_ignores_unknown_keys_and_reports_size_and_metrics(http: httpx.Client) -> None:
    body = {"prompt": "a red cube", "model": "tiny", **SMALL_IMAGE, "quality": "hd", "style": "vivid", "extra_args": {}}
    response = http.post("/v1/images/generations", json=body)
    assert response.status_code == 200, response.text
    data = response.json()
    assert set(data) == {"created", "data", "output_format", "size", "cot_output", "metrics"}
    assert data["output_format"] == "png" and data["size"] == "64x64" and data["cot_output"] is None
    assert set(data["metrics"]) >= {"stage_durations", "peak_memory_mb"}
    item = data["data"][0]
    assert item["url"] is None and item["revised_prompt"] is None
    image = Image.open(io.BytesIO(base64.b64decode(item["b64_json"])))
    assert (image.format, image.size) == ("PNG", (64, 64))


def test_image_file_response_unknown_format_becomes_jpeg_and_n2_is_a_zip(http: httpx.Client) -> None:
    one = http.post(
        "/v1/images/generations", json={"prompt": "x", **SMALL_IMAGE, "response_format": "file", "output_format": "bmp"}
    )
    assert one.status_code == 200 and one.headers["content-type"] == "image/jpeg"
    assert one.headers["content-disposition"].startswith('attachment; filename="image_')
    assert Image.open(io.BytesIO(one.content)).format == "JPEG"
    two = http.post("/v1/images/generations", json={"prompt": "x", **SMALL_IMAGE, "n": 2, "response_format": "file"})
    names = zipfile.ZipFile(io.BytesIO(two.content)).namelist()
    assert two.headers["content-type"] == "application/zip" and names == ["image_0.png", "image_1.png"]


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        ({}, "body.prompt", "Field required"),
        ({"prompt": "x", "size": "1024"}, "body.size", "WIDTHxHEIGHT"),
        ({"prompt": "x", "response_format": "url"}, "body.response_format", "validation error"),
        ({"prompt": "x", "n": 11}, "body.n", "validation error"),
        ({"prompt": "x", "num_inference_steps": 0}, "body.num_inference_steps", "validation error"),
    ],
)
def test_image_validation_errors_are_400_with_the_failing_field(http, body, param, message) -> None:
    assert_envelope(http.post("/v1/images/generations", json=body), 400, "Bad Request", param, message)


@pytest.mark.parametrize(
    ("size", "param", "message"),
    [
        ("axb", None, "Invalid size format: 'axb'. Width and height must be integers."),
        ("1x2x3", None, "Did you mean to use 'x' as separator?"),
        ("0x64", "size", "size='0x64' is not a size: give WIDTHxHEIGHT with two positive whole numbers"),
        ("10000x10000", "size", "asks for 100,000,000 pixels a frame, over this server's room limit of 1,048,576"),
    ],
)
def test_image_size_errors_are_400s_from_the_route_or_the_room_limits(http, size, param, message) -> None:
    """A size that is not WxH is the route's to refuse; one that is not positive, or over the room's limits, the
    room limits answer first (`local_server.room_limits`; the route's own words are in docs/vllm-omni-contract.md)."""
    assert_envelope(
        http.post("/v1/images/generations", json={"prompt": "x", "size": size}), 400, "Bad Request", param, message
    )


def test_a_zero_video_size_is_a_400_on_both_routes(http: httpx.Client) -> None:
    """vLLM-Omni alone answers the synchronous route's `0x64` with a 500 ("Video generation failed: Invalid size"):
    a participant's typo reported as the server's failure. The room limits answer both routes with a 400."""
    for route in ("/v1/videos", "/v1/videos/sync"):
        answer = http.post(route, data={"prompt": "x", **SMALL, "size": "0x64"})
        assert_envelope(answer, 400, "Bad Request", "size", "size='0x64' is not a size")


def test_images_reject_non_json_bodies_with_400_not_415(http: httpx.Client) -> None:
    form = http.post("/v1/images/generations", data={"prompt": "x"})
    assert_envelope(form, 400, "Bad Request", None, "Unsupported Media Type: Only 'application/json' is allowed")
    broken = http.post("/v1/images/generations", content=b"{not json", headers={"content-type": "application/json"})
    assert_envelope(broken, 400, "Bad Request", "body.1", "json_invalid")


def test_images_reject_another_model_name(http: httpx.Client) -> None:
    response = http.post("/v1/images/generations", json={"prompt": "x", "model": "nvidia/Cosmos3-Super"})
    assert_envelope(
        response,
        400,
        "Bad Request",
        None,
        "Model mismatch: request specifies 'nvidia/Cosmos3-Super' but server is running 'tiny'.",
    )


# --- /v1/videos/sync -------------------------------------------------------------------------------------------


def test_sync_video_urlencoded_with_empty_and_unknown_fields(http: httpx.Client, tmp_path: Path) -> None:
    # No file part, so httpx sends application/x-www-form-urlencoded; seed="" means unset, max_sequence_length is
    # not a form field and is ignored.
    form = {"prompt": "a ball", "model": "tiny", **SMALL, "seed": "", "negative_prompt": "", "max_sequence_length": "9"}
    response = http.post("/v1/videos/sync", data=form)
    assert response.status_code == 200, response.text
    headers = response.headers
    assert headers["content-type"] == "video/mp4" and headers["x-request-id"].startswith("video_sync-")
    assert headers["x-model"] == "tiny" and json.loads(headers["x-stage-durations"])
    for name in ("x-inference-time-s", "x-peak-memory-mb"):
        assert len(headers[name].split(".")[1]) == 3 and float(headers[name]) >= 0
    info = decoded(tmp_path, response.content)
    assert (info.codec, info.pix_fmt, info.width, info.height, info.num_frames, info.fps) == (
        "h264",
        "yuv420p",
        64,
        64,
        5,
        24.0,
    )
    assert info.audio is None


def test_sync_video_with_sound_has_a_stereo_aac_track(http: httpx.Client, tmp_path: Path) -> None:
    response = http.post("/v1/videos/sync", data={"prompt": "rain", **SMALL, "generate_sound": "yes"})
    assert response.status_code == 200, response.text
    audio = decoded(tmp_path, response.content).audio
    assert audio is not None and (audio.codec, audio.channels, audio.sample_rate) == ("aac", 2, 48000)
    assert audio.duration_s == pytest.approx(5 / 24, abs=0.03)  # num_frames / fps when no duration is given


@pytest.mark.parametrize(
    ("fields", "seconds"),
    [({"sound_duration": "0.5"}, 0.5), ({"extra_params": '{"audio_duration": 0.3}'}, 0.3)],
)
def test_sound_duration_sets_the_length_of_the_aac_track(
    http: httpx.Client, tmp_path: Path, fields: dict[str, str], seconds: float
) -> None:
    # 17 frames at 24 fps (0.71 s): the room limits take no sound longer than its video.
    data = {"prompt": "rain", **SMALL, "num_frames": "17", "generate_sound": "true", **fields}
    response = http.post("/v1/videos/sync", data=data)
    assert response.status_code == 200, response.text
    assert decoded(tmp_path, response.content).audio.duration_s == pytest.approx(seconds, abs=0.03)


@pytest.mark.parametrize("asset", ["i2v", "v2v"])
def test_input_reference_is_sniffed_by_content_not_name(http: httpx.Client, tmp_path: Path, asset: str) -> None:
    data = modes.conditioning(asset).read_bytes()
    files = {"input_reference": ("upload.bin", data, "application/octet-stream")}
    response = http.post("/v1/videos/sync", data={"prompt": "go on", **SMALL}, files=files)
    assert response.status_code == 200, response.text
    assert decoded(tmp_path, response.content).num_frames == 5


@pytest.mark.parametrize(
    ("form", "param", "message"),
    [
        ({"prompt": ""}, "body.prompt", "Field required"),
        ({"prompt": "x", "size": "12"}, "body.size", "String should match pattern"),
        ({"prompt": "x", "seconds": "7.5"}, "body.seconds", "String should match pattern"),
        ({"prompt": "x", "num_frames": "many"}, "body.num_frames", "int_parsing"),
        ({"prompt": "x", "generate_sound": "maybe"}, "body.generate_sound", "bool_parsing"),
    ],
)
def test_form_parsing_errors_are_400_validation_errors(http, form, param, message) -> None:
    assert_envelope(http.post("/v1/videos/sync", data=form), 400, "Bad Request", param, message)


def test_a_json_body_is_not_read_so_the_prompt_is_missing(http: httpx.Client) -> None:
    assert_envelope(http.post("/v1/videos", json={"prompt": "x"}), 400, "Bad Request", "body.prompt", "missing")


@pytest.mark.parametrize(
    ("form", "type_", "message"),
    [
        ({"num_inference_steps": "0"}, "BadRequestError", "greater than or equal to 1"),
        ({"width": "0", "height": "16"}, "BadRequestError", "greater than or equal to 1"),
        ({"quality": "best"}, "BadRequestError", "lossless"),
        ({"extra_params": "{not json"}, "Bad Request", "Invalid JSON in form field."),
        ({"extra_params": "[1, 2]"}, "Bad Request", "Invalid JSON in form field: expected dict, got list."),
        ({"model": "other"}, "Bad Request", "Model mismatch: request specifies 'other' but server is running 'tiny'."),
        (
            {"image_reference": json.dumps({"image_url": "aGVsbG8="})},
            "Bad Request",
            "must be an http(s) URL or data URL",
        ),
        ({"image_reference": json.dumps({"file_id": "f"})}, "Bad Request", "file_id is not supported yet"),
    ],
)
def test_form_stage_errors_are_400_before_any_generation(http, form, type_, message) -> None:
    for route in ("/v1/videos/sync", "/v1/videos"):
        assert_envelope(http.post(route, data={"prompt": "x", **form}), 400, type_, None, message)


def test_a_non_image_upload_is_rejected(http: httpx.Client) -> None:
    files = {"input_reference": ("notes.png", b"this is text, not a picture", "image/png")}
    response = http.post("/v1/videos/sync", data={"prompt": "x"}, files=files)
    assert_envelope(
        response, 400, "Bad Request", None, "Invalid input_reference: provided content is not a valid image or video."
    )


def test_upload_and_reference_together_are_rejected(http: httpx.Client, small_png: bytes) -> None:
    png = small_png
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    response = http.post(
        "/v1/videos/sync",
        data={"prompt": "x", "image_reference": json.dumps({"image_url": url})},
        files={"input_reference": ("a.png", png, "image/png")},
    )
    assert_envelope(response, 400, "Bad Request", None, "Provide only one of input_reference")


def test_an_oversize_text_part_gets_starlettes_unwrapped_detail(http: httpx.Client) -> None:
    big = json.dumps({"pad": "x" * (1024 * 1024 + 10)})
    response = http.post(
        "/v1/videos/sync", data={"prompt": "x", "extra_params": big}, files={"unused": ("a.txt", b"x", "text/plain")}
    )
    assert (response.status_code, response.json()) == (400, {"detail": "Part exceeded maximum size of 1024KB."})


def test_a_value_the_pipeline_would_fail_is_the_room_limits_400_on_both_routes(http: httpx.Client) -> None:
    """vLLM-Omni alone passes `extra_params` to the pipeline unchecked, which fails this one as the server's error
    (500 `Video generation failed: Cosmos3 negative_metadata_mode must be ...`, a failed job with code 500); the room
    limits refuse it first with a 400 that names the key."""
    for route in ("/v1/videos/sync", "/v1/videos"):
        response = http.post(route, data={"prompt": "x", **SMALL, **PIPELINE_ERROR})
        assert_envelope(
            response, 400, "Bad Request", "extra_params.negative_metadata_mode", "is not one of none, same, inverse"
        )


# --- asynchronous jobs -----------------------------------------------------------------------------------------


def test_job_lifecycle_create_poll_content_list_delete(http: httpx.Client, tmp_path: Path) -> None:
    created = http.post("/v1/videos", data={"prompt": "a ball", **SMALL, "seed": "5"})
    assert created.status_code == 200, created.text
    job = created.json()
    assert job["id"].startswith("video_gen_") and job["object"] == "video" and job["status"] == "queued"
    assert (job["progress"], job["seconds"], job["quality"], job["size"]) == (0, "4", "default", "64x64")
    assert (job["fps"], job["num_frames"], job["media_type"], job["file_name"]) == (24.0, 5, "video/mp4", None)
    done = wait_done(http, job["id"]).json()
    assert (done["status"], done["progress"], done["file_name"]) == ("completed", 100, f"{job['id']}.mp4")
    assert done["num_frames"] == 5 and done["fps"] == 24.0 and done["completed_at"] >= done["created_at"]
    assert done["inference_time_s"] > 0 and done["error"] is None
    content = http.get(f"/v1/videos/{job['id']}/content", params={"variant": "thumbnail"})
    assert content.status_code == 200 and content.headers["content-type"] == "video/mp4"
    assert f'filename="{job["id"]}.mp4"' in content.headers["content-disposition"]
    assert decoded(tmp_path, content.content).num_frames == 5
    listed = http.get("/v1/videos", params={"order": "asc"}).json()
    assert listed["object"] == "list" and job["id"] in [j["id"] for j in listed["data"]]
    assert listed["first_id"] == listed["data"][0]["id"] and listed["has_more"] is False
    deleted = http.delete(f"/v1/videos/{job['id']}")
    assert deleted.json() == {"id": job["id"], "deleted": True, "object": "video.deleted"}
    assert_envelope(http.get(f"/v1/videos/{job['id']}"), 404, "Not Found", None, "Video not found")
    assert_envelope(http.get(f"/v1/videos/{job['id']}/content"), 404, "Not Found", None, "Video not found")


def mixed_references(png: bytes, mp4: bytes) -> dict[str, str]:
    """An image and a video reference together: accepted as a job, which then fails with vLLM-Omni's own 400."""
    return {
        "image_reference": json.dumps({"image_url": f"data:image/png;base64,{base64.b64encode(png).decode()}"}),
        "video_reference": json.dumps({"video_url": f"data:video/mp4;base64,{base64.b64encode(mp4).decode()}"}),
    }


def test_a_failed_job_answers_with_its_error_code_and_content_is_422(
    http: httpx.Client, small_png: bytes, small_mp4: bytes
) -> None:
    job = http.post("/v1/videos", data={"prompt": "x", **SMALL, **mixed_references(small_png, small_mp4)}).json()
    failed = wait_done(http, job["id"])
    assert failed.status_code == 400
    body = failed.json()
    assert body["status"] == "failed" and body["error"]["code"] == 400 and body["error"]["message"]
    assert_envelope(
        http.get(f"/v1/videos/{job['id']}/content"),
        422,
        "Unprocessable Entity",
        None,
        "Video generation failed. Check job status for error details.",
    )
    assert http.delete(f"/v1/videos/{job['id']}").json()["deleted"] is True


def test_mixed_image_and_video_references_fail_the_job_with_400(
    http: httpx.Client, small_png: bytes, small_mp4: bytes
) -> None:
    png = base64.b64encode(small_png).decode()
    mp4 = base64.b64encode(small_mp4).decode()
    form = {
        "prompt": "x",
        **SMALL,
        "image_reference": json.dumps({"image_url": f"data:image/png;base64,{png}"}),
        "video_reference": json.dumps({"video_url": f"data:video/mp4;base64,{mp4}"}),
    }
    job = http.post("/v1/videos", data=form)
    assert job.status_code == 200 and job.json()["status"] == "queued"
    failed = wait_done(http, job.json()["id"])
    assert failed.status_code == 400
    assert failed.json()["error"] == {
        "code": 400,
        "message": "This diffusion model does not support mixed image and video references.",
    }


def test_a_queued_job_has_no_content_yet_and_can_be_deleted(http: httpx.Client) -> None:
    slow = {**SMALL, "num_inference_steps": "6"}
    first = http.post("/v1/videos", data={"prompt": "first", **slow}).json()
    second = http.post("/v1/videos", data={"prompt": "second", **slow}).json()
    assert_envelope(
        http.get(f"/v1/videos/{second['id']}/content"), 404, "Not Found", None, "Generation is still in-progress"
    )
    assert http.delete(f"/v1/videos/{second['id']}").json()["deleted"] is True
    assert wait_done(http, first["id"]).json()["status"] == "completed"
    assert http.get(f"/v1/videos/{second['id']}").status_code == 404


def test_list_paging_and_its_limits(http: httpx.Client, small_png: bytes, small_mp4: bytes) -> None:
    failing = {"prompt": "x", **SMALL, **mixed_references(small_png, small_mp4)}  # jobs that end at once
    ids = [http.post("/v1/videos", data=failing).json()["id"] for _ in range(2)]
    for job_id in ids:
        wait_done(http, job_id)
    listed = http.get("/v1/videos").json()["data"]
    assert set(ids) <= {j["id"] for j in listed}
    # Newest first by `created_at`, which counts whole seconds: jobs of the same second keep the order they came in.
    assert [j["created_at"] for j in listed] == sorted((j["created_at"] for j in listed), reverse=True)
    page = http.get("/v1/videos", params={"limit": 0}).json()
    assert page["data"] == [] and page["has_more"] is True
    assert http.get("/v1/videos", params={"after": "video_gen_unknown"}).json()["data"] == []
    after = http.get("/v1/videos", params={"after": ids[0], "order": "asc"}).json()["data"]
    assert after[0]["id"] == ids[1]
    assert_envelope(http.get("/v1/videos", params={"limit": 101}), 400, "Bad Request", "query.limit", "less than")
    for job_id in ids:
        http.delete(f"/v1/videos/{job_id}")


# --- OpenAI SDK compatibility (docs/vllm-omni-contract.md §6) ---------------------------------------------------------


def test_sdk_models_list(sdk: openai.OpenAI) -> None:
    assert [m.id for m in sdk.models.list()] == ["tiny"]


def test_sdk_images_generate_with_extra_body(sdk: openai.OpenAI) -> None:
    extra = {k: v for k, v in SMALL_IMAGE.items() if k != "size"} | {
        "negative_prompt": "",
        "flow_shift": 3.0,
        "extra_params": {"guardrails": False},
    }
    result = sdk.images.generate(
        model="tiny", prompt="x", size="64x64", n=1, response_format="b64_json", output_format="png", extra_body=extra
    )
    assert Image.open(io.BytesIO(base64.b64decode(result.data[0].b64_json))).size == (64, 64)


def test_sdk_video_job_create_retrieve_download_list_delete(sdk: openai.OpenAI, tmp_path: Path) -> None:
    fields = {k: v for k, v in SMALL.items() if k != "size"} | {"extra_params": json.dumps({"guardrails": False})}
    job = sdk.videos.create(
        model="tiny", prompt="x", size="64x64", seconds="4", extra_body=fields, extra_headers=MULTIPART
    )
    assert job.status == "queued"
    deadline = time.monotonic() + 120
    while (job := sdk.videos.retrieve(job.id)).status != "completed":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    path = tmp_path / "job.mp4"
    sdk.videos.download_content(job.id).write_to_file(path)
    assert media.probe(path).num_frames == 5
    assert job.id in [v.id for v in sdk.videos.list(limit=100).data]
    assert sdk.videos.delete(job.id).deleted is True


def test_sdk_raises_for_a_failed_job_with_the_jobs_error(
    sdk: openai.OpenAI, small_png: bytes, small_mp4: bytes
) -> None:
    job = sdk.videos.create(
        model="tiny",
        prompt="x",
        size="64x64",
        extra_body={"num_frames": "5", "num_inference_steps": "1", **mixed_references(small_png, small_mp4)},
        extra_headers=MULTIPART,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            sdk.videos.retrieve(job.id)
        except openai.BadRequestError as err:
            assert err.status_code == 400 and "message" in err.body
            break
        assert time.monotonic() < deadline
        time.sleep(0.2)
    sdk.videos.delete(job.id)


def test_sdk_remix_does_not_exist(sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError):
        sdk.videos.remix("video_gen_x", prompt="again")
