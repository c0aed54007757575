"""Small multi-node ONNX models for the fusion-pass tests, and `check_fused`: a fused plan against onnxruntime
and, bit for bit, against the plan compiled with the fusing passes left out."""

from __future__ import annotations

import tempfile
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper
from oracle import EXACT_ON_CPU, assert_close, compile_model, reference_outputs, runtime

__all__ = ["check_fused", "graph_model", "ops_of", "plan_without"]


def graph_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Mapping[str, tuple[np.dtype | type, Sequence[int | str]]],
    initializers: Mapping[str, np.ndarray],
    outputs: Sequence[str],
) -> onnx.ModelProto:
    """`nodes` over graph `inputs` (name -> (dtype, dims)) and `initializers`; opsets ai.onnx 21 and
    com.microsoft 1."""
    graph = helper.make_graph(
        list(nodes),
        "fusion_test",
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.dtype(t)), list(d))
            for n, (t, d) in inputs.items()
        ],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(v, n) for n, v in initializers.items()],
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def plan_without(model: onnx.ModelProto, passes: Collection[str], dims: Mapping[str, int] | None = None) -> Any:
    """The compiled plan of `model` with the named default passes left out."""
    from onyxia.compiler import CompilerPipeline
    from onyxia.onnx import load_and_parse_model
    from onyxia.operators import core_operator_registry

    registry = core_operator_registry()
    registry.passes = [p for p in registry.passes if p.name not in passes]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "model.onnx")
        onnx.save_model(model, path)
        graph = load_and_parse_model(path)
    return CompilerPipeline(registry).compile(graph, dict(dims or {}))


def check_fused(
    model: onnx.ModelProto,
    feeds_list: Sequence[Mapping[str, np.ndarray]],
    passes: Collection[str],
    tolerance: tuple[float, float] | None = None,
) -> None:
    """Each feed through one (symbolic) plan: against onnxruntime within `tolerance`, and bit for bit equal
    to the plan without `passes` where float operations round as written (`EXACT_ON_CPU`): a fusion keeps in
    registers a product the unfused plan stores, which a GPU's compiler may then contract with the next add."""
    fused = runtime().load_model(compile_model(model))
    unfused = runtime().load_model(plan_without(model, passes))
    for feeds in feeds_list:
        got, plain = fused.run(dict(feeds)), unfused.run(dict(feeds))
        for output, expected in zip(model.graph.output, reference_outputs(model, feeds, "ort")):
            assert_close(got[output.name], expected, output.name, tolerance=tolerance)
            assert_close(
                got[output.name], plain[output.name], f"{output.name} (fused vs unfused)", tolerance=EXACT_ON_CPU
            )


def ops_of(compiled: Any) -> list[str]:
    return [op.op_type for op in compiled.operations]
