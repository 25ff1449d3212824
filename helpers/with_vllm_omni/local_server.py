"""Where the vLLM-Omni notebook sends its requests: a server at `BASE_URL`, or a local stand-in it starts.

`BASE_URL="auto"` means `$OMNI_BASE_URL` when it is set, else the stand-in (`omni_standin`) started on `MODEL` with
`SPEED`'s switches; the notebook's last cell stops it again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from helpers.presets import check_guardrails

if TYPE_CHECKING:
    from omni_standin.launcher import LocalServer

BASE_URL_ENV = "OMNI_BASE_URL"
API_KEY_ENV = "OMNI_API_KEY"


@dataclass
class Endpoint:
    """Where the notebook sends requests, and the local server it started (None for an external one)."""

    base_url: str
    api_key: str | None
    server: LocalServer | None

    def describe(self) -> str:
        return "a local stand-in server started by this notebook" if self.server else "an external server"

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()


def endpoint(
    base_url: str, *, model: str, api_key: str = "", device: str = "auto", guardrails: str = "auto", speed: str = "none"
) -> Endpoint:
    """`base_url="auto"`: $OMNI_BASE_URL when set, else a local server on `model`; anything else is used as is."""
    check_guardrails(guardrails)  # before any server starts
    key = api_key or os.environ.get(API_KEY_ENV) or None
    if base_url != "auto":
        return Endpoint(base_url.rstrip("/"), key, None)
    if os.environ.get(BASE_URL_ENV):
        return Endpoint(os.environ[BASE_URL_ENV].rstrip("/"), key, None)
    from omni_standin.launcher import LocalServer

    server = LocalServer.start(
        model, api_key=key, guardrails=False if guardrails == "off" else None, device=device, speed=speed
    )
    return Endpoint(server.base_url, key, server)
