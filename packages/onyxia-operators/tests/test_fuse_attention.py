"""FuseAttention: optimum's plain attention (scaled q k^T, mask, Softmax, Where(IsNaN), MatMul with v over
repeat-kv copies of a Concat-grown cache) as one ScaledDotProductAttention: golden graph, declined cases
(graph unchanged, False), and outputs against onnxruntime on the unfused model, prefill and decode, with
fully masked rows (finfo.min: a softmax over every key; -inf: NaN, or 0 through the Where)."""

from __future__ import annotations

import logging
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from fusion_models import graph_model, ops_of
from onnx import helper
from oracle import assert_close, compile_model, reference_outputs, runtime

from onyxia.compiler import ConstantFoldingPass, ShapeInferencePass
from onyxia.core import IrGraph
from onyxia.onnx import load_and_parse_model
from onyxia.operators import core_operator_registry
from onyxia.operators.passes import FuseAttention, cleanup_passes

REGISTRY = core_operator_registry()
RNG = np.random.default_rng(29)
HEAD = 16
TOLERANCE = (1e-4, 2e-5)  # onnxruntime's MatMuls and softmax sum in another order


def _const(name: str, value: object, dtype: type = np.float32) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(np.asarray(value, dtype)))


def _repeat(tag: str, heads: int, kv: int) -> list[onnx.NodeProto]:
    """optimum's repeat_kv: Unsqueeze(x, 2) -> Expand [B, KV, G, T, H] -> Reshape to a folded [B, N, T, H]."""
    return [
        _const(f"{tag}_axes", [2], np.int64),
        helper.make_node("Unsqueeze", [f"{tag}_all", f"{tag}_axes"], [f"{tag}_5d"]),
        _const(f"{tag}_groups", [1, 1, heads // kv, 1, 1], np.int64),
        helper.make_node("Expand", [f"{tag}_5d", f"{tag}_groups"], [f"{tag}_expanded"]),
        helper.make_node("Shape", [f"{tag}_all"], [f"{tag}_shape"]),
        *(_const(f"{tag}_{n}", v, np.int64) for n, v in (("i0", [0]), ("i1", [1]), ("i2", [2]), ("i3", [3]))),
        helper.make_node("Slice", [f"{tag}_shape", f"{tag}_i0", f"{tag}_i1"], [f"{tag}_b"]),
        helper.make_node("Slice", [f"{tag}_shape", f"{tag}_i2", f"{tag}_i3"], [f"{tag}_len"]),
        _const(f"{tag}_n", [heads], np.int64),
        _const(f"{tag}_h", [HEAD], np.int64),
        helper.make_node("Concat", [f"{tag}_b", f"{tag}_n", f"{tag}_len", f"{tag}_h"], [f"{tag}_target"], axis=0),
        helper.make_node("Reshape", [f"{tag}_expanded", f"{tag}_target"], [f"{tag}_rep"]),
    ]


def attention_model(
    *,
    heads: int = 4,
    kv: int = 2,
    scaling: str = "mul",
    mask: str | None = "bool",
    nan_where: bool = True,
    softcap: float | None = None,
    transpose_out: bool = True,
    zero: float = 0.0,
    axis: int = -1,
    dtype: type = np.float32,
) -> onnx.ModelProto:
    """q [1, heads, S, 16], new k/v [1, kv, S, 16] appended to past [1, kv, P, 16]; the mask [1, 1, S, P + S]
    (bool through Where(m, 0, finfo.min), sliced to k_rep.shape[-2] as optimum does, or float added as is)."""
    nodes = [
        helper.make_node("Concat", ["past_k", "k"], ["k_all"], axis=2),
        helper.make_node("Concat", ["past_v", "v"], ["v_all"], axis=2),
    ]
    k_rep, v_rep = "k_all", "v_all"
    if kv != heads and kv != 1:
        nodes += _repeat("k", heads, kv) + _repeat("v", heads, kv)
        k_rep, v_rep = "k_rep", "v_rep"
    nodes.append(helper.make_node("Transpose", [k_rep], ["k_t"], perm=[0, 1, 3, 2]))
    c = float(np.float32(HEAD**-0.25))
    if scaling == "mul":
        nodes += [_const("c", c, dtype), helper.make_node("Mul", ["q", "c"], ["q_s"])]
        nodes += [helper.make_node("Mul", ["k_t", "c"], ["k_s"]), helper.make_node("MatMul", ["q_s", "k_s"], ["x"])]
    else:
        nodes += [helper.make_node("MatMul", ["q", "k_t"], ["qk"]), _const("d", HEAD**0.5, dtype)]
        nodes.append(helper.make_node("Div", ["qk", "d"], ["x"]))
    logits = "x"
    if softcap is not None:
        nodes += [_const("cap", softcap, dtype), helper.make_node("Div", ["x", "cap"], ["x_c"])]
        nodes += [helper.make_node("Tanh", ["x_c"], ["x_t"]), helper.make_node("Mul", ["x_t", "cap"], ["x_capped"])]
        logits = "x_capped"
    inputs = {"q": (dtype, [1, heads, "seq", HEAD])}
    for name in ("k", "v"):
        inputs[name] = (dtype, [1, kv, "seq", HEAD])
        inputs[f"past_{name}"] = (dtype, [1, kv, "past", HEAD])
    if mask == "bool":
        inputs["m"] = (np.bool_, [1, 1, "seq", "past + seq"])
        nodes += [
            helper.make_node("Shape", [k_rep], ["kr_shape"]),
            _const("two", 2, np.int64),
            helper.make_node("Gather", ["kr_shape", "two"], ["kr_len"], axis=0),
            _const("zero_axis", [0], np.int64),
            helper.make_node("Unsqueeze", ["kr_len", "zero_axis"], ["kr_end"]),
            _const("last", [3], np.int64),
            helper.make_node("Slice", ["m", "zero_axis", "kr_end", "last"], ["m_sliced"]),
            _const("open", [0.0], dtype),
            _const("shut", [float(np.finfo(dtype).min)], dtype),
            helper.make_node("Where", ["m_sliced", "open", "shut"], ["additive"]),
            helper.make_node("Add", [logits, "additive"], ["masked"]),
        ]
        logits = "masked"
    elif mask == "float":
        inputs["m"] = (dtype, [1, 1, "seq", "past + seq"])
        nodes.append(helper.make_node("Add", ["m", logits], ["masked"]))
        logits = "masked"
    nodes.append(helper.make_node("Softmax", [logits], ["p"], axis=axis))
    probs = "p"
    if nan_where:
        nodes += [helper.make_node("IsNaN", ["p"], ["nan"]), _const("z", [zero], dtype)]
        nodes.append(helper.make_node("Where", ["nan", "z", "p"], ["p_clean"]))
        probs = "p_clean"
    nodes.append(helper.make_node("MatMul", [probs, v_rep], ["attn"]))
    output = "attn"
    if transpose_out:
        nodes.append(helper.make_node("Transpose", ["attn"], ["y"], perm=[0, 2, 1, 3]))
        output = "y"
    return graph_model(nodes, inputs, {}, [output])


def _graph(model: onnx.ModelProto) -> IrGraph:
    with tempfile.TemporaryDirectory() as tmp:
        onnx.save_model(model, Path(tmp, "model.onnx"))
        graph = load_and_parse_model(Path(tmp, "model.onnx"))
    ShapeInferencePass().run(graph, REGISTRY)
    ConstantFoldingPass().run(graph, REGISTRY)
    return graph


def _fuse(model: onnx.ModelProto) -> tuple[IrGraph, bool]:
    graph = _graph(model)
    fired = FuseAttention().run(graph, REGISTRY)
    cleanup_passes().run(graph, REGISTRY)
    return graph, fired


def test_optimum_attention_becomes_one_op() -> None:
    graph, fired = _fuse(attention_model())
    assert fired
    assert str(graph) == textwrap.dedent("""\
        graph fusion_test(
          %0:f32[1,4,seq,16]  # q
          %1:f32[1,2,seq,16]  # k
          %2:f32[1,2,past,16]  # past_k
          %3:f32[1,2,seq,16]  # v
          %4:f32[1,2,past,16]  # past_v
          %5:bool[1,1,seq,past + seq]  # m
        ) {
          %6:f32[1,2,past + seq,16] = Concat(%2, %1, axis=2)  # Concat_0
          %7:f32[1,2,past + seq,16] = Concat(%4, %3, axis=2)  # Concat_1
          %59:f32[1,seq,4,16] = com.onyxia::ScaledDotProductAttention(%0, %6, %7, %5, k_scale=0.5, \
mask_false=-3.4028234663852886e+38, mask_true=0.0, q_scale=0.5, transpose_output=1, zero_nan_rows=1)  # Transpose_53
          return %59
        }""")
    graph.check()
    assert not FuseAttention().run(graph, REGISTRY)  # settled


@pytest.mark.parametrize(
    ("options", "attrs"),
    [
        ({"scaling": "div", "mask": "float", "nan_where": False, "transpose_out": False}, {"divisor": 4.0}),
        ({"kv": 4, "softcap": 50.0, "mask": None}, {"softcap": 50.0, "q_scale": 0.5}),
        ({"kv": 1}, {"q_scale": 0.5}),
    ],
    ids=["div-float-mask", "softcap-no-repeat", "one-kv-head"],
)
def test_variants_fuse(options: dict, attrs: dict) -> None:
    graph, fired = _fuse(attention_model(**options))
    assert fired
    (node,) = [n for n in graph.nodes if n.op_type == "ScaledDotProductAttention"]
    assert attrs.items() <= node.attributes.items()
    assert not any(n.op_type in ("Softmax", "MatMul") for n in graph.nodes)


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({"axis": 2}, "the Softmax is over axis 2"),
        ({"zero": 1.0}, "does not replace NaN probabilities by 0"),
        ({"dtype": np.float16}, "q is f16"),
    ],
    ids=["softmax-axis", "nan-where-one", "float16"],
)
def test_declines_with_the_reason(options: dict, reason: str, caplog: pytest.LogCaptureFixture) -> None:
    graph = _graph(attention_model(**options))
    with caplog.at_level(logging.DEBUG, logger="onyxia.core.rewrite.engine"):
        FuseAttention().run(graph, REGISTRY)
    assert [n.op_type for n in graph.nodes].count("Softmax") == 1
    assert not any(n.op_type == "ScaledDotProductAttention" for n in graph.nodes)
    assert "rule fuse_attention declined at 'MatMul_" in caplog.text and reason in caplog.text, caplog.text


