"""FuseRotateHalf and com.onyxia ApplyRotaryPosEmb: optimum's plain-op rotate-half RoPE (every layout, Phi-3's
partial rotary, Qwen 3 / Gemma 3 q_norm before or after the Transpose) as one dispatch. Outputs equal
onnxruntime's on the original plain graph and, bit for bit, the unfused plan's; cos and sin are random (the two
halves of a row differ) and per batch row or shared. Declines leave the graph unchanged; shape errors name the
node."""

from __future__ import annotations

import textwrap
from typing import Any

import numpy as np
import onnx
import pytest
from fusion_models import check_fused, graph_model
from onnx import helper
from oracle import assert_close, check_rebinding, compile_model, reference_outputs, runtime

from onyxia.compiler import CompilerPipeline, ShapeInferencePass
from onyxia.core import DataType, GraphBuilder, IrGraph, ShapeInferenceError
from onyxia.operators import core_operator_registry
from onyxia.operators.passes import FuseRotateHalf

REGISTRY = core_operator_registry()
RNG = np.random.default_rng(29)
END = np.iinfo(np.int64).max
HEADS, HEAD = 4, 16


def _rope(x: str, rotary: int, out: str, split: int | None = None) -> list[onnx.NodeProto]:
    """optimum's apply_rotary_pos_emb on `x` (last dim `rotary`): x * cos + rotate_half(x) * sin."""
    half = f"b{split or rotary // 2}"
    return [
        helper.make_node("Slice", [x, "b0", half, "last"], [f"{x}_1"]),
        helper.make_node("Slice", [x, half, "end", "last"], [f"{x}_2"]),
        helper.make_node("Neg", [f"{x}_2"], [f"{x}_neg"]),
        helper.make_node("Concat", [f"{x}_neg", f"{x}_1"], [f"{x}_rot"], axis=-1),
        helper.make_node("Mul", [x, "cos4"], [f"{x}_c"]),
        helper.make_node("Mul", [f"{x}_rot", "sin4"], [f"{x}_s"]),
        helper.make_node("Add", [f"{x}_c", f"{x}_s"], [out]),
    ]


