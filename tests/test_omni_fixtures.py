"""The recorded answers of the real vLLM-Omni server (tests/fixtures/vllm_omni/, `cookbook_tools.contract`): they are
still what the server answers, and the client code reads every one of them as the notebook needs."""

from __future__ import annotations

import httpx
import openai
import pytest

from cookbook_tools import contract
from local_server import omni_http
from local_server.server import LocalServer
from tests.conftest import SERVER_KEY

QUICK = [case for case in contract.CASES if case.quick]


@pytest.mark.slow
@pytest.mark.parametrize("case", QUICK, ids=[c.name for c in QUICK])
def test_the_real_server_still_answers_as_recorded(omni_server: LocalServer, case: contract.Case) -> None:
    expected = {k: v for k, v in contract.recorded(case).items() if k != "case"}
    assert contract.answer(omni_server.base_url, SERVER_KEY, case) == expected


def _response(case: contract.Case) -> httpx.Response:
    fixture = contract.recorded(case)
    if fixture["content_type"] == "application/json":
        return httpx.Response(fixture["status"], json=fixture["body"])
    return httpx.Response(fixture["status"], content=b"...", headers={"content-type": fixture["content_type"]})


ERRORS = [c for c in contract.CASES if contract.recorded(c)["status"] >= 400]


@pytest.mark.parametrize("case", ERRORS, ids=[c.name for c in ERRORS])
def test_the_client_turns_every_recorded_error_into_the_servers_own_message(case: contract.Case) -> None:
    body = contract.recorded(case)["body"]
    with pytest.raises(omni_http.OmniAPIError) as err:
        omni_http.raise_for_error(_response(case))
    assert err.value.status == contract.recorded(case)["status"]
    inner = body.get("error", body.get("detail"))
    if isinstance(inner, dict):  # vLLM's envelope, or a failed job's own error
        assert err.value.message == inner["message"] and err.value.param == inner.get("param")
    else:  # FastAPI's unwrapped {"detail": ...}, or vLLM's {"error": "Unauthorized"}
        assert err.value.message == inner
    assert "{" not in str(err.value).split(":")[0]  # "HTTP 400: <message>", not a dict dump


def _replayed(body: object) -> object:
    """A recorded body with a number where the fixture keeps only its type."""
    if isinstance(body, dict):
        return {k: _replayed(v) for k, v in body.items()}
    if isinstance(body, list):
        return [_replayed(v) for v in body]
    return {"<int>": 1_700_000_000, "<float>": 1.5}.get(body, body) if isinstance(body, str) else body


@pytest.mark.parametrize("name", ["job_created", "job_completed"])
def test_the_sdk_reads_the_recorded_job_records_as_the_notebook_does(name: str) -> None:
    """The notebook's polling loop reads `status` and `progress` from `client.videos.retrieve`, and prints
    `num_frames`, `fps` and `inference_time_s`, which the SDK keeps as extra fields: replayed to the real SDK."""
    fixture = contract.recorded(contract.case(name))
    transport = httpx.MockTransport(lambda request: httpx.Response(fixture["status"], json=_replayed(fixture["body"])))
    with openai.OpenAI(base_url="http://replay/v1", api_key="x", http_client=httpx.Client(transport=transport)) as sdk:
        job = sdk.videos.retrieve("video_gen_0")
    assert job.status == fixture["body"]["status"] and job.progress == fixture["body"]["progress"]
    assert {"num_frames", "fps", "inference_time_s", "stage_durations"} <= set(job.model_extra)
    assert (job.model_extra["num_frames"], job.model_extra["fps"]) == (5, 24.0)


def test_the_sdk_raises_for_the_recorded_failed_job_with_its_error() -> None:
    fixture = contract.recorded(contract.case("job_failed"))
    transport = httpx.MockTransport(lambda request: httpx.Response(fixture["status"], json=_replayed(fixture["body"])))
    client = openai.OpenAI(
        base_url="http://replay/v1", api_key="x", max_retries=0, http_client=httpx.Client(transport=transport)
    )
    with client as sdk, pytest.raises(openai.BadRequestError) as err:
        sdk.videos.retrieve("video_gen_0")
    assert err.value.status_code == 400 and "mixed image and video references" in str(err.value.body)


def test_the_recorded_action_job_carries_one_action_per_step_of_the_chunk() -> None:
    action = contract.recorded(contract.case("action_forward_dynamics_job"))["body"]["action"]
    assert action["shape"] == [contract.AV_CHUNK, contract.AV_WIDTH] and action["raw_action_dim"] == contract.AV_WIDTH
    assert action["action_mode"] == "forward_dynamics" and action["data"] == f"<list of {contract.AV_CHUNK}>"


def test_the_recorded_transfer_upload_made_a_video() -> None:
    answer = contract.recorded(contract.case("transfer_edge_upload"))
    assert (answer["status"], answer["content_type"]) == (200, "video/mp4")
    assert answer["headers"]["x-model"] == "tiny"


def test_the_room_limits_answer_exactly_their_cases_and_vllm_omni_the_rest() -> None:
    """The fixtures are the cookbook's server's answers: the room limits answer the cases `contract.ROOM_LIMITS`
    names (a 400 on `size`, or on the `extra_params` key the pipeline would fail, in their words), and vLLM-Omni
    every other case."""
    room_words = ("is not a size", "is not one of none, same, inverse")
    answered = {
        c.name
        for c in contract.CASES
        if isinstance(error := contract.recorded(c)["body"], dict)
        and isinstance(error := error.get("error"), dict)
        and error.get("param") in ("size", "extra_params.negative_metadata_mode")
        and any(words in str(error.get("message")) for words in room_words)
    }
    assert answered == set(contract.ROOM_LIMITS)
