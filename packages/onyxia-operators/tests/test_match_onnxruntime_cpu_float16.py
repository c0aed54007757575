"""MatchOnnxruntimeCpuFloat16: the graph before and after, the declined cases (graph unchanged, False), the
same Casts as onnxruntime's own saved graph (one-node models, the Gemma 3 fixtures), outputs equal to
onnxruntime's where plain float16 differs, and the kernel tables re-derived from this onnxruntime."""

from __future__ import annotations

import collections
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from oracle import check_model, onyxia_outputs, reference_outputs
from ort_float16_kernels import SPECS, derive_ort_f16_kernels, optimized_model, spec_model

import onyxia.operators
from onyxia.compiler import ShapeInferencePass
from onyxia.core import DataType, GraphBuilder, IrGraph, OperatorRegistry, SymbolicDim
from onyxia.onnx import load_and_parse_model, to_onnx
from onyxia.operators import core_operator_registry
from onyxia.operators.passes import MatchOnnxruntimeCpuFloat16
from onyxia.operators.passes import match_onnxruntime_cpu_float16 as module
from onyxia.operators.passes._onnx_function_bodies import FUNCTION_BODIES

REGISTRY = core_operator_registry()
RNG = np.random.default_rng(7)
F16, F32 = DataType.FLOAT16, DataType.FLOAT
FIXTURES = Path(__file__).parent / "data" / "gemma3-tiny"
# a float16 ulp (2**-10 relative), and an absolute slack where Gelu's 1 + tanh(x) cancels for x << 0
ULP = (1e-3, 1e-6)


@pytest.fixture
def matching(monkeypatch: pytest.MonkeyPatch) -> None:
    """oracle's Onyxia side compiles with the pass (it asks `core_operator_registry` once per model)."""

    def registry(**kwargs: bool) -> OperatorRegistry:
        registry = core_operator_registry(**kwargs)
        registry.passes.append(MatchOnnxruntimeCpuFloat16())
        return registry

    monkeypatch.setattr(onyxia.operators, "core_operator_registry", registry)


def _inferred(b: GraphBuilder) -> IrGraph:
    ShapeInferencePass().run(b.graph, REGISTRY)
    return b.graph


def _block() -> GraphBuilder:
    """Gemma's residual step in small: a float32 norm rounded to float16 by the model, a float16 Add, Gelu, Mul."""
    b = GraphBuilder("block")
    x, r = b.input("x", F16, ["seq", 4]), b.input("r", F16, ["seq", 4])
    h = b.op("Cast", x, to=int(F32))
    norm16 = b.op("Cast", b.op("Mul", h, h), to=int(F16))
    b.output(b.op("Mul", b.op("Gelu", b.op("Add", r, norm16), approximate="tanh"), r))
    return b


def test_gemma_block_runs_in_float32_where_onnxruntime_does() -> None:
    graph = _inferred(_block())
    assert str(graph) == textwrap.dedent("""\
        graph block(
          %0:f16[seq,4]  # x
          %1:f16[seq,4]  # r
        ) {
          %2:f32[seq,4] = Cast(%0, to=1)  # Cast
          %4:f32[seq,4] = Mul(%2, %2)  # Mul
          %6:f16[seq,4] = Cast(%4, to=10)  # Cast_1
          %8:f16[seq,4] = Add(%1, %6)  # Add
          %10:f16[seq,4] = Gelu(%8, approximate='tanh')  # Gelu
          %12:f16[seq,4] = Mul(%10, %1)  # Mul_1
          return %12
        }""")
    assert MatchOnnxruntimeCpuFloat16().run(graph, REGISTRY)
    # Gelu is its function body in float32 (%14 ... %34 are float32 constants); the model's Cast pair around
    # the norm is gone, so Add reads the unrounded norm; r is cast once for both its readers
    assert str(graph) == textwrap.dedent("""\
        graph block(
          %0:f16[seq,4]  # x
          %1:f16[seq,4]  # r
        ) {
          %2:f32[seq,4] = Cast(%0, to=1)  # Cast
          %4:f32[seq,4] = Mul(%2, %2)  # Mul
          %46:f32[seq,4] = Cast(%1, to=1)  # InsertedPrecisionFreeCast_r
          %50:f32[seq,4] = Add(%46, %4)  # Add
          %57:f32[seq,4] = Mul(%14, %50)  # Gelu/Mul
          %62:f32[seq,4] = Pow(%50, %22)  # Gelu/Pow
          %69:f32[seq,4] = Mul(%27, %62)  # Gelu/Mul_1
          %74:f32[seq,4] = Sum(%50, %69)  # Gelu/Sum
          %79:f32[] = Sqrt(%34)  # Gelu/Sqrt
          %86:f32[seq,4] = Mul(%79, %74)  # Gelu/Mul_2
          %91:f32[seq,4] = Tanh(%86)  # Gelu/Tanh
          %98:f32[seq,4] = Sum(%17, %91)  # Gelu/Sum_1
          %105:f32[seq,4] = Mul(%57, %98)  # Gelu
          %110:f32[seq,4] = Mul(%105, %46)  # Mul_1
          %12:f16[seq,4] = Cast(%110, to=10)  # InsertedPrecisionFreeCast_Mul_out0_1
          return %12
        }""")
    assert [_initializer(graph, t).item() for t in (14, 17, 22, 27, 34)] == [
        0.5,
        1.0,
        3.0,
        *np.array([0.044715, 2 / np.pi], np.float32),
    ]
    graph.check()
    assert not MatchOnnxruntimeCpuFloat16().run(graph, REGISTRY)  # settled
    assert _casts(graph) == _casts(optimized_model(to_onnx(_inferred(_block()))))


