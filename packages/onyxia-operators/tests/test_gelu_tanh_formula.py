"""gelu_tanh_formula: optimum's spelled-out tanh Gelu becomes one Gelu, then the gated MLP one GatedMatMul;
results against onnxruntime on the original graph, and the declines with their reasons."""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import onnx
import pytest
from fusion_models import graph_model, ops_of
from onnx import helper
from oracle import check_model, compile_model

RNG = np.random.default_rng(20)
ROOT = np.float32(math.sqrt(2 / math.pi))


def _gelu_nodes(x: str, y: str, *, cube: str = "mul", halved_first: bool = False, cubic: float = 0.044715) -> list:
    """transformers' gelu_pytorch_tanh as torch.onnx writes it below opset 20 (optimum's Gemma 2 / 3)."""
    consts = {"half": 0.5, "one": 1.0, "cubic": cubic, "root": ROOT, "three": 3.0}
    nodes = [
        helper.make_node("Constant", [], [f"{y}_{k}"], value=helper.make_tensor(k, 1, [], [float(v)]))
        for k, v in consts.items()
    ]
    if cube == "pow":
        nodes.append(helper.make_node("Pow", [x, f"{y}_three"], [f"{y}_cube"]))
    else:
        nodes += [
            helper.make_node("Mul", [x, x], [f"{y}_sq"]),
            helper.make_node("Mul", [x, f"{y}_sq"], [f"{y}_cube"]),
        ]
    nodes += [
        helper.make_node("Mul", [f"{y}_cubic", f"{y}_cube"], [f"{y}_t2"]),
        helper.make_node("Add", [x, f"{y}_t2"], [f"{y}_t3"]),
        helper.make_node("Mul", [f"{y}_root", f"{y}_t3"], [f"{y}_t4"]),
        helper.make_node("Tanh", [f"{y}_t4"], [f"{y}_t5"]),
        helper.make_node("Add", [f"{y}_one", f"{y}_t5"], [f"{y}_t6"]),
    ]
    if halved_first:
        return [
            *nodes,
            helper.make_node("Mul", [x, f"{y}_half"], [f"{y}_h"]),
            helper.make_node("Mul", [f"{y}_h", f"{y}_t6"], [y]),
        ]
    return [
        *nodes,
        helper.make_node("Mul", [x, f"{y}_t6"], [f"{y}_t7"]),
        helper.make_node("Mul", [f"{y}_half", f"{y}_t7"], [y]),
    ]


def _mlp(**gelu: Any) -> onnx.ModelProto:
    """Gemma's MLP: down(gelu(x @ Wg) * (x @ Wu))."""
    nodes = [
        helper.make_node("MatMul", ["x", "wg"], ["g"]),
        helper.make_node("MatMul", ["x", "wu"], ["u"]),
        *_gelu_nodes("g", "a", **gelu),
        helper.make_node("Mul", ["a", "u"], ["m"]),
        helper.make_node("MatMul", ["m", "wd"], ["y"]),
    ]
    weights = {n: (0.3 * RNG.standard_normal(s)).astype(np.float32) for n, s in (("wg", (32, 48)), ("wu", (32, 48)))}
    weights["wd"] = (0.3 * RNG.standard_normal((48, 32))).astype(np.float32)
    return graph_model(nodes, {"x": (np.float32, [1, "seq", 32])}, weights, ["y"])


@pytest.mark.parametrize(
    "gelu", [{}, {"cube": "pow"}, {"halved_first": True}], ids=["mul-cube", "pow-cube", "halved-first"]
)
def test_spelled_out_gelu_gates_the_mlp_and_matches_onnxruntime(gelu: dict) -> None:
    model = _mlp(**gelu)
    assert ops_of(compile_model(model, {"seq": 3})) == ["GatedMatMul", "MatMul"]
    check_model(model, {"x": (2 * RNG.standard_normal((1, 3, 32))).astype(np.float32)}, dims={"seq": 3})


def test_a_lone_formula_becomes_gelu() -> None:
    model = graph_model(_gelu_nodes("x", "y"), {"x": (np.float32, [7])}, {}, ["y"])
    assert ops_of(compile_model(model)) == ["Gelu"]
    check_model(model, {"x": np.linspace(-6, 6, 7, dtype=np.float32)})


def test_another_constant_declines(caplog: pytest.LogCaptureFixture) -> None:
    model = _mlp(cubic=0.05)
    with caplog.at_level(logging.DEBUG, logger="onyxia.core.rewrite"):
        ops = ops_of(compile_model(model, {"seq": 2}))
    assert "Gelu" not in ops and "GatedMatMul" not in ops, ops
    assert "the constant 'cubic' is 0.05000000074505806, not the tanh-Gelu's 0.044714998453855515" in caplog.text
    check_model(model, {"x": RNG.standard_normal((1, 2, 32)).astype(np.float32)}, dims={"seq": 2})
