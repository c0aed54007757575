"""One request of the soak test, as a client would send it, and what came back (`Outcome`).

Whole answers, streams and bad requests go through one `httpx.AsyncClient`. A cancelled stream
leaves the `async with client.stream(...)` block after k events, which closes that connection
mid-body: the server sees the client go away, as with a browser tab closed. An abrupt disconnect
uses a raw socket with SO_LINGER 0, so closing it sends a TCP reset (no orderly FIN) while the
body is still being uploaded, right after it was sent, or after the first bytes of the answer.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from .mix import CHAT, Planned

__all__ = ["Outcome", "body_of", "send"]

UNKNOWN_MODEL = "soak-no-such-model"


@dataclass
class Outcome:
    status: int | None = None  # None: no status was read (a disconnect, a transport failure)
    text: str | None = None  # the answer, when it completed
    finish_reason: str | None = None
    completion_tokens: int | None = None  # from usage, when the answer carried it
    cancelled: bool = False  # the client closed the stream before [DONE]
    problem: str = ""  # what the client found wrong: transport error, error event, malformed body
    error_type: str = ""  # the OpenAI error body's `type`, for a non-2xx answer
    retry_after: float = 0.0


def body_of(planned: Planned, model: str, too_long_tokens: int) -> bytes:
    body: dict[str, Any] = {**planned.spec.body, "model": UNKNOWN_MODEL if planned.kind == "unknown-model" else model}
    if planned.stream:
        body["stream"] = True
        if planned.include_usage:
            body["stream_options"] = {"include_usage": True}
    if planned.kind == "bad-max-tokens":
        body["max_tokens"] = -1
    if planned.kind == "too-long":  # text for chat (the server tokenizes it), ids for completions
        if planned.spec.endpoint == CHAT:
            body["messages"] = [{"role": "user", "content": "hi " * too_long_tokens}]
        else:
            body["prompt"] = [0] * too_long_tokens
    data = json.dumps(body).encode()
    return data[: len(data) // 2] if planned.kind == "bad-json" else data  # an unclosed object never parses


async def send(client: httpx.AsyncClient, base_url: str, planned: Planned, data: bytes) -> Outcome:
    if planned.kind == "disconnect":
        return await _disconnect(base_url, planned, data)
    try:
        if planned.stream:
            return await _stream(client, planned, data)
        response = await client.post(planned.spec.endpoint, content=data)
        return _whole(planned, response)
    except httpx.HTTPError as e:
        return Outcome(problem=f"transport: {type(e).__name__}: {e}")
    except (ValueError, KeyError, TypeError, AttributeError) as e:  # an event that is not the API's shape
        return Outcome(200, problem=f"malformed stream event: {type(e).__name__}: {e}")


def _whole(planned: Planned, response: httpx.Response) -> Outcome:
    try:
        body = response.json()
    except ValueError:
        return Outcome(response.status_code, problem=f"body is not JSON: {response.text[:200]!r}")
    if response.status_code != 200:
        return _error(response, body)
    try:
        choice = body["choices"][0]
        text = choice["message"]["content"] if planned.spec.endpoint == CHAT else choice["text"]
        return Outcome(200, text, choice["finish_reason"], body["usage"]["completion_tokens"])
    except (KeyError, IndexError, TypeError) as e:
        return Outcome(200, problem=f"answer lacks {e}: {json.dumps(body)[:200]}")


def _error(response: httpx.Response, body: Any) -> Outcome:
    """A non-2xx answer must carry OpenAI's error body: {"error": {"message": str, "type": str, ...}}."""
    outcome = Outcome(response.status_code, retry_after=float(response.headers.get("retry-after", 0) or 0))
    error = body.get("error") if isinstance(body, dict) else None
    if not (isinstance(error, dict) and isinstance(error.get("message"), str) and isinstance(error.get("type"), str)):
        outcome.problem = f"not an OpenAI error body: {json.dumps(body)[:200]}"
        return outcome
    outcome.error_type = error["type"]
    if response.status_code >= 500:
        outcome.problem = f"{error['type']}: {error['message'][:200]}"
    return outcome


async def _stream(client: httpx.AsyncClient, planned: Planned, data: bytes) -> Outcome:
    async with client.stream("POST", planned.spec.endpoint, content=data) as response:
        if response.status_code != 200:
            await response.aread()
            try:
                return _error(response, response.json())
            except ValueError:
                return Outcome(response.status_code, problem=f"body is not JSON: {response.text[:200]!r}")
        outcome, events = Outcome(200), 0
        parts: list[str] = []
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                if outcome.finish_reason is None:
                    outcome.problem = "stream ended with [DONE] but no finish_reason"
                else:
                    outcome.text = "".join(parts)
                return outcome
            events += 1
            problem = _event(planned, json.loads(line[6:]), outcome, parts)
            if problem:
                outcome.problem = problem
                return outcome
            if planned.kind == "cancel" and events >= planned.cancel_after:
                outcome.cancelled = True
                return outcome  # leaving the block closes the connection mid-body
        outcome.problem = "stream ended without [DONE]"
        return outcome


def _event(planned: Planned, event: dict[str, Any], outcome: Outcome, parts: list[str]) -> str:
    """Fold one server-sent event into `outcome`; returns a problem, or ""."""
    if "error" in event:  # a failure after the stream started: its status stayed 200
        error = event["error"]
        outcome.error_type = str(error.get("type", "")) if isinstance(error, dict) else ""
        return f"error event: {json.dumps(error)[:200]}"
    if event.get("usage"):
        outcome.completion_tokens = event["usage"]["completion_tokens"]
    for choice in event.get("choices", []):
        piece = choice["delta"].get("content") if planned.spec.endpoint == CHAT else choice.get("text")
        parts.append(piece or "")
        if choice.get("finish_reason") is not None:
            outcome.finish_reason = choice["finish_reason"]
    return ""


async def _disconnect(base_url: str, planned: Planned, data: bytes) -> Outcome:
    where = urlsplit(base_url)
    host, port = where.hostname or "127.0.0.1", where.port or 80
    head = (
        f"POST {where.path.rstrip('/')}{planned.spec.endpoint} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    ).encode()
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError as e:
        return Outcome(problem=f"transport: cannot connect: {e}")
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = reset
    try:
        if planned.disconnect == "upload":
            writer.write(head + data[: len(data) // 2])
            await writer.drain()
            await asyncio.sleep(0.02)
        else:
            writer.write(head + data)
            await writer.drain()
            if planned.disconnect == "reading":
                await reader.read(64)  # the status line, or the first event of a stream
    except OSError:
        pass  # the server may drop a half-sent request first; either way the connection is gone
    finally:
        writer.transport.abort()
    return Outcome(cancelled=True)
