"""onnxruntime's feed rules, checked before Onyxia's executor sees the arrays.

What onnxruntime's `run()` accepts: numpy arrays of exactly the declared element type (no cast: an
int32 array for an int64 input is refused), and nested Python lists, which it converts to the input's
declared type (so ``[[1, 2, 3]]`` feeds a float input). A 0-d array stays 0-d. Python scalars,
tuples and strings are refused. Names, ranks and the dims the model fixes are checked in onnxruntime's
order with its wording (`errors.ort_error`); a declared rank-0 input is not rank-checked, as in
onnxruntime. The checks are precomputed per input, since they run on every `run()`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx

from onyxia.ort.errors import Fail, InvalidArgument, ort_error
from onyxia.ort.node_arg import NodeArg

__all__ = ["FeedChecker", "type_of_array"]


@dataclass(frozen=True)
class _Input:
    name: str
    type: str  # "tensor(float)"
    dtype: np.dtype | None  # None: a type numpy cannot hold (Onyxia refuses such models at load)
    rank: int
    fixed: tuple[tuple[int, int], ...]  # (axis, value) of the dims the model fixes


def type_of_array(array: np.ndarray) -> str:
    """onnxruntime's name for a numpy array's type: ``tensor(double)``."""
    if array.dtype.kind in "OUS":
        return "tensor(string)"
    try:
        code = onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
    except (KeyError, TypeError, ValueError):
        return f"tensor({array.dtype})"
    return f"tensor({onnx.TensorProto.DataType.Name(code).lower()})"


def _numpy_dtype(type_text: str) -> np.dtype | None:
    if not type_text.startswith("tensor(") or type_text == "tensor(string)":
        return None
    try:
        code = onnx.TensorProto.DataType.Value(type_text[len("tensor(") : -1].upper())
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(code))
    except (KeyError, TypeError, ValueError):
        return None


class FeedChecker:
    """The model's inputs, and one run's feed turned into the arrays Onyxia runs (or onnxruntime's error)."""

    def __init__(self, inputs: Sequence[NodeArg]) -> None:
        self.inputs = {
            arg.name: _Input(
                arg.name,
                arg.type,
                _numpy_dtype(arg.type),
                len(arg.shape),
                tuple((axis, d) for axis, d in enumerate(arg.shape) if isinstance(d, int)),
            )
            for arg in inputs
        }
        self.required = [arg.name for arg in inputs if not arg.type.startswith("optional")]

    def check_missing(self, names: Sequence[str]) -> None:
        """onnxruntime's Python-side check (a ValueError, before any conversion)."""
        missing = [name for name in self.required if name not in names]
        if missing:
            raise ValueError(f"Required inputs ({missing}) are missing from input feed ({list(names)}).")

    def convert(self, feed: Mapping[str, object]) -> dict[str, np.ndarray]:
        """Lists to arrays of the declared type, then names, element types, ranks and fixed dims."""
        arrays = {name: self._array(name, value) for name, value in feed.items()}
        for name in arrays:
            if name not in self.inputs:
                raise ort_error(InvalidArgument, f"Invalid input name: {name}")
        for name, array in arrays.items():
            self.check(self.inputs[name], array)
        return arrays

    def check(self, spec: _Input, array: np.ndarray) -> None:
        if spec.dtype is None or array.dtype != spec.dtype:
            actual = type_of_array(array)
            if actual != spec.type:
                raise ort_error(
                    InvalidArgument, f"Unexpected input data type. Actual: ({actual}) , expected: ({spec.type})"
                )
        if spec.rank and array.ndim != spec.rank:
            raise ort_error(
                InvalidArgument,
                f"Invalid rank for input: {spec.name} Got: {array.ndim} Expected: {spec.rank} "
                "Please fix either the inputs/outputs or the model.",
            )
        bad = [(axis, array.shape[axis], d) for axis, d in spec.fixed if array.shape[axis] != d]
        if bad:
            lines = "".join(f" index: {axis} Got: {got} Expected: {want}\n" for axis, got, want in bad)
            raise ort_error(
                InvalidArgument,
                f"Got invalid dimensions for input: {spec.name} for the following indices\n{lines}"
                " Please fix either the inputs/outputs or the model.",
            )

    def _array(self, name: str, value: object) -> np.ndarray:
        if isinstance(value, np.ndarray):
            return value
        if isinstance(value, list):
            spec = self.inputs.get(name)
            try:
                return np.array(value, dtype=spec.dtype if spec is not None else None)
            except (TypeError, ValueError) as e:
                raise RuntimeError(f"Unable to convert the list given for input '{name}': {e}") from e
        if isinstance(value, (bool, int, float, complex, np.generic)):
            raise RuntimeError(f"Unable to handle object of type {type(value)}")
        if value is None:
            raise ort_error(Fail, f"Missing Input: {name}", "None was given as its value; give a numpy array")
        raise RuntimeError(f"Input must be a list of dictionaries or a single numpy array for input '{name}'.")
