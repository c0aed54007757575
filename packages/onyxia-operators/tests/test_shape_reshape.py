"""`MovementOp` rows (Reshape, Squeeze, Unsqueeze, Flatten, Identity) on lavapipe vs onnxruntime.

The table of cases is keyed by the family's rows, so a new row without cases fails
`test_every_row_has_gpu_cases`. Axes and target shapes are initializers (compile-time known);
`dims` given with strings make x's shape symbolic in the model.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pytest
from movement_data import random_data
from oracle import check_op

from onyxia.operators.shape import RESHAPE

DTYPES = [np.float32, np.float16, np.int64, np.int32, np.uint8, np.bool_]


class Case(NamedTuple):
    shape: tuple[int, ...]
    consts: dict[str, list[int]] = {}
    attrs: dict[str, Any] = {}
    dims: list[int | str] | None = None  # symbolic dims for x


CASES: dict[Any, list[Case]] = {
    ("Reshape", 5, None): [
        Case((2, 3, 4), {"shape": [4, -1]}),
        Case((2, 3, 4), {"shape": [0, 0, -1]}),
        Case((), {"shape": [1, 1, 1, 1, 1, 1]}),
        Case((1, 2, 1, 3, 1, 2), {"shape": [12]}),
        Case((1,), {"shape": []}),
        Case((0, 3), {"shape": [3, 0]}, {"allowzero": 1}),
        Case((0, 3), {"shape": [-1, 3]}),
        Case((2, 3, 4), {"shape": [-1, 4]}, dims=["batch", 3, 4]),
        Case((2, 5, 8), {"shape": [0, 0, 2, -1]}, dims=["batch", "seq", 8]),
    ],
    ("Unsqueeze", 13, None): [
        Case((3, 4), {"axes": [0, -1]}),
        Case((), {"axes": [0]}),
        Case((2, 3, 2, 3, 2), {"axes": [2]}),
        Case((0, 4), {"axes": [1]}),
        Case((5, 4), {"axes": [-1]}, dims=["n", 4]),
    ],
    ("Unsqueeze", 1, 12): [Case((3, 4), {}, {"axes": [1, 3]}), Case((3,), {}, {"axes": [0]}, dims=["n"])],
    ("Squeeze", 13, None): [
        Case((1, 3, 1, 4), {"axes": [0, -2]}),
        Case((1, 3, 1)),
        Case((1, 3, 1), {"axes": []}),  # onnxruntime reads empty axes as "all 1-dims"
        Case((1,), {"axes": [0]}),
        Case((1, 0, 1), {"axes": [0]}),
        Case((1, 2, 1, 2, 1, 2), {"axes": [4]}),
        Case((3, 1, 4), {"axes": [1]}, dims=["n", 1, 4]),
    ],
    ("Squeeze", 1, 12): [Case((1, 3, 1), {}, {"axes": [0]}), Case((1, 3, 1))],
    "Flatten": [
        Case((2, 3, 4)),
        Case((2, 3, 4), attrs={"axis": 0}),
        Case((2, 3, 4), attrs={"axis": 3}),
        Case((2, 3, 4), attrs={"axis": -1}),
        Case((), attrs={"axis": 0}),
        Case((2, 0, 3), attrs={"axis": 2}),
        Case((1, 2, 1, 2, 3, 2), attrs={"axis": 3}),
        Case((5, 3, 4), attrs={"axis": 1}, dims=["b", 3, 4]),
    ],
    "Identity": [
        Case(()),
        Case((7,)),
        Case((2, 3, 1, 2, 2, 3)),
        Case((2, 0, 3)),
        Case((4, 3), dims=["n", 3]),
    ],
}

ROW_CASES = [pytest.param(key, case, id=f"{key}-{i}") for key, cases in CASES.items() for i, case in enumerate(cases)]


def _op(key: Any) -> tuple[str, int]:
    """Op name and an opset inside the row's range."""
    return (key, 21) if isinstance(key, str) else (key[0], 11 if key[2] == 12 else 21)


def _run(key: Any, case: Case, dtype: type) -> None:
    op, opset = _op(key)
    inputs = {"x": random_data(case.shape, dtype), **{k: np.array(v, np.int64) for k, v in case.consts.items()}}
    dim_params = {"x": case.dims} if case.dims else None
    check_op(op, inputs, case.attrs, opset=opset, initializers=list(case.consts), dim_params=dim_params)


def test_every_row_has_gpu_cases() -> None:
    assert set(CASES) == set(RESHAPE)


@pytest.mark.parametrize(("key", "case"), ROW_CASES)
def test_movement_row_matches_onnxruntime(key: Any, case: Case) -> None:
    _run(key, case, np.float32)


@pytest.mark.parametrize("dtype", DTYPES[1:], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("key", list(RESHAPE), ids=str)
def test_movement_row_dtypes(key: Any, dtype: type) -> None:
    _run(key, CASES[key][0], dtype)
