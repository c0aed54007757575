"""`onyxia embed MODEL_DIR --text TEXT [--text TEXT ...]`: sentence embeddings of each text, on the GPU.

MODEL_DIR is a sentence-transformers directory with its ONNX export (`onyxia.cli.embeddings`). A table
(tokens, norm, first values) goes to stdout, or with ``--format json`` one JSON object in the shape of
OpenAI's embeddings answer (``data[i].embedding``, ``usage.prompt_tokens``), each item also naming its
text and token count; ``--output OUT.npy`` saves the float32 [texts, dimensions] array.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from onyxia.cli.arguments import positive_int, utf8_text, writable_file
from onyxia.cli.files import atomic_output

__all__ = ["add_parser", "run"]

NAME = "embed"
_SHOWN_VALUES = 4
_SHOWN_CHARS = 40


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(NAME, help="embed texts with a sentence-transformers ONNX directory")
    parser.add_argument(
        "model_dir", type=Path, metavar="MODEL_DIR", help="sentence-transformers directory with model.onnx"
    )
    parser.add_argument(
        "--text", type=utf8_text, action="append", required=True, metavar="TEXT", help="a text to embed (repeatable)"
    )
    parser.add_argument(
        "--dimensions", type=positive_int, default=None, help="cut each vector to this size (Matryoshka models only)"
    )
    parser.add_argument("--format", choices=("table", "json"), default="table", help="how to print the vectors")
    parser.add_argument("--output", type=writable_file, default=None, metavar="OUT.npy", help="also save the vectors")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, console: Console) -> int:
    from onyxia.cli.embeddings import EmbeddingModel

    model = EmbeddingModel.from_pretrained(args.model_dir)
    result = model.encode(args.text, args.dimensions)
    if args.format == "json":
        items = [
            {"index": i, "text": text, "tokens": tokens, "embedding": vector.tolist()}
            for i, (text, tokens, vector) in enumerate(zip(args.text, result.token_counts, result.vectors, strict=True))
        ]
        total = sum(result.token_counts)
        body = {"model": model.name, "data": items, "usage": {"prompt_tokens": total, "total_tokens": total}}
        print(json.dumps(body, ensure_ascii=False))
    else:
        console.print(_table(model.name, args.text, result.token_counts, result.vectors))
    if args.output is not None:
        with atomic_output(args.output) as temporary, temporary.open("wb") as f:
            np.save(f, result.vectors)
        console.print(
            f"saved {result.vectors.shape[0]}x{result.vectors.shape[1]} float32 to {escape(str(args.output))}"
        )
    return 0


def _table(name: str, texts: list[str], tokens: list[int], vectors: np.ndarray) -> Table:
    table = Table(title=f"{name}: {vectors.shape[1]} dimensions", title_justify="left")
    for column in ("#", "text", "tokens", "norm", "values"):
        table.add_column(column, overflow="fold")
    for i, (text, count, vector) in enumerate(zip(texts, tokens, vectors, strict=True)):
        shown = ", ".join(f"{v:.4f}" for v in vector[:_SHOWN_VALUES].tolist())
        more = ", ..." if vector.size > _SHOWN_VALUES else ""
        clipped = text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"
        table.add_row(str(i), escape(clipped), str(count), f"{float(np.linalg.norm(vector)):.4f}", f"[{shown}{more}]")
    return table