# ----- numerics ----------------------------------------------------------------------------------
def _feeds(model: onnx.ModelProto, seq: int, past: int, mask: np.ndarray | None, kv: int = 2, heads: int = 4) -> dict:
    feeds = {"q": RNG.standard_normal((1, heads, seq, HEAD)).astype(np.float32) * 2}
    for name in ("k", "v"):
        feeds[name] = RNG.standard_normal((1, kv, seq, HEAD)).astype(np.float32) * 2
        feeds[f"past_{name}"] = RNG.standard_normal((1, kv, past, HEAD)).astype(np.float32) * 2
    if mask is not None:
        feeds["m"] = mask
    return feeds


def _causal(seq: int, past: int, masked_rows: tuple[int, ...] = ()) -> np.ndarray:
    """True where query s (at position past + s) may see key j; `masked_rows` see nothing."""
    allowed = np.arange(past + seq)[None, :] <= (past + np.arange(seq))[:, None]
    allowed[list(masked_rows), :] = False
    return allowed[None, None]


def _check(model: onnx.ModelProto, feeds_list: list[dict]) -> None:
    compiled = compile_model(model)
    assert ops_of(compiled).count("ScaledDotProductAttention") == 1, ops_of(compiled)
    assert "Softmax" not in ops_of(compiled)
    executor = runtime().load_model(compiled)
    for feeds in feeds_list:
        got = executor.run(dict(feeds))
        for output, expected in zip(model.graph.output, reference_outputs(model, feeds, "ort")):
            assert_close(got[output.name], expected, output.name, tolerance=TOLERANCE)


