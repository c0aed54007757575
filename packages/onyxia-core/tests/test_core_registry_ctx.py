from types import SimpleNamespace

import numpy as np
import pytest

from onyxia.core import (
    DataType,
    GraphBuilder,
    InferenceCtx,
    OnyxiaError,
    OperatorRegistry,
    PlanBuilder,
    PlanCtx,
    PlanningError,
    ShaderLibrary,
    ShapeInferenceError,
    SymbolicExpr,
)
from onyxia.core import registry as registry_module
from onyxia.core.shapes import Static


def test_register_chains_and_respects_opset_ranges() -> None:
    old, new = SimpleNamespace(name="old"), SimpleNamespace(name="new")
    reg = OperatorRegistry().register("Softmax", old, until=12).register("Softmax", new, since=13)
    assert reg.get("", "Softmax", 11) is old
    assert reg.get("ai.onnx", "Softmax", 13) is new
    assert reg.get("", "Nope", 13) is None
    assert ("", "Softmax") in reg


def test_discover_calls_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    ep = SimpleNamespace(name="demo", value="demo:register", load=lambda: lambda r: calls.append(r))
    monkeypatch.setattr(registry_module, "entry_points", lambda group: [ep])
    reg = OperatorRegistry().discover().discover()
    assert calls == [reg] and reg.plugins == ["demo"]


def test_broken_plugin_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(_: object) -> None:
        raise RuntimeError("bad")

    ep = SimpleNamespace(name="broken", value="x:y", load=lambda: boom)
    monkeypatch.setattr(registry_module, "entry_points", lambda group: [ep])
    with pytest.raises(OnyxiaError, match="plugin 'broken'.*bad"):
        OperatorRegistry().discover()


def _node_ctx(dims_a: list, dims_b: list) -> InferenceCtx:
    b = GraphBuilder()
    x = b.input("x", DataType.FLOAT, dims_a)
    y = b.input("y", DataType.FLOAT, dims_b)
    b.op("Add", x, y, _name="layers.0/Add", alpha=2)
    return InferenceCtx(b.graph, b.graph.nodes[0])


def test_broadcast_and_attrs() -> None:
    ctx = _node_ctx([2, 1, 4], [3, 1])
    assert ctx.broadcast(ctx.input_dims(0), ctx.input_dims(1)) == Static((2, 3, 4))
    assert ctx.attr_int("alpha") == 2 and ctx.attr_float("beta", 0.5) == 0.5
    assert ctx.normalize_axis(-1, 3) == 2
    with pytest.raises(ShapeInferenceError, match="required attribute 'gamma'"):
        ctx.attr_int("gamma")


def test_broadcast_error_names_node_and_inputs() -> None:
    ctx = _node_ctx([2, 3], [4])
    with pytest.raises(ShapeInferenceError, match=r"node 'layers.0/Add' \(Add, domain ai.onnx\).*0: f32\[2,3\]"):
        ctx.broadcast(ctx.input_dims(0), ctx.input_dims(1))


def test_symbolic_broadcast_records_constraint() -> None:
    ctx = _node_ctx(["seq", 4], ["total", 4])
    shape = ctx.broadcast(ctx.input_dims(0), ctx.input_dims(1))
    assert str(shape) == "[seq,4]"
    assert ctx.graph.constraints[0][:2] == (SymbolicExpr.name("seq"), SymbolicExpr.name("total"))


def _plan_ctx() -> PlanCtx:
    b = GraphBuilder()
    x = b.input("x", DataType.INT64, ["seq"])
    big = b.initializer("big", np.array([2**40], dtype=np.int64))
    b.op("Add", x, big)
    builder = PlanBuilder(b.graph, ShaderLibrary())
    return PlanCtx(builder, b.graph.nodes[0])


def test_static_dims_become_defs_symbolic_become_immediates() -> None:
    ctx = _plan_ctx()
    seq = SymbolicExpr.name("seq")
    h1 = ctx.compile_shader("s", "fn main() { let a = #{N}; let b = #{M}; }", {}, {"N": 4, "M": seq * 2})
    h2 = ctx.compile_shader("s", "fn main() { let a = #{N}; let b = #{M}; }", {}, {"N": 4, "M": seq})
    shader = ctx.builder.shaders[h1.index]
    assert h1.index == h2.index and len(ctx.builder.shaders) == 1  # deduplicated by label + defs
    assert "let a = 4u; let b = imm.M;" in shader.source and shader.immediate_size == 4
    assert [f.value for f in h1.immediates] == [seq * 2] and [f.value for f in h2.immediates] == [seq]


def test_immediates_limit_and_int64_range() -> None:
    ctx = _plan_ctx()
    dims = {f"D{i}": SymbolicExpr.name(f"s{i}") for i in range(65)}
    with pytest.raises(PlanningError, match="exceed 256 B"):
        ctx.compile_shader("t", "", {}, dims)
    with pytest.raises(PlanningError, match="tensor 'big': int64 value range"):
        ctx.input(1)
