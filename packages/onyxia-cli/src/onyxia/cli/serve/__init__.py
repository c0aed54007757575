"""`onyxia serve`: an OpenAI-compatible HTTP server over one `LlmSession` (the `serve` extra).

schemas (bodies) -> requests (body to GenerationRequest) -> engine (queue, worker thread) ->
generation (one job on the session: KV reuse, stops) -> responses (JSON or server-sent events);
routes and middleware are the HTTP surface, app.create_app wires them. Needs fastapi, uvicorn,
pydantic and prometheus-client; nothing outside onyxia.cli.commands.serve imports this package.
"""

from onyxia.cli.serve.app import create_app

__all__ = ["create_app"]
