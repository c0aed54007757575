import subprocess
import sys

import numpy as np
import pytest

from onyxia.compiler import CompilerPipeline, PassError, PlanningPass, compile
from onyxia.core import (
    DataType,
    GraphBuilder,
    IrGraph,
    OperatorRegistry,
    ShapeInferenceError,
    Stage,
    Static,
    SymbolicExpr,
    UnsupportedOpError,
)
from onyxia.operators import core_operator_registry


@pytest.fixture(scope="module")
def registry() -> OperatorRegistry:
    return core_operator_registry()


def _add_graph() -> GraphBuilder:
    b = GraphBuilder()
    x = b.input("x", DataType.FLOAT, ["batch", 4])
    b.output(b.op("Add", x, b.initializer("w", np.ones(4, np.float32))))
    return b


class _Recorder:
    def __init__(self, name: str, stage: Stage, log: list[str], changes: int = 0) -> None:
        self.name, self.stage, self.log, self.changes = name, stage, log, changes

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        self.log.append(self.name)
        self.changes -= 1
        return self.changes >= 0


def test_passes_run_by_stage_then_registration_order(registry: OperatorRegistry) -> None:
    log: list[str] = []
    pipeline = CompilerPipeline(registry)
    pipeline.add_pass(_Recorder("opt_a", Stage.OPTIMIZATION, log, changes=1))
    pipeline.add_pass(_Recorder("resolve", Stage.RESOLUTION, log))
    pipeline.add_pass(_Recorder("opt_b", Stage.OPTIMIZATION, log))
    pipeline.compile(_add_graph().graph)
    # opt_a changed once, so the optimization stage ran a second round
    assert log == ["resolve", "opt_a", "opt_b", "opt_a", "opt_b"]


def test_pass_that_never_settles_is_named(registry: OperatorRegistry) -> None:
    pipeline = CompilerPipeline(registry).add_pass(_Recorder("restless", Stage.OPTIMIZATION, [], changes=10**6))
    with pytest.raises(PassError, match="restless"):
        pipeline.compile(_add_graph().graph)


def test_pass_failure_names_pass_and_history(registry: OperatorRegistry) -> None:
    class Broken:  # FOLDING: the error shows the last 8 passes, and OPTIMIZATION alone runs more than that
        name, stage = "Broken", Stage.FOLDING

        def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
            raise KeyError("x")

    with pytest.raises(PassError, match=r"pass Broken failed after \[.*ShapeInference.*\]: KeyError"):
        CompilerPipeline(registry).add_pass(Broken()).compile(_add_graph().graph)


def test_dims_resolve_and_rest_stays_symbolic(registry: OperatorRegistry) -> None:
    graph = _add_graph().graph
    static = compile(graph, registry, {"batch": 3})
    symbolic = compile(graph, registry)
    assert static.tensor_by_name("x").dims == (3, 4)
    assert symbolic.tensor_by_name("x").dims == (SymbolicExpr.name("batch"), 4)
    assert symbolic.symbolic_bindings and not static.symbolic_bindings
    assert symbolic.symbols == {"batch"}
    # the caller's graph is not touched by compiling
    assert graph.tensor_by_name("x").shape != Static((3, 4))


def test_all_unsupported_ops_reported_at_once(registry: OperatorRegistry) -> None:
    b = GraphBuilder()
    x = b.input("x", DataType.FLOAT, [4])
    y = b.op("Frobnicate", x, _name="f1")
    y = b.op("Frobnicate", y, _name="f2")
    y = b.op("Add", y, y)
    b.output(b.op("Zap", y, _domain="com.example", _name="z1"))
    with pytest.raises(UnsupportedOpError) as info:
        CompilerPipeline(registry).compile(b.graph)
    message = str(info.value)
    assert "2 unsupported op type(s), 3 node(s)" in message
    assert "ai.onnx::Frobnicate (opset 21): 2 node(s): f1, f2" in message
    assert "com.example::Zap (opset 0): 1 node(s): z1" in message


