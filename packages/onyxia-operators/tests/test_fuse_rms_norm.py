"""FuseRmsNorm: optimum's plain-op RMSNorm as SimplifiedLayerNormalization. The graph before and after, the
declined cases (graph unchanged, False, the reason logged), and every exported variant's outputs against
onnxruntime running the original graph."""

from __future__ import annotations

import logging
import textwrap
from collections.abc import Callable

import numpy as np
import onnx
import pytest
from fusion_models import ops_of
from onnx import TensorProto, helper, numpy_helper
from oracle import check_model, compile_model

from onyxia.compiler import ShapeInferencePass
from onyxia.core import DataType, GraphBuilder, TensorDef
from onyxia.operators import core_operator_registry
from onyxia.operators.passes import FuseRmsNorm

RNG = np.random.default_rng(9)
REGISTRY = core_operator_registry()
F32 = int(TensorProto.FLOAT)


def _norm(
    b: GraphBuilder,
    x: TensorDef,
    scale: TensorDef,
    *,
    axes: list[int] | None = None,
    keepdims: int = 1,
    exponent: float = 2.0,
    numerator: float = 1.0,
    narrow: int | None = F32,
) -> TensorDef:
    """transformers' RMSNorm as torch.onnx exports it: Mul(w, Cast(x * Div(1, Sqrt(mean(x^2) + eps)))),
    x first Cast to f32 (`narrow` None: neither Cast)."""
    widened = x if narrow is None else b.op("Cast", x, to=F32)
    square = b.op("Pow", widened, b.constant(np.float32(exponent), "two"))
    axes_t = b.constant(np.array([-1] if axes is None else axes, np.int64), "axes")
    mean = b.op("ReduceMean", square, axes_t, keepdims=keepdims)
    root = b.op("Sqrt", b.op("Add", mean, b.constant(np.float32(1e-6), "eps")))
    inverse = b.op("Div", b.constant(np.float32(numerator), "one"), root)
    normed = b.op("Mul", widened, inverse)
    return b.op("Mul", scale, normed if narrow is None else b.op("Cast", normed, to=narrow))


def _block(
    x_dtype: DataType = DataType.FLOAT,
    x_dims: tuple = ("seq", 8),
    scale: np.ndarray | None = None,
    casts: bool = False,
    **norm: int | float | list[int],
) -> GraphBuilder:
    """The norm of input x; its Casts when `casts` or x is not f32 (then the Casts widen and narrow)."""
    b = GraphBuilder("rms")
    x = b.input("x", x_dtype, list(x_dims))
    w = b.initializer("w", np.ones(8, np.float32) if scale is None else scale)
    narrow = int(x_dtype) if x_dtype != DataType.FLOAT or casts else None
    b.output(_norm(b, x, w, narrow=narrow, **norm))
    ShapeInferencePass().run(b.graph, REGISTRY)
    return b


def test_llama_norm_becomes_simplified_layer_norm() -> None:
    """Its two Casts to f32 in an f32 graph are dropped (drop_identity_cast), the rest fuses."""
    b = _block(casts=True)
    assert FuseRmsNorm().run(b.graph, REGISTRY)
    assert str(b.graph) == textwrap.dedent("""\
        graph rms(
          %0:f32[seq,8]  # x
        ) {
          %4:f32[] = Constant(value=tensor[])  # two
          %8:i64[1] = Constant(value=tensor[1])  # axes
          %12:f32[] = Constant(value=tensor[])  # eps
          %18:f32[] = Constant(value=tensor[])  # one
          %26:f32[seq,8] = SimplifiedLayerNormalization(%0, %1, axis=-1, epsilon=9.999999974752427e-07)  # Mul_1
          return %26
        }""")
    b.graph.check()
    assert not FuseRmsNorm().run(b.graph, REGISTRY)  # settled


@pytest.mark.parametrize(
    ("build", "reason"),
    [
        (lambda: _block(axes=[0]), "expected the last axis of a rank-2 input"),
        (lambda: _block(x_dims=(8, 8), keepdims=0), "keepdims=0"),
        (lambda: _block(exponent=3.0), "the square's exponent is 3.0"),
        (lambda: _block(numerator=2.0), "the numerator is 2.0"),
        (lambda: _block(scale=np.ones((4, 8), np.float32), x_dims=(4, 8)), "is not the last dim 8"),
        (lambda: _block(scale=np.ones(1, np.float32)), "is not the last dim 8"),
        (lambda: _block(x_dtype=DataType.FLOAT16, scale=np.ones(8, np.float16)), "computes in f16, f32"),
    ],
    ids=["axis", "keepdims", "exponent", "numerator", "full-scale", "scalar-scale", "float16-weight-mul"],
)
def test_declines_with_a_reason(
    build: Callable[[], GraphBuilder], reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    b = build()
    before = str(b.graph)
    with caplog.at_level(logging.DEBUG, logger="onyxia.core.rewrite"):
        assert not FuseRmsNorm().run(b.graph, REGISTRY)
    assert str(b.graph) == before
    assert reason in caplog.text


# ----- numerics: each exported variant against onnxruntime on the original graph -------------------------
def _const(name: str, value: np.ndarray) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))


