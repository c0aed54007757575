"""Options `generate` and `chat` share, and opening the session with a progress bar.

``--lm-head fp16|int8`` (never the default) makes the lm head read a reduced-precision copy of an f32
head weight: a faster decode step for approximate logits (`onyxia.cli.llm.lm_head_precision`).

Without MODEL_DIR both use the built-in demo (fortune-gemma3, shipped in this package), which
samples with temperature 0.8 and top-k 40 unless told otherwise: a 4M-parameter model loops
when decoded greedily. Any other model defaults to greedy decoding.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.resources
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from onyxia.cli.arguments import (
    fraction,
    non_negative_float,
    non_negative_int,
    penalty,
    positive_float,
    positive_int,
    probability,
    seed,
)
from onyxia.cli.llm import PRECISIONS, LlmSession, SamplingParams
from onyxia.cli.llm.lm_head_precision import LM_HEAD_PRECISIONS
from onyxia.cli.llm.model_dir import precision_help

__all__ = ["DEMO_MODEL_DIR", "LM_HEAD_HELP", "add_llm_arguments", "open_session", "sampling_from"]

DEMO_MODEL_DIR = "fortune-gemma3"
_DEMO_SAMPLING = {"temperature": 0.8, "top_k": 40}
_PHASES = ("parsing", "compiling", "uploading weights", "warming up")
LM_HEAD_HELP = "lm head weight precision: exact (default) or a reduced copy for faster decode (approximate logits)"


def add_llm_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model_dir", nargs="?", type=Path, default=None, help="model directory (default: built-in demo)"
    )
    parser.add_argument("--precision", choices=sorted(PRECISIONS), default=None, help=precision_help())
    parser.add_argument("--max-length", type=positive_int, default=None, help="KV cache capacity in tokens")
    parser.add_argument("--lm-head", choices=list(LM_HEAD_PRECISIONS), default="exact", help=LM_HEAD_HELP)
    parser.add_argument("--max-new-tokens", type=non_negative_int, default=128)
    parser.add_argument("--temperature", type=non_negative_float, default=None, help="0 = greedy")
    parser.add_argument("--top-k", type=non_negative_int, default=None, help="0 = off")
    parser.add_argument("--top-p", type=probability, default=None, help="nucleus mass, 0 < p <= 1")
    parser.add_argument("--min-p", type=fraction, default=0.0, help="drop tokens under min-p x the likeliest's")
    parser.add_argument("--repetition-penalty", type=positive_float, default=1.0)
    parser.add_argument("--presence-penalty", type=penalty, default=0.0, help="OpenAI's, over generated tokens")
    parser.add_argument("--frequency-penalty", type=penalty, default=0.0, help="OpenAI's, per repeat")
    parser.add_argument("--seed", type=seed, default=None)


def sampling_from(args: argparse.Namespace) -> SamplingParams:
    defaults: dict[str, Any] = _DEMO_SAMPLING if args.model_dir is None else {}
    return SamplingParams(
        temperature=args.temperature if args.temperature is not None else defaults.get("temperature", 0.0),
        top_k=args.top_k if args.top_k is not None else defaults.get("top_k", 0),
        top_p=args.top_p if args.top_p is not None else 1.0,
        repetition_penalty=args.repetition_penalty,
        seed=args.seed,
        presence_penalty=args.presence_penalty,
        frequency_penalty=args.frequency_penalty,
        min_p=args.min_p,
    )


@contextlib.contextmanager
def _model_dir(path: Path | None) -> Iterator[Path]:
    if path is not None:
        yield path
        return
    with importlib.resources.as_file(importlib.resources.files("onyxia.cli.data") / DEMO_MODEL_DIR) as demo:
        yield demo


def open_session(args: argparse.Namespace, console: Console) -> LlmSession:
    """Load with a progress bar on stderr: parsing, compiling, uploading weights."""
    columns = (TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with _model_dir(args.model_dir) as root, Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("loading", total=len(_PHASES))

        def progress(phase: str) -> None:
            bar.update(task, description=phase, completed=_PHASES.index(phase) if phase in _PHASES else 0)

        session = LlmSession.from_pretrained(
            root,
            args.precision,
            args.max_length,
            progress=progress,
            lm_head=args.lm_head,
            slots=getattr(args, "parallel", 1),
            prefill_chunk=getattr(args, "prefill_chunk", None),
        )
        bar.update(task, completed=len(_PHASES))
    return session
