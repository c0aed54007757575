"""`POST /v1/embeddings`: OpenAI's embeddings endpoint, served by the model `onyxia serve --embedding-model` loads.

Fields (OpenAI's): ``input`` (a string, a list of strings, a token list, or a list of token lists; at most
2,048 items), ``model`` (not checked, as for chat, except that naming the chat model is a 400: it makes no
embeddings), ``encoding_format`` (``float`` or ``base64``: little-endian float32 bytes, what the openai client
asks for by default and decodes), ``dimensions`` (Matryoshka models only: the first N values, normalised again
where the model normalises), ``user`` (accepted, unused). Any other field is a 400 naming it: nothing is
ignored silently. Bad input is a 400 with ``param`` set; a server without an embedding model answers 404.

The encoder runs in a worker thread (`run_in_threadpool`), so the event loop keeps streaming chat answers
meanwhile; the model serializes its own runs.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Literal

import numpy as np
from fastapi import APIRouter, FastAPI, Request
from pydantic import BaseModel, ConfigDict
from starlette.concurrency import run_in_threadpool

from onyxia.cli.embeddings import EmbeddingInputError, EmbeddingModel
from onyxia.cli.serve.errors import ApiError
from onyxia.cli.serve.schemas import ModelCard

__all__ = [
    "MAX_INPUTS",
    "EmbeddingItem",
    "EmbeddingList",
    "EmbeddingRequest",
    "EmbeddingUsage",
    "ServedEmbeddings",
    "embedding_cards",
    "embeddings_router",
    "install_embeddings",
]

MAX_INPUTS = 2048  # OpenAI's limit on items per request
_FORMATS = ("float", "base64")

embeddings_router = APIRouter()


class EmbeddingRequest(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")  # extra fields are refused by name in the handler

    input: str | list[str] | list[int] | list[list[int]]
    model: str | None = None
    encoding_format: str = "float"
    dimensions: int | None = None
    user: str | None = None


class EmbeddingItem(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str


class EmbeddingUsage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class EmbeddingList(BaseModel):
    object: Literal["list"] = "list"
    data: list[EmbeddingItem]
    model: str
    usage: EmbeddingUsage


@dataclass(frozen=True)
class ServedEmbeddings:
    model: EmbeddingModel
    name: str
    created: int


def install_embeddings(app: FastAPI, model: EmbeddingModel | None, name: str | None, created: int) -> None:
    """The route always exists, so a server without an embedding model says so instead of "no such route"."""
    app.state.onyxia_embeddings = ServedEmbeddings(model, name or model.name, created) if model else None
    app.include_router(embeddings_router)


def embedding_cards(request: Request) -> list[ModelCard]:
    """The embedding model's /v1/models entry, if one is served."""
    served: ServedEmbeddings | None = getattr(request.app.state, "onyxia_embeddings", None)
    return [ModelCard(id=served.name, created=served.created)] if served else []


@embeddings_router.post("/v1/embeddings")
async def embeddings(body: EmbeddingRequest, request: Request) -> EmbeddingList:
    served = _served(request, body.model)
    _check_fields(body)
    inputs = _inputs(body.input)
    try:
        result = await run_in_threadpool(served.model.encode, inputs, body.dimensions)
    except EmbeddingInputError as e:
        raise ApiError(400, str(e), param=e.field) from None
    encode = _base64 if body.encoding_format == "base64" else _floats
    data = [EmbeddingItem(index=i, embedding=encode(v)) for i, v in enumerate(result.vectors)]
    tokens = sum(result.token_counts)
    return EmbeddingList(data=data, model=served.name, usage=EmbeddingUsage(prompt_tokens=tokens, total_tokens=tokens))


def _served(request: Request, model: str | None) -> ServedEmbeddings:
    served: ServedEmbeddings | None = getattr(request.app.state, "onyxia_embeddings", None)
    if served is None:
        raise ApiError(
            404,
            "this server has no embedding model; start it with `onyxia serve --embedding-model DIR`",
            param="model",
            code="model_not_found",
        )
    chat = getattr(getattr(request.app.state, "onyxia", None), "model", None)
    if model is not None and model == chat and model != served.name:
        raise ApiError(400, f"model {model!r} is the chat model; embeddings come from {served.name!r}", param="model")
    return served


def _check_fields(body: EmbeddingRequest) -> None:
    extra = sorted(body.model_extra or {})
    if extra:
        raise ApiError(
            400,
            f"'{extra[0]}' is not supported by /v1/embeddings (fields: input, model, "
            "encoding_format, dimensions, user)",
            param=extra[0],
        )
    if body.encoding_format not in _FORMATS:
        raise ApiError(
            400, f"encoding_format {body.encoding_format!r}; expected 'float' or 'base64'", param="encoding_format"
        )
    if body.dimensions is not None and body.dimensions < 1:
        raise ApiError(400, f"dimensions must be at least 1, got {body.dimensions}", param="dimensions")


def _inputs(value: str | list[str] | list[int] | list[list[int]]) -> list[str] | list[list[int]]:
    """The request's items: a string or one token list is one item."""
    if isinstance(value, str):
        return [value]
    if not value:
        raise ApiError(400, "input is empty; give a string, strings, or token lists", param="input")
    if len(value) > MAX_INPUTS:
        raise ApiError(400, f"input has {len(value)} items; at most {MAX_INPUTS} per request", param="input")
    if isinstance(value[0], int):
        return [[int(t) for t in value]]
    return value


def _floats(vector: np.ndarray) -> list[float]:
    values: list[float] = vector.tolist()
    return values


def _base64(vector: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(vector, dtype="<f4").tobytes()).decode("ascii")
