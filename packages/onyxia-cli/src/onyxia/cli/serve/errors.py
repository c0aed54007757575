"""Every failure answers with OpenAI's error body, `{"error": {"message", "type", "param", "code"}}`.

The statuses, one rule each:

| status | when | type |
|---|---|---|
| 400 | malformed JSON; a field this server does not know (never ignored silently); a value the schema admits but the server cannot serve (no messages, an unknown role, n > 1, a sampling value out of range, a token id outside the vocabulary, a bad tool or tool_choice) | invalid_request_error |
| 401 | an API key is configured and the request lacks it or has another | authentication_error |
| 404 | no such route | not_found_error |
| 405 | the route exists, not for this method | invalid_request_error |
| 413 | the prompt leaves no room for an answer within max_length | invalid_request_error |
| 422 | the body does not fit the schema: a field of the wrong type, a required field missing | invalid_request_error |
| 429 | the queue is full (with Retry-After) | rate_limit_error |
| 500 | a bug in Onyxia (the message names the exception; the traceback goes to the server's log) | server_error |
| 503 | the server is shutting down | server_error |
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response

from onyxia.cli.serve.schemas import ErrorBody, ErrorDetail
from onyxia.core import InputError

__all__ = ["ApiError", "error_response", "install_error_handlers"]

log = logging.getLogger(__name__)

_TYPES = {
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "server_error",
}


class ApiError(Exception):
    """An answer other than success, raised anywhere in a handler and turned into the JSON body here."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        kind = _TYPES.get(self.status, "invalid_request_error")
        detail = ErrorDetail(message=self.message, type=kind, param=self.param, code=self.code)
        return ErrorBody(error=detail).model_dump()

    def sse(self) -> str:
        """The error as a server-sent event: once a stream has started its status cannot change."""
        return f"data: {json.dumps(self.body())}\n\n"


def error_response(error: ApiError) -> Response:
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


def _validation_error(exc: RequestValidationError) -> ApiError:
    """Malformed JSON is 400; a body that parses but does not fit the schema is 422, naming the field."""
    problems = list(exc.errors())
    first = problems[0] if problems else {}
    if first.get("type") == "json_invalid":
        return ApiError(
            400, f"the request body is not valid JSON ({first.get('msg', 'parse error')})", code="json_invalid"
        )
    unknown = [_field(e.get("loc", ())) for e in problems if e.get("type") == "extra_forbidden"]
    if unknown:
        names = ", ".join(unknown)
        return ApiError(
            400,
            f"unknown field{'s' if len(unknown) > 1 else ''} {names}: this server does not implement "
            f"{'them' if len(unknown) > 1 else 'it'}, and refuses rather than ignores what it cannot honour",
            param=unknown[0],
            code="unknown_field",
        )
    param = _field(first.get("loc", ())) or None
    messages = "; ".join(
        f"{'.'.join(str(p) for p in e.get('loc', ()) if p != 'body') or 'body'}: {e.get('msg')}" for e in problems
    )
    return ApiError(422, f"the request body does not fit the schema: {messages}", param=param, code="invalid_type")


def _field(location: Sequence[Any]) -> str:
    """The field a pydantic error location names: `body.messages.0.role` is `messages.0.role`; a union
    member's tag (`str`, `list[int]`) ends it, a member model's name is skipped."""
    parts: list[str] = []
    for part in list(location)[1:] if list(location)[:1] == ["body"] else location:
        if isinstance(part, str) and (part in _TYPE_TAGS or "[" in part):
            break
        if isinstance(part, str) and part[:1].isupper():  # a union member's model (`NamedToolChoice`): look inside
            continue
        parts.append(str(part))
    return ".".join(parts)


_TYPE_TAGS = frozenset({"str", "int", "float", "bool", "list", "dict", "none"})


def install_error_handlers(app: FastAPI) -> None:
    async def api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return error_response(exc)

    async def invalid(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return error_response(_validation_error(exc))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        message = f"{request.method} {request.url.path}: {exc.detail}"
        return error_response(ApiError(exc.status_code, message, headers=dict(exc.headers or {})))

    async def input_error(request: Request, exc: Exception) -> Response:
        return error_response(ApiError(400, str(exc)))

    async def crashed(request: Request, exc: Exception) -> Response:
        log.exception("%s %s failed", request.method, request.url.path)
        message = " ".join(str(exc).split())[:300]
        return error_response(ApiError(500, f"internal error: {type(exc).__name__}: {message} (a bug in Onyxia)"))

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(InputError, input_error)
    app.add_exception_handler(Exception, crashed)