def test_shape_error_names_node_op_domain_and_shapes(registry: OperatorRegistry) -> None:
    b = GraphBuilder()
    x = b.input("x", DataType.FLOAT, [2, 3])
    b.output(b.op("Mul", x, b.input("y", DataType.FLOAT, [4]), _name="layers.0/Mul_3"))
    with pytest.raises(
        ShapeInferenceError, match=r"node 'layers.0/Mul_3' \(Mul, domain ai.onnx\).*f32\[2,3\]; 1: f32\[4\]"
    ):
        CompilerPipeline(registry).compile(b.graph)


def test_folded_nodes_emit_no_steps(registry: OperatorRegistry) -> None:
    b = GraphBuilder()
    x = b.input("x", DataType.FLOAT, [4])
    c = b.op("Mul", b.constant(np.full(4, 2, np.float32)), b.constant(np.full(4, 3, np.float32)))
    b.output(b.op("Add", x, b.op("Neg", c)))
    compiled = CompilerPipeline(registry).compile(b.graph)
    assert [op.op_type for op in compiled.operations] == ["Add"]
    weight = next(t for t in compiled.tensors.values() if t.role.value == "weight")
    np.testing.assert_array_equal(weight.data, np.full(4, -6, np.float32))


def test_compile_needs_no_gpu() -> None:
    # a fresh interpreter: other tests in this process may have imported the runtime
    script = (
        "import sys, numpy as np\n"
        "from onyxia.core import DataType, GraphBuilder\n"
        "from onyxia.compiler import compile\n"
        "from onyxia.operators import core_operator_registry\n"
        "b = GraphBuilder()\n"
        "b.output(b.op('Cos', b.input('x', DataType.FLOAT, ['n'])))\n"
        "assert compile(b.graph, core_operator_registry()).dispatch_count == 1\n"
        "assert 'wgpu' not in sys.modules and 'onyxia.runtime' not in sys.modules, sorted(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)


def test_registry_passes_run_by_default() -> None:
    log: list[str] = []
    registry = core_operator_registry()
    assert "FoldTransposeIntoMatMul" in [p.name for p in CompilerPipeline(registry).passes({})]
    registry.passes.append(_Recorder("from_registry", Stage.OPTIMIZATION, log))
    CompilerPipeline(registry).add_pass(_Recorder("added", Stage.OPTIMIZATION, log)).compile(_add_graph().graph)
    assert log == ["from_registry", "added"]


def test_planning_passes_settle_before_the_planner_runs_once(
    registry: OperatorRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PLANNING-stage pass (view aliasing) may need two rounds; planning the model is done once, after."""
    log: list[str] = []
    planned = PlanningPass.run

    def run(self: PlanningPass, graph: IrGraph, registry: OperatorRegistry) -> bool:
        log.append("Planning")
        return planned(self, graph, registry)

    monkeypatch.setattr(PlanningPass, "run", run)
    CompilerPipeline(registry).add_pass(_Recorder("plan_a", Stage.PLANNING, log, changes=1)).compile(_add_graph().graph)
    assert log == ["plan_a", "plan_a", "Planning"]


def test_default_passes_in_order() -> None:
    """Rewrites, then the DCE + CSE cleanup, then elementwise fusion last in OPTIMIZATION; view aliasing in
    PLANNING, after all rewrites."""
    passes = CompilerPipeline(core_operator_registry()).passes({})
    optimization = [p.name for p in passes if p.stage == Stage.OPTIMIZATION]
    assert optimization[-2] == "Cleanup", "rewrites go before the cleanup (CSE would give merged nodes two consumers)"
    assert optimization[-1] == "FuseElementwise", "fusion last: a duplicated chain merges before it fuses"
    assert "FoldTransposeIntoMatMul" in optimization
    assert [p.name for p in passes if p.stage == Stage.PLANNING] == ["BufferAliasing"]
