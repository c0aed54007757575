"""Einsum against onnxruntime: contractions, batch dims, transposes, sums over an index one operand has,
outer and dot products, ellipsis broadcasting, implicit outputs, three operands, a symbolic dim; a
diagonal is refused naming the node."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import check_op, compile_model, make_model

from onyxia.core import UnsupportedOpError

RNG = np.random.default_rng(2718)

CASES = [
    ("abcd,cde->abe", [(2, 3, 4, 5), (4, 5, 6)]),  # g2p-id's BERT attention output projection
    ("bij,bjk->bik", [(3, 4, 5), (3, 5, 2)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 8), (2, 3, 5, 8)]),
    ("ij->ji", [(3, 4)]),
    ("ij->i", [(3, 4)]),
    ("ijk->", [(2, 3, 4)]),
    ("i,i->", [(7,), (7,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij,jk", [(3, 4), (4, 5)]),  # implicit output: ik
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (1, 5, 4, 2)]),  # ellipsis dims broadcast (1 against n)
    ("bi,bj->b", [(4, 3), (4, 5)]),  # each operand sums its own index
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("nchw,oc->nohw", [(2, 3, 4, 5), (6, 3)]),
]


@pytest.mark.parametrize(("equation", "shapes"), CASES, ids=[c[0] for c in CASES])
def test_einsum_matches_onnxruntime(equation: str, shapes: list[tuple[int, ...]]) -> None:
    inputs = {f"x{i}": RNG.standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)}
    check_op("Einsum", inputs, {"equation": equation}, opset=12)


def test_einsum_with_a_symbolic_dim_runs_at_two_sizes() -> None:
    a, w = RNG.standard_normal((1, 3, 4, 5)).astype(np.float32), RNG.standard_normal((4, 5, 6)).astype(np.float32)
    check_op(
        "Einsum",
        {"a": a, "w": w},
        {"equation": "abcd,cde->abe"},
        opset=12,
        initializers=["w"],
        dim_params={"a": ["batch", "seq", 4, 5]},
    )


def test_a_diagonal_is_refused_by_name() -> None:
    model = make_model("Einsum", {"x": np.zeros((3, 3), np.float32)}, {"equation": "ii->i"}, opset=12)
    with pytest.raises(UnsupportedOpError, match=r"node 'Einsum_0' \(Einsum\).*'ii->i' repeats \['i'\]"):
        compile_model(model)
