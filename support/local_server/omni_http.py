"""What the vLLM-Omni notebooks need around their HTTP calls, which they write out themselves (each notebook's `call`
cell turns settings into a request's fields, the one path there is): an httpx client whose error answers raise
`OmniAPIError` with the server's message, the server's own timing of an answer, and a wait until a server is ready.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from helpers.errors import CookbookError

# openai 2.3-2.8 send `videos.create` as JSON when there is no file; vLLM-Omni reads only forms, so force multipart.
MULTIPART = {"Content-Type": "multipart/form-data"}
START_HINT = (
    "Start one with `bash scripts/serve_vllm_omni.sh MODEL --port 8000` (MODEL=tiny runs on a CPU; real weights "
    "want a GPU, or the notebook's `docker run` command) and set BASE_URL='http://127.0.0.1:8000', or leave "
    "BASE_URL='auto' and the notebook starts one."
)


class OmniAPIError(CookbookError):
    """The server answered with an error status (or did not answer: `status` is None). `message` is its own."""

    def __init__(self, status: int | None, message: str, param: str | None = None, body: Any = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.body = body

    def __str__(self) -> str:
        where = f" (param: {self.param})" if self.param else ""
        return f"HTTP {self.status}: {self.message}{where}" if self.status is not None else self.message


class ServerUnavailableError(OmniAPIError):
    """Nothing answered at the base URL, or nothing ready in time."""

    def __init__(self, message: str):
        super().__init__(None, message)


def error_from_body(status: int, body: Any) -> OmniAPIError:
    """Read vLLM's `{"error": {...}}`, a failed job's `error`, FastAPI's `{"detail": ...}` or plain text."""
    if isinstance(body, dict) and "error" in body:
        inner = body["error"]
        if isinstance(inner, dict):
            return OmniAPIError(status, str(inner.get("message", inner)), inner.get("param"), body)
        return OmniAPIError(status, str(inner), None, body)
    if isinstance(body, dict) and "message" in body:  # the OpenAI SDK hands over the inner error object
        return OmniAPIError(status, str(body["message"]), body.get("param"), body)
    if isinstance(body, dict) and "detail" in body:
        return OmniAPIError(status, str(body["detail"]), None, body)
    text = body if isinstance(body, str) else json.dumps(body)
    return OmniAPIError(status, text or f"HTTP {status} with an empty body", None, body)


# Where a transport that knows the server process (`local_server.Endpoint.transport()`) leaves a callable that turns
# the server's error answer into one naming what happened to the server and where its log is.
EXPLAIN_ERROR = "cosmos3_explain_error"


def raise_for_error(response: httpx.Response) -> None:
    """An httpx response hook: an error status raises `OmniAPIError` carrying the server's message (and, from a
    server this notebook started, the end of its log)."""
    if response.status_code < 400:
        return
    response.read()
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    error = error_from_body(response.status_code, body)
    explain = response.extensions.get(EXPLAIN_ERROR)
    raise explain(error) if explain else error


def auth_headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def http_client(
    base_url: str,
    *,
    api_key: str | None = None,
    timeout_s: float = 900.0,
    transport: httpx.BaseTransport | None = None,
) -> httpx.Client:
    """httpx for the route the OpenAI SDK has no method for (`/v1/videos/sync`); errors raise `OmniAPIError`.
    `transport`: `Endpoint.transport()`, which names a local server's exit if it dies mid-request."""
    return httpx.Client(
        base_url=base_url,
        headers=auth_headers(api_key),
        timeout=timeout_s,
        event_hooks={"response": [raise_for_error]},
        transport=transport,
    )


def server_timing(response: httpx.Response) -> dict[str, float]:
    """The server's own time and peak memory for a `/v1/videos/sync` answer (its `X-Inference-Time-S` and
    `X-Peak-Memory-MB` headers), for the run's manifest."""
    return {
        "server_s": float(response.headers["X-Inference-Time-S"]),
        "server_peak_mb": float(response.headers["X-Peak-Memory-MB"]),
    }


def wait_for_server(
    base_url: str, *, deadline_s: float = 600.0, api_key: str | None = None, poll_s: float = 0.5
) -> list[str]:
    """Poll `/health` until it answers 200, then return the model names `/v1/models` lists (or raise
    `ServerUnavailableError` naming what was last seen and how to start a server)."""
    url = base_url.rstrip("/")
    deadline = time.monotonic() + deadline_s
    last = "no answer"
    with httpx.Client(base_url=url, headers=auth_headers(api_key), timeout=10.0) as http:
        while True:
            try:
                response = http.get("/health")
                if response.status_code == 200:
                    break
                last = f"/health answered {response.status_code} {response.text.strip()[:200]} (still loading?)"
            except httpx.TransportError as exc:
                last = f"no answer ({type(exc).__name__})"
            if time.monotonic() > deadline:
                raise ServerUnavailableError(
                    f"No vLLM-Omni server was ready at {url} within {deadline_s:.0f} s; last: {last}.\n{START_HINT}"
                )
            time.sleep(poll_s)
        response = http.get("/v1/models")
    if response.status_code == 401:
        raise OmniAPIError(401, f"{url} requires an API key: set API_KEY (or $OMNI_API_KEY) to the server's --api-key.")
    raise_for_error(response)
    return [m["id"] for m in response.json().get("data", [])]