def _model(
    layout: str = "bsnh",
    rotary: int = HEAD,
    norm: str | None = None,
    cos_batch: int | str = 1,
    dtype: type = np.float32,
    split: int | None = None,
    x_batch: int | str = "batch",
) -> onnx.ModelProto:
    """q = Transpose(Reshape(proj, [0, 0, N, H])) (layout "bsnh") or a [B, N, S, H] input ("bnsh"); `norm`
    "before" / "after" the Transpose is a per-head SimplifiedLayerNormalization; `rotary` < H rotates a prefix."""
    nodes = [helper.make_node("Unsqueeze", [t, "one"], [f"{t}4"]) for t in ("cos", "sin")]
    inputs: dict = {t: (dtype, [cos_batch, "seq", rotary]) for t in ("cos", "sin")}
    if layout == "bnsh":
        inputs["q"] = (dtype, [x_batch, HEADS, "seq", HEAD])
    else:
        inputs["proj"] = (dtype, [x_batch, "seq", HEADS * HEAD])
        nodes.append(helper.make_node("Reshape", ["proj", "heads"], ["bsnh"]))
        sln = {"axis": -1, "epsilon": 1e-6, "stash_type": 1}
        if norm == "before":
            nodes.append(helper.make_node("SimplifiedLayerNormalization", ["bsnh", "scale"], ["bsnh_n"], **sln))
        bnsh = "t" if norm == "after" else "q"
        nodes.append(
            helper.make_node("Transpose", ["bsnh_n" if norm == "before" else "bsnh"], [bnsh], perm=[0, 2, 1, 3])
        )
        if norm == "after":
            nodes.append(helper.make_node("SimplifiedLayerNormalization", ["t", "scale"], ["q"], **sln))
    if rotary < HEAD:
        nodes.append(helper.make_node("Slice", ["q", "b0", f"b{rotary}", "last"], ["q_r"]))
        nodes.append(helper.make_node("Slice", ["q", f"b{rotary}", "end", "last"], ["q_p"]))
        nodes += [*_rope("q_r", rotary, "q_rope", split), helper.make_node("Concat", ["q_rope", "q_p"], ["y"], axis=-1)]
    else:
        nodes += _rope("q", rotary, "y", split)
    bounds = {f"b{v}": np.array([v]) for v in {0, rotary, rotary // 2, split or 0}}
    initializers = {
        **bounds,
        "end": np.array([END]),
        "last": np.array([-1]),
        "one": np.array([1]),
        "heads": np.array([0, 0, HEADS, HEAD]),
        "scale": (1 + 0.3 * RNG.standard_normal(HEAD)).astype(dtype),
    }
    return graph_model(nodes, inputs, initializers, ["y"])


def _feeds(model: onnx.ModelProto, batch: int, seq: int) -> dict[str, np.ndarray]:
    """Random inputs: cos and sin rows are not two equal halves (no angle structure is assumed)."""
    dims = {"batch": batch, "seq": seq}
    feeds = {}
    for value in model.graph.input:
        shape = [d.dim_value or dims[d.dim_param] for d in value.type.tensor_type.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
        feeds[value.name] = RNG.standard_normal(shape).astype(dtype)
    return feeds


# ----- numerics against onnxruntime and the unfused plan -------------------------------------------
CASES = {
    "bnsh": {"layout": "bnsh"},
    "bsnh": {},
    "bsnh-cos-per-batch": {"cos_batch": "batch"},
    "phi3-partial": {"rotary": 12},
    "qwen3-norm-before-transpose": {"norm": "before"},
    "gemma3-norm-after-transpose": {"norm": "after"},
    "partial-and-norm": {"rotary": 8, "norm": "after"},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_outputs_equal_onnxruntime_and_the_unfused_plan(case: str) -> None:
    model = _model(**CASES[case])
    assert _dispatching(compile_model(model)) == ["ApplyRotaryPosEmb"]
    feeds = [_feeds(model, 2, seq) for seq in (5, 1)]
    check_fused(model, feeds, {"FuseRotateHalf"})


def _dispatching(compiled: Any) -> list[str]:
    """Op types that run a step (the Unsqueezes of cos and sin are views)."""
    return [o.op_type for o in compiled.operations if o.steps]


def test_new_sequence_length_does_not_recompile() -> None:
    model = _model(norm="before", rotary=8)
    check_rebinding(model, [_feeds(model, 1, seq) for seq in (7, 1, 3)])


@pytest.mark.parametrize("norm", [False, True])
def test_float16_op_rotates_in_float32_and_rounds_once(norm: bool) -> None:
    """The op on float16 (the fusion only makes it on float32): the float32 plain graph, rounded to float16."""
    b = GraphBuilder("rope_f16", opsets={"": 21, "com.onyxia": 1})
    x = b.input("proj", DataType.FLOAT16, [1, "seq", HEADS, HEAD])
    cos, sin = (b.input(n, DataType.FLOAT16, [1, 1, "seq", HEAD]) for n in ("cos", "sin"))
    scale = (1 + 0.3 * RNG.standard_normal(HEAD)).astype(np.float16)
    extra = [b.initializer("scale", scale)] if norm else []
    attrs = {"epsilon": 1e-6} if norm else {}
    b.output(b.op("ApplyRotaryPosEmb", x, cos, sin, *extra, _domain="com.onyxia", transpose_input=1, **attrs))
    plan = runtime().load_model(CompilerPipeline(REGISTRY).compile(b.graph, {}))
    reference = _model(norm="before" if norm else None, x_batch=1)
    _initializer(reference, "scale").CopyFrom(onnx.numpy_helper.from_array(scale.astype(np.float32), "scale"))
    for seq in (4, 1):
        feeds = _feeds(reference, 1, seq)
        half = {k: v.astype(np.float16) for k, v in feeds.items()}
        got = plan.run(
            {"proj": half["proj"].reshape(1, seq, HEADS, HEAD), "cos": half["cos"][None], "sin": half["sin"][None]}
        )
        wide = {k: v.astype(np.float32) for k, v in half.items()}
        (expected,) = reference_outputs(reference, wide, "ort")
        assert_close(next(iter(got.values())), expected.astype(np.float16), "y")


# ----- the rewrite ----------------------------------------------------------------------------------
def _graph(norm_axis: int = -1, scale_len: int = HEAD) -> GraphBuilder:
    """Gemma 3's q path as the fusion sees it: Reshape -> Transpose -> SLN (q_norm) -> rotate-half RoPE."""
    b = GraphBuilder("q_rope")
    proj = b.input("proj", DataType.FLOAT, ["batch", "seq", HEADS * HEAD])
    cos, sin = (b.input(n, DataType.FLOAT, [1, "seq", HEAD]) for n in ("cos", "sin"))
    one, zero, half, end, last = (b.initializer(n, np.array([v])) for n, v in zip("ozhel", (1, 0, HEAD // 2, END, -1)))
    bsnh = b.op("Reshape", proj, b.initializer("heads", np.array([0, 0, HEADS, HEAD])))
    bnsh = b.op("Transpose", bsnh, perm=[0, 2, 1, 3])
    scale = b.initializer("scale", np.ones(scale_len, np.float32))
    q = b.op("SimplifiedLayerNormalization", bnsh, scale, axis=norm_axis, epsilon=1e-6)
    cos4, sin4 = (b.op("Unsqueeze", t, one) for t in (cos, sin))
    rotated = b.op(
        "Concat", b.op("Neg", b.op("Slice", q, half, end, last)), b.op("Slice", q, zero, half, last), axis=-1
    )
    b.output(b.op("Add", b.op("Mul", q, cos4), b.op("Mul", rotated, sin4), _name="q_rope"))
    return b


def _run(graph: IrGraph) -> bool:
    ShapeInferencePass().run(graph, REGISTRY)
    return FuseRotateHalf().run(graph, REGISTRY)


def test_rope_transpose_and_norm_become_one_op() -> None:
    b = _graph()
    assert _run(b.graph)
    assert str(b.graph) == textwrap.dedent("""\
        graph q_rope(
          %0:f32[batch,seq,64]  # proj
          %1:f32[1,seq,16]  # cos
          %2:f32[1,seq,16]  # sin
        ) {
          %9:f32[batch,seq,4,16] = Reshape(%0, %8)  # Reshape
          %16:f32[1,1,seq,16] = Unsqueeze(%1, %3)  # Unsqueeze
          %18:f32[1,1,seq,16] = Unsqueeze(%2, %3)  # Unsqueeze_1
          %32:f32[batch,4,seq,16] = com.onyxia::ApplyRotaryPosEmb(%9, %16, %18, %13, epsilon=9.999999974752427e-07, transpose_input=1)  # q_rope
          return %32
        }""")
    b.graph.check()
    assert not FuseRotateHalf().run(b.graph, REGISTRY)  # settled


@pytest.mark.parametrize(
    "variant",
    [{"norm_axis": 2}, {"scale_len": 1}],
    ids=["norm-over-another-axis", "scale-not-one-head"],
)
def test_norm_declines_and_the_rotation_still_fuses(variant: dict) -> None:
    b = _graph(**variant)
    assert _run(b.graph)
    ops = [n.op_type for n in b.graph.nodes]
    assert "SimplifiedLayerNormalization" in ops and "ApplyRotaryPosEmb" in ops
    (rope,) = b.graph.nodes_of("ApplyRotaryPosEmb", "com.onyxia")
    assert len(rope.inputs) == 3


@pytest.mark.parametrize(
    "variant",
    [
        {"dtype": np.float16},
        {"split": 4},
        {"layout": "bnsh", "x_batch": 1, "cos_batch": "batch"},
    ],
    ids=["float16", "slices-are-not-the-halves", "cos-grows-the-output"],
)
def test_declines(variant: dict) -> None:
    graph = _load(_model(**variant))
    ShapeInferencePass().run(graph, REGISTRY)
    before = str(graph)
    assert not FuseRotateHalf().run(graph, REGISTRY)
    assert str(graph) == before


def test_declines_a_strided_slice() -> None:
    """x[..., 0::2] has the first half's shape but not its elements."""
    model = _model(layout="bnsh")
    (first,) = [n for n in model.graph.node if list(n.output) == ["q_1"]]
    first.input[2:] = ["end", "last", "two"]
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.array([2]), "two"))
    graph = _load(model)
    ShapeInferencePass().run(graph, REGISTRY)
    before = str(graph)
    assert not FuseRotateHalf().run(graph, REGISTRY)
    assert str(graph) == before


def test_partial_declines_when_the_pass_through_is_not_the_rest() -> None:
    """Concat(rope(x[..., :8]), x[..., 10:]): the rotation fuses, the partial fold does not."""
    model = _model(rotary=8)
    for node in model.graph.node:
        if list(node.output) == ["q_p"]:
            node.input[1] = "b10"
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.array([10]), "b10"))
    graph = _load(model)
    assert _run(graph)
    (rope,) = graph.nodes_of("ApplyRotaryPosEmb", "com.onyxia")
    assert "rotary_dim" not in rope.attributes and graph.nodes_of("Concat")


def _initializer(model: onnx.ModelProto, name: str) -> onnx.TensorProto:
    found = [i for i in model.graph.initializer if i.name == name]
    assert found, f"model '{model.graph.name}': no initializer '{name}'"
    return found[0]


def _load(model: onnx.ModelProto) -> IrGraph:
    import tempfile
    from pathlib import Path

    from onyxia.onnx import load_and_parse_model

    with tempfile.TemporaryDirectory() as tmp:
        onnx.save_model(model, Path(tmp, "model.onnx"))
        return load_and_parse_model(Path(tmp, "model.onnx"))


# ----- the op: folding and shape errors -------------------------------------------------------------
def test_constant_inputs_fold_as_the_plain_graph() -> None:
    model = _model(norm="after", rotary=8)
    feeds = _feeds(model, 2, 3)
    (expected,) = reference_outputs(model, feeds, "ort")
    b = GraphBuilder("folded", opsets={"": 21, "com.onyxia": 1})
    x = b.constant(feeds["proj"].reshape(2, 3, HEADS, HEAD))
    cos, sin = (b.constant(feeds[n][:, None]) for n in ("cos", "sin"))
    scale = b.constant(onnx.numpy_helper.to_array(_initializer(model, "scale")))
    attrs = {"transpose_input": 1, "rotary_dim": 8, "epsilon": 1e-6}
    y = b.op("ApplyRotaryPosEmb", x, cos, sin, scale, _domain="com.onyxia", **attrs)
    b.output(y)
    ShapeInferencePass().run(b.graph, REGISTRY)
    folded = b.graph.tensor(y).value
    assert folded is not None, "ApplyRotaryPosEmb with constant inputs did not fold"
    np.testing.assert_allclose(folded, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("x_dims", "cos_dims", "attrs", "message"),
    [
        ([2, 4, 3], [1, 3, 16], {}, r"input 0 \(x\) has shape \[2,4,3\]; expected \[B, N, S, H\]"),
        ([2, 4, 3, 16], [1, 1, 5, 16], {}, r"input 1 \(cos\) has shape \[1,1,5,16\]; expected it to broadcast"),
        ([2, 4, 3, 16], [1, 1, 3, 16], {"rotary_dim": 7}, r"attribute rotary_dim=7; expected an even number"),
    ],
    ids=["x-not-4d", "cos-does-not-broadcast", "odd-rotary-dim"],
)
def test_shape_errors_name_the_node(x_dims: list, cos_dims: list, attrs: dict, message: str) -> None:
    b = GraphBuilder("bad", opsets={"": 21, "com.onyxia": 1})
    x = b.input("x", DataType.FLOAT, x_dims)
    cos, sin = (b.input(n, DataType.FLOAT, cos_dims) for n in ("cos", "sin"))
    b.output(b.op("ApplyRotaryPosEmb", x, cos, sin, _domain="com.onyxia", _name="q_rope", **attrs))
    with pytest.raises(ShapeInferenceError, match=f"q_rope.*{message}"):
        ShapeInferencePass().run(b.graph, REGISTRY)
