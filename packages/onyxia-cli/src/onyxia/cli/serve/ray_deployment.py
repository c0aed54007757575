"""`onyxia serve` scaled out with Ray Serve: replicas of `create_app()`, each with its own session.

One app serves one `LlmSession` on one adapter, one generation at a time (app.py); more traffic
needs more processes. `deployment()` makes a Ray Serve application whose replicas are Ray actor
processes, each loading the model itself when it starts (nothing large is pickled, and a bad model
directory fails the deployment instead of a request); Ray Serve's proxy spreads the requests over
them. Every answer carries the answering replica's Ray Serve id in `x-onyxia-replica`, so a client
or a test can tell who answered. Ray is optional: it is imported only when a deployment is made.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from onyxia.cli.commands.serve import DEFAULT_PARALLEL
from onyxia.cli.serve.app import DEFAULT_MAX_QUEUE, create_app
from onyxia.cli.serve.heap import fix_mmap_threshold

__all__ = ["REPLICA_HEADER", "OnyxiaReplica", "app_builder", "deployment"]

REPLICA_HEADER = "x-onyxia-replica"


def deployment(
    model_dir: str | Path | None = None,
    num_replicas: int = 2,
    *,
    precision: str | None = None,
    max_length: int | None = None,
    max_queue: int = DEFAULT_MAX_QUEUE,
    api_key: str | None = None,
    model_name: str | None = None,
    parallel: int = DEFAULT_PARALLEL,
    **serve_options: Any,
) -> Any:
    """A Ray Serve application (`serve.run(deployment("my-model"))`) of `num_replicas` replicas, each
    `create_app(model_dir, precision=..., ...)` decoding `parallel` requests together. `model_dir` must be readable where the replicas run
    (the same path on every node). `serve_options` go to `serve.deployment` (`name`,
    `ray_actor_options`, `max_ongoing_requests`, `autoscaling_config`, ...); the default name is
    "onyxia" and each replica reserves Ray's default of one CPU."""
    serve = _ray_serve()
    options = {"name": "onyxia", "num_replicas": num_replicas, **serve_options}
    replica = serve.deployment(serve.ingress()(OnyxiaReplica), **options)
    app_options = {
        "precision": precision,
        "max_length": max_length,
        "max_queue": max_queue,
        "api_key": api_key,
        "model_name": model_name,
        "parallel": parallel,
    }
    return replica.bind(None if model_dir is None else str(model_dir), app_options)


def app_builder(args: dict[str, str]) -> Any:
    """For Ray's CLI: `serve run onyxia.cli.serve.ray_deployment:app_builder model_dir=DIR
    num_replicas=2 [precision=fp32] [max_length=N] [parallel=N]` (no model_dir: the built-in demo)."""
    known = {"model_dir", "num_replicas", "precision", "max_length", "parallel"}
    unknown = sorted(set(args) - known)
    if unknown:
        raise ValueError(f"app_builder: unknown argument(s) {unknown}; expected some of {sorted(known)}")
    max_length = args.get("max_length")
    return deployment(
        args.get("model_dir"),
        int(args.get("num_replicas", "2")),
        precision=args.get("precision"),
        max_length=None if max_length is None else int(max_length),
        parallel=int(args.get("parallel", DEFAULT_PARALLEL)),
    )


class OnyxiaReplica:
    """One replica: Ray Serve calls `__serve_build_asgi_app__` once in the replica's process, after
    the constructor, and routes that replica's HTTP traffic to the app it returns."""

    def __init__(self, model_dir: str | None, app_options: dict[str, Any]) -> None:
        self.model_dir = model_dir
        self.app_options = app_options

    def __serve_build_asgi_app__(self) -> ASGIApp:
        fix_mmap_threshold()  # the replica's process serves for long: transient peaks given back (serve/heap.py)
        app = create_app(self.model_dir, **self.app_options)
        replica_id = _ray_serve().get_replica_context().replica_id.unique_id
        app.add_middleware(_ReplicaHeader, replica_id=str(replica_id))
        return app


class _ReplicaHeader:
    """Pure ASGI (streams pass through untouched): adds `x-onyxia-replica` to every HTTP response."""

    def __init__(self, app: ASGIApp, replica_id: str) -> None:
        self.app = app
        self.header = (REPLICA_HEADER.encode(), replica_id.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def tagged(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), self.header]}
            await send(message)

        await self.app(scope, receive, tagged)


def _ray_serve() -> ModuleType:
    try:
        return importlib.import_module("ray.serve")
    except ModuleNotFoundError as e:  # no ray, or ray without the serve extra's packages
        raise ModuleNotFoundError(
            f"onyxia.cli.serve.ray_deployment needs Ray Serve, which onyxia-cli does not install ({e}): "
            "pip install 'ray[serve]'",
            name=e.name,
        ) from e
