"""ASGI layers around every request: the API key check, counting answers for /metrics, and noting arrivals.

Plain ASGI rather than Starlette's BaseHTTPMiddleware, which buffers nothing but does run the
endpoint in another task: a streamed response's cancellation must reach the endpoint unchanged.
The key guards /v1/* only; /health, /metrics and the page stay open for probes and browsers (the
page sends the key the user types). Requests are counted by route, unknown paths as "other", so a
scanner cannot grow the metric's label set. A generation request is noted as it enters the app, before its body
is read and templated, so an idle worker gathering newcomers (`Engine.gather`) knows one is on its way.
"""

from __future__ import annotations

import hmac
from collections.abc import Collection

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from onyxia.cli.serve.engine import Engine
from onyxia.cli.serve.errors import ApiError, error_response
from onyxia.cli.serve.metrics import Metrics

__all__ = ["ApiKeyCheck", "CountRequests", "NoteArrivals"]


class ApiKeyCheck:
    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app, self._key = app, api_key.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
        if scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self._key):
            await self.app(scope, receive, send)
            return
        problem = "has another API key" if token else "has no API key"
        error = ApiError(
            401,
            f"this request {problem}; send 'Authorization: Bearer <key>' with the key the server was started with",
            code="invalid_api_key",
            headers={"WWW-Authenticate": "Bearer"},
        )
        await error_response(error)(scope, receive, send)


class CountRequests:
    def __init__(self, app: ASGIApp, metrics: Metrics, endpoints: Collection[str]) -> None:
        self.app, self.metrics, self.endpoints = app, metrics, frozenset(endpoints)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        endpoint = path if path in self.endpoints else "other"
        status = 500  # if the app fails before answering

        async def counting_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            self.metrics.requests.labels(endpoint, str(status)).inc()


class NoteArrivals:
    def __init__(self, app: ASGIApp, engine: Engine, paths: Collection[str]) -> None:
        self.app, self.engine, self.paths = app, engine, frozenset(paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("method") == "POST" and scope.get("path") in self.paths:
            self.engine.note_arrival()
        await self.app(scope, receive, send)
