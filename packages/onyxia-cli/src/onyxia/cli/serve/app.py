"""`create_app()`: the ASGI app `onyxia serve` runs, importable for any ASGI server.

The model is loaded (compiled, uploaded, warmed up) when the app is created, so a server that
starts listening is ready to answer, and a bad model directory fails before any port is bound. One
app owns one session, whose slots decode `parallel` requests together, and one worker thread; to serve
more traffic than one adapter can, run replicas behind a load balancer (`serve/ray_deployment.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.resources
import time
from collections.abc import AsyncIterator
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from onyxia.cli.commands.llm_options import DEMO_MODEL_DIR, sampling_from
from onyxia.cli.commands.serve import DEFAULT_GATHER_MS, DEFAULT_PARALLEL, DEFAULT_PREFILL_CHUNK
from onyxia.cli.embeddings import EmbeddingModel
from onyxia.cli.llm.chat import chat_stop_ids
from onyxia.cli.llm.session import LlmSession
from onyxia.cli.serve.embeddings import embeddings_router, install_embeddings
from onyxia.cli.serve.engine import Engine
from onyxia.cli.serve.errors import install_error_handlers
from onyxia.cli.serve.metrics import Metrics
from onyxia.cli.serve.middleware import ApiKeyCheck, CountRequests, NoteArrivals
from onyxia.cli.serve.requests import Defaults
from onyxia.cli.serve.routes import ServerState, router
from onyxia.cli.serve.tokenize_routes import tokenize_router

__all__ = ["DEFAULT_MAX_QUEUE", "STATIC_DIR", "create_app"]

DEFAULT_MAX_QUEUE = 16
GENERATION_PATHS = ("/v1/chat/completions", "/v1/completions")  # the requests the engine runs
STATIC_DIR = Path(__file__).parent / "static"


def create_app(
    model_dir: str | Path | None = None,
    *,
    precision: str | None = None,
    max_length: int | None = None,
    max_queue: int = DEFAULT_MAX_QUEUE,
    api_key: str | None = None,
    defaults: Defaults | None = None,
    session: LlmSession | None = None,
    model_name: str | None = None,
    parallel: int = DEFAULT_PARALLEL,
    embedding_model: EmbeddingModel | str | Path | None = None,
    gather: float = DEFAULT_GATHER_MS / 1000,
) -> FastAPI:
    """`model_dir` None serves the built-in demo (as `onyxia generate` does). `session` serves a session
    already loaded instead (the app then owns it: nothing else may generate on it while it serves).
    `defaults` fill the sampling fields a request leaves out; by default the ones `onyxia generate`
    uses (greedy, or the demo's temperature 0.8 and top-k 40). `parallel` is the number of sequences decoded
    together when the app loads the model (`onyxia serve --parallel`); a given `session` has its own slots.
    `embedding_model` (a loaded model or its directory) answers /v1/embeddings beside the chat model.
    `gather`: seconds of quiet an idle server waits for before starting, so requests sent together start
    together (`onyxia serve --gather-ms`; `Engine`)."""
    if isinstance(embedding_model, (str, Path)):  # before the chat model: a bad directory fails fast
        embedding_model = EmbeddingModel.from_pretrained(embedding_model)
    if session is None:
        session = _load(model_dir, precision, max_length, parallel)
    elif model_dir is None:  # defaults as for the directory the session was loaded from
        model_dir = session.model_dir.root
    if defaults is None:
        defaults = Defaults(sampling_from(argparse.Namespace(**_NO_FLAGS, model_dir=model_dir)))
    metrics = Metrics()
    engine = Engine(session, max_queue, metrics, gather)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        engine.close()

    app = FastAPI(title="Onyxia", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.onyxia = ServerState(
        session=session,
        engine=engine,
        metrics=metrics,
        defaults=defaults,
        model=model_name or session.model_dir.root.name,
        created=int(time.time()),
        chat_stops=chat_stop_ids(session),
        static_dir=STATIC_DIR,
    )
    install_error_handlers(app)
    app.include_router(router)
    app.include_router(tokenize_router)
    install_embeddings(app, embedding_model, None, app.state.onyxia.created)
    if STATIC_DIR.is_dir():  # the page's own files (scripts, styles), if it has any beside index.html
        app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.add_middleware(NoteArrivals, engine=engine, paths=GENERATION_PATHS)
    if api_key:
        app.add_middleware(ApiKeyCheck, api_key=api_key)
    app.add_middleware(
        CountRequests,
        metrics=metrics,
        endpoints={
            r.path for r in [*router.routes, *tokenize_router.routes, *embeddings_router.routes] if hasattr(r, "path")
        },
    )
    return app


_NO_FLAGS = {  # `onyxia serve`'s sampling flags left unset
    "temperature": None,
    "top_k": None,
    "top_p": None,
    "min_p": 0.0,
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "seed": None,
}


def _load(model_dir: str | Path | None, precision: str | None, max_length: int | None, slots: int) -> LlmSession:
    chunk = DEFAULT_PREFILL_CHUNK  # as `onyxia serve` loads it
    if model_dir is not None:
        return LlmSession.from_pretrained(model_dir, precision, max_length, slots=slots, prefill_chunk=chunk)
    demo = importlib.resources.files("onyxia.cli.data") / DEMO_MODEL_DIR
    with importlib.resources.as_file(demo) as root:
        return LlmSession.from_pretrained(root, precision, max_length, slots=slots, prefill_chunk=chunk)