def _initializer(graph: IrGraph, t: int) -> np.ndarray:
    initializer = graph.tensor(t).initializer
    assert initializer is not None, f"tensor %{t}: expected an initializer, found none"
    return initializer.numpy()


def _casts(graph: IrGraph | onnx.ModelProto) -> list[tuple[str, int]]:
    """(name, to) of every Cast but the function bodies' constant ones (onnxruntime's are unnamed)."""
    if isinstance(graph, onnx.ModelProto):
        return sorted((n.name, n.attribute[-1].i) for n in graph.graph.node if n.op_type == "Cast" and n.name)
    nodes = [n for n in graph.nodes if n.op_type == "Cast" and not n.name.endswith("/CastLike")]
    return sorted((n.name, n.attributes["to"]) for n in nodes)


def test_a_float16_kernel_alone_between_float32_nodes_joins_them() -> None:
    """ForceSingleNodeCPUFloat16ToFloat32: Reshape has a float16 kernel, but Casts around it would cost more."""
    b = GraphBuilder("isolated")
    x = b.input("x", F16, [2, 6])
    shape = b.initializer("shape", np.array([3, 4], np.int64))
    b.output(b.op("Neg", b.op("Reshape", b.op("Abs", x), shape)))
    graph = _inferred(b)
    assert MatchOnnxruntimeCpuFloat16().run(graph, REGISTRY)
    assert str(graph) == textwrap.dedent("""\
        graph isolated(
          %0:f16[2,6]  # x
        ) {
          %8:f32[2,6] = Cast(%0, to=1)  # InsertedPrecisionFreeCast_x
          %10:f32[2,6] = Abs(%8)  # Abs
          %15:f32[3,4] = Reshape(%10, %1)  # Reshape
          %20:f32[3,4] = Neg(%15)  # Neg
          %6:f16[3,4] = Cast(%20, to=10)  # InsertedPrecisionFreeCast_Neg_out0
          return %6
        }""")
    assert _casts(graph) == _casts(optimized_model(to_onnx(_inferred(b))))


def _all_float32() -> GraphBuilder:
    b = GraphBuilder("f32")
    x = b.input("x", F32, ["seq", 4])
    b.output(b.op("Gelu", b.op("Add", x, x)))
    return b


def _float16_kernels_only() -> GraphBuilder:
    b = GraphBuilder("f16_kernels")
    x = b.input("x", F16, [2, 3])
    b.output(b.op("Reshape", b.op("Transpose", x, perm=[1, 0]), b.initializer("shape", np.array([6], np.int64))))
    return b


def _model_round_trip(first: DataType, second: DataType) -> GraphBuilder:
    b = GraphBuilder("round_trip")
    x = b.input("x", second, [2, 3])
    b.output(b.op("Transpose", b.op("Cast", b.op("Cast", x, to=int(first)), to=int(second)), perm=[1, 0]))
    return b


