"""Error shapes, as vLLM's exception handlers write them (docs/vllm-omni-contract.md §1.2).

`fastapi.HTTPException`, request validation and plain exceptions become `{"error": {message, type, param, code}}`
with `code` the integer status. Starlette's own HTTP errors (unknown route, 405, multipart limits) are left to
FastAPI's default `{"detail": ...}`, because vLLM registers its handler for FastAPI's subclass only.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

# pydantic's wrapper markers that vLLM drops from `loc` when it names the failing parameter.
_INTERNAL_LOC_PARTS = frozenset({"function-wrap", "function-after", "function-before", "function-plain", "union"})


def error_body(message: str, status: int, type_: str | None = None, param: str | None = None) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": type_ or HTTPStatus(status).phrase,
            "param": param,
            "code": status,
        }
    }


def error_response(message: str, status: int, type_: str | None = None, param: str | None = None) -> JSONResponse:
    return JSONResponse(error_body(message, status, type_, param), status_code=status)


def _clean_loc(loc: Any) -> str | None:
    if not loc:
        return None
    parts = [str(p) for p in loc if not any(c in str(p) for c in "[]{}()") and str(p) not in _INTERNAL_LOC_PARTS]
    return ".".join(parts or [str(p) for p in loc])


def _validation_message(errors: list[Any]) -> str:
    if not errors:
        return "Validation error"
    lines = []
    for err in errors:
        if isinstance(err, dict):
            shown = {k: err.get(k) for k in ("type", "loc", "msg", "input")}
            shown["loc"] = _clean_loc(err.get("loc"))
            lines.append(f"  {shown}")
        else:
            lines.append(f"  {err}")
    label = "error" if len(errors) == 1 else "errors"
    return f"{len(errors)} validation {label}:\n" + "\n".join(lines)


async def _http_exception(_: Request, exc: HTTPException) -> JSONResponse:
    return error_response(str(exc.detail), exc.status_code)


async def _starlette_http_exception(request: Request, exc: StarletteHTTPException) -> Response:
    """FastAPI's own `{"detail": ...}`, except that a JSON body Python's decoder gave up on says why: FastAPI's
    message for it, "There was an error parsing the body", does not."""
    cause = exc.__cause__
    if isinstance(cause, RecursionError | ValueError):
        reason = "it is nested too deeply to parse" if isinstance(cause, RecursionError) else str(cause)
        exc = StarletteHTTPException(exc.status_code, f"Invalid JSON in request body: {reason}.")
    return await http_exception_handler(request, exc)


async def _validation_exception(_: Request, exc: RequestValidationError) -> JSONResponse:
    errors = list(exc.errors())
    first = errors[0] if errors else None
    param = _clean_loc(first.get("loc")) if isinstance(first, dict) else None
    return error_response(_validation_message(errors), 400, "Bad Request", param)


async def _value_error(_: Request, exc: Exception) -> JSONResponse:
    return error_response(str(exc), 400, "BadRequestError")


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    return error_response(str(exc) or type(exc).__name__, 500, "InternalServerError")


def register_handlers(app: FastAPI) -> None:
    app.add_exception_handler(HTTPException, _http_exception)
    app.add_exception_handler(StarletteHTTPException, _starlette_http_exception)
    app.add_exception_handler(RequestValidationError, _validation_exception)
    app.add_exception_handler(ValueError, _value_error)
    app.add_exception_handler(Exception, _unexpected)