def test_bool_mask_prefill_and_decode() -> None:
    """finfo.min masking: a fully masked query row (row 2) is onnxruntime's softmax over every key."""
    model = attention_model()
    feeds = [
        _feeds(model, 7, 0, _causal(7, 0, masked_rows=(2,))),
        _feeds(model, 1, 7, _causal(1, 7)),
        _feeds(model, 1, 99, _causal(1, 99, masked_rows=(0,))),  # decode over more keys than one workgroup
        _feeds(model, 5, 9, _causal(5, 9)),
    ]
    _check(model, feeds)


def _float_mask(seq: int, past: int, rows: tuple[int, ...]) -> np.ndarray:
    allowed = _causal(seq, past, rows)
    return np.where(allowed, RNG.standard_normal(allowed.shape) * 0.5, -np.inf).astype(np.float32)


@pytest.mark.parametrize("nan_where", [True, False], ids=["where-zero", "nan-rows"])
def test_float_mask_with_infinite_rows(nan_where: bool) -> None:
    """-inf masking: a fully masked row is NaN in onnxruntime, 0 through Where(IsNaN(p), 0, p)."""
    model = attention_model(scaling="div", mask="float", nan_where=nan_where, transpose_out=False)
    feeds = [
        _feeds(model, 6, 3, _float_mask(6, 3, (1, 4))),
        _feeds(model, 1, 8, _float_mask(1, 8, ())),
        _feeds(model, 1, 8, _float_mask(1, 8, (0,))),
    ]
    _check(model, feeds)


def test_softcap_without_repeat() -> None:
    model = attention_model(kv=4, softcap=2.0, mask=None)
    _check(model, [_feeds(model, 5, 2, None, kv=4), _feeds(model, 1, 70, None, kv=4)])


def test_one_kv_head_broadcast_by_matmul() -> None:
    model = attention_model(kv=1)
    _check(model, [_feeds(model, 4, 4, _causal(4, 4), kv=1), _feeds(model, 1, 8, _causal(1, 8), kv=1)])