@pytest.mark.parametrize(
    "build",
    [_all_float32, _float16_kernels_only, lambda: _model_round_trip(F16, F32)],
    ids=["float32", "float16-kernels-only", "model-f32-f16-f32"],
)
def test_declines_graphs_onnxruntime_runs_as_they_are(build: Callable[[], GraphBuilder]) -> None:
    """No float16 at all; float16 only on ops with a float16 kernel; the model's own f32 -> f16 -> f32 Casts
    (a real rounding: only a Cast onnxruntime inserted may stand in for a narrowing one)."""
    graph = _inferred(build())
    before = str(graph)
    assert not MatchOnnxruntimeCpuFloat16().run(graph, REGISTRY)
    assert str(graph) == before
    assert _casts(graph) == _casts(optimized_model(to_onnx(_inferred(build()))))


def test_removes_the_models_exact_round_trip() -> None:
    """f16 -> f32 -> f16 loses nothing: onnxruntime drops such a pair even where it inserts no Cast."""
    graph = _inferred(_model_round_trip(F32, F16))
    assert MatchOnnxruntimeCpuFloat16().run(graph, REGISTRY)
    assert [n.op_type for n in graph.nodes] == ["Transpose"]
    assert _casts(optimized_model(to_onnx(_inferred(_model_round_trip(F32, F16))))) == []


def test_a_graph_output_keeps_its_casts() -> None:
    """Add's float16 sum is a graph output, and so is the model's float32 Cast of it: both Casts stay,
    though they undo each other; Exp reads the float32 sum directly (that model Cast is removed)."""
    b = GraphBuilder("outputs")
    x = b.input("x", F16, [4])
    y = b.op("Add", x, x)
    b.output(y, b.op("Cast", y, to=int(F32)), b.op("Exp", b.op("Cast", y, to=int(F32))))
    graph = _inferred(b)
    assert MatchOnnxruntimeCpuFloat16().run(graph, REGISTRY)
    assert [graph.tensor(t).dtype for t in graph.outputs] == [F16, F32, F32]
    assert _casts(graph) == _casts(optimized_model(to_onnx(_inferred(b))))
    assert [name for name, _ in _casts(graph)] == [
        "Cast",
        "InsertedPrecisionFreeCast_Add_out0",
        "InsertedPrecisionFreeCast_x",
    ]


def _adds() -> GraphBuilder:
    b = GraphBuilder("adds")
    a, c, d = (b.input(name, F16, ["seq", 64]) for name in "acd")
    b.output(b.op("Add", b.op("Add", a, c), d))
    return b


def _feeds(graph: IrGraph, seq: int, scale: float) -> dict[str, np.ndarray]:
    shapes = {graph.tensor(t).name: (seq, _static(graph.tensor(t).dims[1])) for t in graph.inputs}
    return {name: (RNG.standard_normal(shape) * scale).astype(np.float16) for name, shape in shapes.items()}


def _static(dim: SymbolicDim) -> int:
    assert isinstance(dim, int), f"expected a static dim, found {dim}"
    return dim


@pytest.mark.parametrize("build", [_adds, _block], ids=["adds", "block"])
def test_outputs_equal_onnxruntime_bitwise(build: Callable[[], GraphBuilder], matching: None) -> None:
    """onnxruntime sums and multiplies in float32 and rounds once; plain float16 rounds every step."""
    graph = _inferred(build())
    model, feeds = to_onnx(graph), _feeds(graph, 16, 1.0 if build is _block else 20.0)
    check_model(model, feeds, dims={"seq": 16}, tolerance=(0.0, 0.0))
    with pytest.MonkeyPatch.context() as unpatched:
        unpatched.setattr(onyxia.operators, "core_operator_registry", core_operator_registry)
        plain = onyxia_outputs(model, feeds, {"seq": 16})[0]
    assert not np.array_equal(plain, reference_outputs(model, feeds, "ort")[0])  # what the pass fixes


INLINED = sorted(op for op in SPECS if op[1] in FUNCTION_BODIES and op[1] != "Gelu")  # Gelu: both variants below


