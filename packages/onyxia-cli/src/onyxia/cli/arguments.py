"""Typed argparse validators shared by every command: a bad value stops at the parser.

Each function is an argparse ``type=``: it returns the converted value or raises
`argparse.ArgumentTypeError`, which argparse prints as ``onyxia CMD: error: argument --x: ...``
with exit status 2 — before any model is read, compiled or uploaded. The ranges are the ones
`SamplingParams.validate` and the session enforce for Python callers, so both say the same thing.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "MAX_DIM",
    "DimAction",
    "dim_binding",
    "finite_float",
    "non_negative_float",
    "non_negative_int",
    "positive_float",
    "positive_int",
    "probability",
    "seed",
    "utf8_text",
    "writable_file",
]

# Kernels index with 32-bit integers (WGSL i32/u32), so a dim or length must stay below 2^31.
MAX_DIM = 2**31 - 1


def _integer(text: str, limit: int = MAX_DIM) -> int:
    """ASCII digits only: str.isdigit() accepts '²', which int() then rejects with a ValueError."""
    body = text.strip()
    digits = body[1:] if body[:1] in "+-" else body
    if not digits.isascii() or not digits.isdigit():
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
    value = int(body)
    if abs(value) > limit:
        raise argparse.ArgumentTypeError(f"{body} is out of range; expected at most {limit}")
    return value


def non_negative_int(text: str) -> int:
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


def seed(text: str) -> int:
    """A random seed: numpy takes any non-negative integer; 64 bits is plenty."""
    value = _integer(text, 2**64 - 1)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


def positive_int(text: str) -> int:
    value = _integer(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return value


def positive_float(text: str) -> float:
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {value}")
    return value


def fraction(text: str) -> float:
    """A share of something, 0 <= x <= 1 (min-p)."""
    value = finite_float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number 0 <= x <= 1, got {value}")
    return value


def penalty(text: str) -> float:
    """OpenAI's presence or frequency penalty, -2 <= x <= 2."""
    value = finite_float(text)
    if not -2.0 <= value <= 2.0:
        raise argparse.ArgumentTypeError(f"expected a number -2 <= x <= 2, got {value}")
    return value


def probability(text: str) -> float:
    """A nucleus (top-p) mass: 0 < p <= 1."""
    value = finite_float(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a probability 0 < p <= 1, got {value}")
    return value


def dim_binding(text: str) -> tuple[str, int]:
    """``NAME=VALUE`` for ``--dim``; the value must fit the kernels' 32-bit indices."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        size = non_negative_int(value)
    except argparse.ArgumentTypeError as e:
        raise argparse.ArgumentTypeError(f"{text!r}: {e}") from None
    return name, size


def utf8_text(text: str) -> str:
    """Text that is valid UTF-8: undecodable bytes in argv arrive as lone surrogates."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise argparse.ArgumentTypeError(f"not valid UTF-8 text (at character {e.start})") from None
    return text


class DimAction(argparse.Action):
    """``--dim NAME=VALUE`` (repeatable) into a list of ``(name, value)`` pairs.

    An Action rather than a ``type=``, so the message reads ``--dim 'n=three': ...`` and a name bound
    twice to different values is refused by the parser too."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: str | None = None
    ) -> None:
        text = str(values)
        try:
            name, value = dim_binding(text)
        except argparse.ArgumentTypeError as e:
            parser.error(f"--dim {e}")
        items: Sequence[tuple[str, int]] = getattr(namespace, self.dest, None) or []
        for known, bound in items:
            if known == name and bound != value:
                parser.error(f"--dim {name} is given twice with different values ({bound} and {value})")
        setattr(namespace, self.dest, [*items, (name, value)])


def writable_file(text: str) -> Path:
    """An output file whose directory exists and can be written, checked before any work starts."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"'{path}' is a directory; expected a file name")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"directory '{parent}' does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"directory '{parent}' is not writable")
    if path.exists() and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"'{path}' exists and is not writable")
    return path
