"""The inputs both engines get: the user's ``--input`` arrays, random ones shaped from the model for the rest.

A random input takes its shape from the model's declaration: a fixed dim as declared, a named dim
from ``--dim``, else from a given input that carries the same name, else 1 (as Polygraphy does; the
report lists each default so a user can set it). Values are seeded: floats uniform in [0, 1) (no
NaN from Log or Sqrt of a negative), integers 0 or 1 (valid indices into any axis of size 2 or more),
bools half true. Inputs whose values mean something (token ids, sizes, masks) are the user's to give.
The dims then bound for compiling are checked by `bind_dims`, exactly as ``onyxia run`` checks them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from onyxia.cli.commands.run import bind_dims
from onyxia.core import Absent, InputError, IrGraph, SymbolicError, SymbolicExpr
from onyxia.core.symbolic import evaluate_dim

__all__ = ["DEFAULT_DIM", "Feeds", "make_feeds"]

DEFAULT_DIM = 1


@dataclass
class Feeds:
    arrays: dict[str, np.ndarray]
    dims: dict[str, int]  # every symbolic dim of the inputs, bound: what the plan is compiled for
    generated: list[str] = field(default_factory=list)  # inputs made up here
    defaulted: list[str] = field(default_factory=list)  # dims nobody gave, set to DEFAULT_DIM


def make_feeds(graph: IrGraph, given: Mapping[str, np.ndarray], dims: Mapping[str, int], seed: int) -> Feeds:
    declared = {graph.tensor(t).name: graph.tensor(t) for t in graph.inputs}
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise InputError(f"unknown input(s) {unknown}; the model's inputs are {sorted(declared)}")
    bound = dict(dims)
    for name, array in given.items():  # named dims the given arrays fix, before anything is defaulted
        shape = declared[name].shape
        if not isinstance(shape, Absent) and len(shape.dims) == array.ndim:
            for dim, size in zip(shape.dims, array.shape):
                if isinstance(dim, SymbolicExpr) and dim.op == "name":
                    bound.setdefault(str(dim.args[0]), int(size))
    feeds = Feeds(dict(given), {})
    rng = np.random.default_rng(seed)
    for name, tensor in declared.items():
        if name in given:
            continue
        if isinstance(tensor.shape, Absent):
            raise InputError(f"input '{name}' has no declared shape to make a random value from; give it with --input")
        sizes = [_size(name, dim, bound, feeds) for dim in tensor.shape.dims]
        feeds.arrays[name] = _random(rng, tensor.dtype.numpy, sizes)
        feeds.generated.append(name)
    feeds.dims = bind_dims(graph, feeds.arrays, bound)
    return feeds


def _size(name: str, dim: object, bound: dict[str, int], feeds: Feeds) -> int:
    if isinstance(dim, int):
        return dim
    assert isinstance(dim, SymbolicExpr)
    if dim.op == "name":
        symbol = str(dim.args[0])
        if symbol not in bound:
            bound[symbol] = DEFAULT_DIM
            feeds.defaulted.append(symbol)
        return bound[symbol]
    try:
        return int(evaluate_dim(dim, bound))
    except SymbolicError:
        raise InputError(
            f"input '{name}' has dim {dim}, which the dims given do not decide; bind its names with --dim "
            "or give the input with --input"
        ) from None


def _random(rng: np.random.Generator, dtype: np.dtype, shape: list[int]) -> np.ndarray:
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.floating):
        return rng.random(shape, dtype=np.float64).astype(dtype)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 2, size=shape).astype(dtype)
    raise InputError(f"cannot make a random value of dtype {dtype}; give this input with --input")