@pytest.mark.parametrize("op", INLINED, ids=[op for _, op in INLINED])
def test_function_bodies_are_onnxruntimes(op: tuple[str, str], matching: None) -> None:
    """Inlined as onnxruntime inlines them: the same ops and Casts, outputs within a float16 ulp (Tanh, Erf
    and Pow are Onyxia's own float32 math, not onnxruntime's MLAS)."""
    model = spec_model(*op)
    expected = optimized_model(model)
    graph = _loaded(model)
    assert MatchOnnxruntimeCpuFloat16().run(graph, REGISTRY)
    assert _op_counts(graph) == _op_counts(expected)
    feeds = {
        i.name: (RNG.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]) * 3)
        for i in model.graph.input
    }
    feeds = {k: v.astype(onnx.helper.tensor_dtype_to_np_dtype(_elem(model, k))) for k, v in feeds.items()}
    check_model(model, feeds, tolerance=ULP)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_variants_within_a_float16_ulp(approximate: str, matching: None) -> None:
    model = spec_model("", "Gelu")
    model.graph.node[0].attribute.append(onnx.helper.make_attribute("approximate", approximate))
    graph = _loaded(model)
    assert MatchOnnxruntimeCpuFloat16().run(graph, REGISTRY)
    assert _op_counts(graph) == _op_counts(optimized_model(model))
    x = (RNG.standard_normal((2, 3)) * 3).astype(np.float16)
    check_model(model, {"x": x}, tolerance=ULP)


def _elem(model: onnx.ModelProto, name: str) -> int:
    return next(i.type.tensor_type.elem_type for i in model.graph.input if i.name == name)


def _loaded(model: onnx.ModelProto) -> IrGraph:
    with tempfile.TemporaryDirectory() as tmp:
        onnx.save_model(model, Path(tmp, "model.onnx"))
        graph = load_and_parse_model(Path(tmp, "model.onnx"))
    ShapeInferencePass().run(graph, REGISTRY)
    return graph


def _op_counts(graph: IrGraph | onnx.ModelProto) -> collections.Counter[str]:
    nodes = graph.graph.node if isinstance(graph, onnx.ModelProto) else graph.nodes
    return collections.Counter(n.op_type for n in nodes if n.op_type != "Constant")


@pytest.mark.parametrize("precision", ["fp16", "q4f16"])
def test_gemma_fixture_casts_match_onnxruntime(precision: str) -> None:
    """The exported Gemma 3: the same Casts (inserted, and the model's that survive) and the same wrapped nodes."""
    path = FIXTURES / f"model_{precision}.onnx"
    expected = optimized_model(onnx.load(path))
    graph = load_and_parse_model(path)
    ShapeInferencePass().run(graph, REGISTRY)
    assert MatchOnnxruntimeCpuFloat16().run(graph, REGISTRY)
    assert _casts(graph) == _casts(expected)
    assert _wrapped(graph) == _wrapped(expected)


def _wrapped(graph: IrGraph | onnx.ModelProto) -> list[str]:
    """Named non-Cast nodes writing a float32 twin (onnxruntime renames a wrapped node's float16 outputs)."""
    if isinstance(graph, onnx.ModelProto):
        nodes = [(n.name, n.op_type, list(n.output)) for n in graph.graph.node]
    else:
        nodes = [(n.name, n.op_type, [graph.tensor(t).name for t in n.outputs if t is not None]) for n in graph.nodes]
    return sorted(
        name
        for name, op, outs in nodes
        if op != "Cast" and "/Gelu" not in name and any(o.startswith(module.INSERTED) for o in outs) and name
    )


def test_the_kernel_tables_match_this_onnxruntime() -> None:
    """Re-derive every op's float16 treatment (ort_float16_kernels.py); a newer onnxruntime that adds a float16
    kernel (or loses one) fails here, naming the op, until the pass's tables are updated."""
    derived = derive_ort_f16_kernels()
    by_kind = collections.defaultdict(set)
    for op, kind in derived.items():
        by_kind[kind].add(op)
    assert by_kind["float16"] == module._FLOAT16_KERNELS
    assert by_kind["float32"] == module._FLOAT32_ONLY
    assert by_kind["inlined"] == {("", op) for op in FUNCTION_BODIES}
    # before its function body existed, each inlined op ran whole in float32
    older = {op: FUNCTION_BODIES[op].since - 1 for op in ("Softmax", "LogSoftmax", "ReduceL1")}
    assert {op: _derive_at(op, opset) for op, opset in older.items()} == dict.fromkeys(older, "float32")


def _derive_at(op: str, opset: int) -> str:
    from ort_float16_kernels import classify

    model = spec_model("", op, opset)
    if op.startswith("Reduce"):  # axes was an attribute before opset 18
        node = model.graph.node[0]
        del node.input[1:]
        node.attribute.append(onnx.helper.make_attribute("axes", [1]))
        del model.graph.initializer[:]
    return classify(optimized_model(model), op)