def _variant_nodes(variant: str, x: str, w: str, y: str, opset: int) -> list[onnx.NodeProto]:
    """One RMSNorm of `x` scaled by `w` into `y`, spelled as the named exporter variant."""
    p = f"{y}_"
    nodes = [_const(p + "eps", np.float32(1e-5)), _const(p + "two", np.float32(2)), _const(p + "one", np.float32(1))]
    if variant == "mul-square":
        nodes.append(helper.make_node("Mul", [x, x], [p + "sq"]))
    else:
        nodes.append(helper.make_node("Pow", [x, p + "two"], [p + "sq"]))
    if opset >= 18:
        nodes += [
            _const(p + "axes", np.array([-1])),
            helper.make_node("ReduceMean", [p + "sq", p + "axes"], [p + "mean"]),
        ]
    else:
        nodes.append(helper.make_node("ReduceMean", [p + "sq"], [p + "mean"], axes=[-1], keepdims=1))
    add_inputs = [p + "eps", p + "mean"] if variant == "eps-first" else [p + "mean", p + "eps"]
    nodes.append(helper.make_node("Add", add_inputs, [p + "var"]))
    if variant != "pow-minus-half":
        nodes.append(helper.make_node("Sqrt", [p + "var"], [p + "std"]))
    if variant == "div-by-std":
        nodes.append(helper.make_node("Div", [x, p + "std"], [p + "n"]))
    else:
        if variant == "reciprocal":
            nodes.append(helper.make_node("Reciprocal", [p + "std"], [p + "inv"]))
        elif variant == "pow-minus-half":
            nodes += [
                _const(p + "half", np.float32(-0.5)),
                helper.make_node("Pow", [p + "var", p + "half"], [p + "inv"]),
            ]
        else:
            nodes.append(helper.make_node("Div", [p + "one", p + "std"], [p + "inv"]))
        nodes.append(helper.make_node("Mul", [p + "inv", x] if variant == "reciprocal" else [x, p + "inv"], [p + "n"]))
    if variant == "gemma":  # no Cast, the weight on the right
        return [*nodes, helper.make_node("Mul", [p + "n", w], [y])]
    return [*nodes, helper.make_node("Cast", [p + "n"], [p + "c"], to=F32), helper.make_node("Mul", [w, p + "c"], [y])]


def _model(variant: str, dims: list, w_shape: tuple, opset: int = 21, residual: bool = False) -> onnx.ModelProto:
    """y = RMSNorm(x) (x = Cast(a + r) with `residual`, the Cast also read by the next residual Add)."""
    nodes, inputs = [], [helper.make_tensor_value_info("a", TensorProto.FLOAT, dims)]
    x = "a"
    if residual:
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, dims))
        nodes += [helper.make_node("Add", ["a", "r"], ["sum"]), helper.make_node("Cast", ["sum"], ["x"], to=F32)]
        x = "x"
    nodes += _variant_nodes(variant, x, "w", "y", opset)
    outputs = ["y"]
    if residual:
        nodes.append(helper.make_node("Add", [x, "y"], ["next"]))
        outputs.append("next")
    w = numpy_helper.from_array((1 + 0.3 * RNG.standard_normal(w_shape)).astype(np.float32), "w")
    graph = helper.make_graph(nodes, "rms", inputs, [helper.make_empty_tensor_value_info(o) for o in outputs], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


VARIANTS = ["llama", "gemma", "mul-square", "reciprocal", "pow-minus-half", "div-by-std", "eps-first"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_variants_fuse_and_match_onnxruntime(variant: str) -> None:
    model = _model(variant, [1, "seq", 64], (64,))
    ops = ops_of(compile_model(model, {"seq": 5}))
    assert ops == ["SimplifiedLayerNormalization"], ops
    check_model(model, {"a": (4 * RNG.standard_normal((1, 5, 64))).astype(np.float32)}, dims={"seq": 5})


def test_axes_attribute_before_opset_18() -> None:
    model = _model("llama", [2, 3, 32], (1, 1, 32), opset=17)
    assert ops_of(compile_model(model)) == ["SimplifiedLayerNormalization"]
    check_model(model, {"a": RNG.standard_normal((2, 3, 32)).astype(np.float32)})


def test_per_head_norm_of_a_4d_tensor() -> None:
    """Qwen 3 / Gemma 3 q_norm: the norm over head_dim of [B, S, N, H]."""
    model = _model("llama", [1, "seq", 4, 16], (16,))
    assert ops_of(compile_model(model, {"seq": 3})) == ["SimplifiedLayerNormalization"]
    check_model(model, {"a": RNG.standard_normal((1, 3, 4, 16)).astype(np.float32)}, dims={"seq": 3})


def test_residual_sum_through_an_identity_cast_becomes_skip_norm() -> None:
    """optimum: Add -> Cast(to=float) -> norm, the Cast's output also the next residual Add's input."""
    model = _model("llama", [1, "seq", 64], (64,), residual=True)
    ops = ops_of(compile_model(model, {"seq": 5}))
    assert "Cast" not in ops and ops.count("SkipSimplifiedLayerNormalization") == 1, ops
    feeds = {n: RNG.standard_normal((1, 5, 64)).astype(np.float32) for n in ("a", "r")}
    check_model(model, feeds, dims={"seq": 5})


def test_gemma_float16_form_fuses_in_float32() -> None:
    """Gemma in float16 exports: Cast(x, f32), the norm and the weight Mul in f32, then Cast back: all f32
    inside the match, so it fuses and the Casts stay outside it."""
    nodes = [
        helper.make_node("Cast", ["a"], ["x"], to=F32),
        *_variant_nodes("gemma", "x", "w", "y32", 21),
        helper.make_node("Cast", ["y32"], ["y"], to=int(TensorProto.FLOAT16)),
    ]
    w = numpy_helper.from_array((1 + 0.3 * RNG.standard_normal(64)).astype(np.float32), "w")
    inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT16, [1, "seq", 64])]
    graph = helper.make_graph(nodes, "rms", inputs, [helper.make_empty_tensor_value_info("y")], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=8)
    ops = ops_of(compile_model(model, {"seq": 5}))
    assert "SimplifiedLayerNormalization" in ops and "ReduceMean" not in ops, ops
    check_model(model, {"a": RNG.standard_normal((1, 5, 64)).astype(np.float16)}, dims={"seq": 5})
