"""torchvision SSDlite's batched-NMS branch on its own, fed exactly what onnxruntime computes.

The exported graph ends in ``If(boxes are empty)``: a then-branch that is one Constant, and an
else-branch that is torchvision's batched NMS (offset the boxes per label, NonMaxSuppression, keep
the indices). The whole file runs in the real-model suite (`test_e2e_real_models.py`), where the
near-tied scores of its random weights let the NMS see inputs a few ulps from onnxruntime's; here
the branch gets onnxruntime's own inputs, so its kept indices must be onnxruntime's exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from oracle import compile_model
from real_model_suite import DATA, read_record

from onyxia.core.plan import ReadValues

MODEL = DATA / "ssdlite_mobilenet_v3.onnx"
CONDITION = "onnx::If_1826"
CAPTURED = ("/ssd/Concat_6_output_0", "/ssd/Concat_7_output_0", "/ssd/Concat_8_output_0")  # boxes, scores, labels


def _if_node(model: onnx.ModelProto) -> onnx.NodeProto:
    (node,) = [n for n in model.graph.node if n.op_type == "If"]
    return node


def _else_branch(model: onnx.ModelProto) -> onnx.GraphProto:
    return next(a.g for a in _if_node(model).attribute if a.name == "else_branch")


@pytest.fixture(scope="module")
def pieces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The main graph up to the If (run in onnxruntime only) and the else-branch as a model, written once."""
    folder = tmp_path_factory.mktemp("ssdlite")
    model = onnx.load(MODEL)
    extractor = onnx.utils.Extractor(onnx.shape_inference.infer_shapes(model))
    main = extractor.extract_model(["image"], [CONDITION, *CAPTURED])
    onnx.save(main, folder / "main.onnx")
    onnx.save(_branch_model(model), folder / "else.onnx")
    return {"main": folder / "main.onnx", "else": folder / "else.onnx"}


def _branch_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """The else-branch as a model: the tensors it reads from the main graph become graph inputs, the
    main graph's Constants it reads become initializers."""
    branch = _else_branch(model)
    constants = {
        n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in model.graph.node if n.op_type == "Constant"
    }
    produced = {o for n in branch.node for o in n.output}
    outer = sorted({i for n in branch.node for i in n.input if i and i not in produced})
    inputs = [n for n in outer if n not in constants]
    assert sorted(inputs) == sorted(CAPTURED), f"the else-branch reads {inputs} from the main graph"
    elem = {
        CAPTURED[0]: onnx.TensorProto.FLOAT,
        CAPTURED[1]: onnx.TensorProto.FLOAT,
        CAPTURED[2]: onnx.TensorProto.INT64,
    }
    dims: dict[str, list[str | int | None]] = {CAPTURED[0]: ["n", 4], CAPTURED[1]: ["n"], CAPTURED[2]: ["n"]}
    graph = helper.make_graph(
        list(branch.node),
        "ssdlite_else_branch",
        [helper.make_tensor_value_info(n, elem[n], dims[n]) for n in inputs],
        list(branch.output),
        [numpy_helper.from_array(constants[n], n) for n in outer if n in constants],
    )
    return helper.make_model(graph, opset_imports=model.opset_import, ir_version=model.ir_version)


def _onyxia(runtime: Any, path: Path, feeds: Mapping[str, np.ndarray], readbacks: int) -> dict[str, np.ndarray]:
    compiled = compile_model(onnx.load(path), {"height": 120, "width": 160} if "image" in feeds else {"n": 900})
    reads = sum(isinstance(s, ReadValues) for op in compiled.operations for s in op.steps)
    assert reads == readbacks, f"{path.name}: {reads} values read back mid-run"
    outputs: dict[str, np.ndarray] = runtime.load_model(compiled).run(dict(feeds))
    return outputs


def _image() -> dict[str, np.ndarray]:
    inputs, _ = read_record("ssdlite_mobilenet_v3")
    return inputs


def test_else_branch(runtime: Any, ort_run: Any, pieces: dict[str, Path]) -> None:
    """Batched NMS (one batch, one class, 900 boxes offset per label) on onnxruntime's own inputs:
    the kept indices must be onnxruntime's exactly, in its order."""
    feeds = {k: v for k, v in ort_run(pieces["main"], _image()).items() if k in CAPTURED}
    (expected,) = ort_run(pieces["else"], feeds).values()
    got = _onyxia(runtime, pieces["else"], feeds, readbacks=1)
    assert got["keep"].dtype == expected.dtype
    np.testing.assert_array_equal(got["keep"], expected)
