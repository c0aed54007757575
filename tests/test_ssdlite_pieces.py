"""torchvision SSDlite (tests/data/real_models/ssdlite_mobilenet_v3.onnx) in pieces, around its one If.

The exported graph ends in ``If(boxes are empty)``: a then-branch that is one Constant, and an
else-branch that is torchvision's batched NMS (offset the boxes per label, NonMaxSuppression, keep
the indices). These tests run everything except the If itself, against onnxruntime on the same inputs:

- `test_main_graph_up_to_the_if`: the image through the backbone, the heads, the per-class score
  filters (NonZero, GatherND), TopK with k = min(300, count) computed on the GPU, up to the If's
  condition and the three tensors the else-branch reads from the outer scope;
- `test_else_branch`: that branch as a model of its own, fed what onnxruntime computed for those
  tensors (so its NonMaxSuppression sees exactly onnxruntime's inputs, and must agree exactly);
- `test_whole_model_with_the_else_branch_inlined`: the file with the If replaced by its else-branch
  (what the If runs for any image with a detection), image to detections.

With the seeded random weights most scores are near-equal (0.2679...: 754 distinct values among
840), and onnxruntime's own recorded outputs differ from what it computes on this machine in the
order of such ties. So scores and labels are compared in order, and boxes as the same detections
within each run of scores equal to 1e-6 (onnxruntime here and its record agree under that rule).
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
SCORE_TOL = 1e-6  # scores: |onyxia - ort| within this, and runs of ties are cut at this gap
BOX_TOL = 1e-3  # box coordinates are pixels (0..160): decoded in another order of float operations


def _if_node(model: onnx.ModelProto) -> onnx.NodeProto:
    (node,) = [n for n in model.graph.node if n.op_type == "If"]
    return node


def _else_branch(model: onnx.ModelProto) -> onnx.GraphProto:
    return next(a.g for a in _if_node(model).attribute if a.name == "else_branch")


@pytest.fixture(scope="module")
def pieces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three models, written once: the main graph up to the If, the else-branch, and the inlined file."""
    folder = tmp_path_factory.mktemp("ssdlite")
    model = onnx.load(MODEL)
    extractor = onnx.utils.Extractor(onnx.shape_inference.infer_shapes(model))
    main = extractor.extract_model(["image"], [CONDITION, *CAPTURED])
    onnx.save(main, folder / "main.onnx")
    onnx.save(_branch_model(model), folder / "else.onnx")
    onnx.save(_inlined(model), folder / "inlined.onnx")
    return {"main": folder / "main.onnx", "else": folder / "else.onnx", "inlined": folder / "inlined.onnx"}


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


def _inlined(model: onnx.ModelProto) -> onnx.ModelProto:
    """The file with its If replaced by the else-branch's nodes (the branch output renamed to the If's)."""
    inlined = onnx.ModelProto()
    inlined.CopyFrom(model)
    node = _if_node(inlined)
    at = list(inlined.graph.node).index(node)
    branch = []
    for n in _else_branch(inlined).node:
        copy = onnx.NodeProto()
        copy.CopyFrom(n)
        copy.output[:] = [node.output[0] if o == "keep" else o for o in n.output]
        branch.append(copy)
    nodes = list(inlined.graph.node)
    del inlined.graph.node[:]
    inlined.graph.node.extend(nodes[:at] + branch + nodes[at + 1 :])
    return inlined


def _onyxia(runtime: Any, path: Path, feeds: Mapping[str, np.ndarray], readbacks: int) -> dict[str, np.ndarray]:
    compiled = compile_model(onnx.load(path), {"height": 120, "width": 160} if "image" in feeds else {"n": 900})
    reads = sum(isinstance(s, ReadValues) for op in compiled.operations for s in op.steps)
    assert reads == readbacks, f"{path.name}: {reads} values read back mid-run"
    outputs: dict[str, np.ndarray] = runtime.load_model(compiled).run(dict(feeds))
    return outputs


def _same_detections(got: Mapping[str, np.ndarray], ref: Mapping[str, np.ndarray], names: tuple[str, str, str]) -> None:
    """Scores within SCORE_TOL in order, labels equal, and within each run of scores closer than
    SCORE_TOL, the same (label, box) detections in some order."""
    boxes, scores, labels = names
    assert got[boxes].shape == ref[boxes].shape, f"{boxes}: {got[boxes].shape} != {ref[boxes].shape}"
    np.testing.assert_allclose(got[scores], ref[scores], rtol=0, atol=SCORE_TOL, err_msg=scores)
    ref_scores = ref[scores]
    gaps = np.flatnonzero(np.abs(np.diff(ref_scores)) > SCORE_TOL) + 1
    for start, stop in zip([0, *gaps], [*gaps, len(ref_scores)]):
        free = list(range(start, stop))
        for i in range(start, stop):
            match = [
                j
                for j in free
                if got[labels][i] == ref[labels][j] and np.allclose(got[boxes][i], ref[boxes][j], rtol=0, atol=BOX_TOL)
            ]
            assert match, (
                f"detection {i} (label {got[labels][i]}, box {got[boxes][i]}) is not in onnxruntime's run {start}:{stop}"
            )
            free.remove(match[0])


def _image() -> dict[str, np.ndarray]:
    inputs, _ = read_record("ssdlite_mobilenet_v3")
    return inputs


def test_main_graph_up_to_the_if(runtime: Any, ort_run: Any, pieces: dict[str, Path]) -> None:
    """Three NonZero counts and three TopK ks (min(300, count), computed on the GPU) read back."""
    feeds = _image()
    ref = ort_run(pieces["main"], feeds)
    got = _onyxia(runtime, pieces["main"], feeds, readbacks=6)
    assert got[CONDITION].dtype == np.bool_ and got[CONDITION] == ref[CONDITION]
    np.testing.assert_array_equal(got[CAPTURED[2]], ref[CAPTURED[2]], err_msg="labels")
    _same_detections(got, ref, CAPTURED)


def test_else_branch(runtime: Any, ort_run: Any, pieces: dict[str, Path]) -> None:
    """Batched NMS (one batch, one class, 900 boxes offset per label) on onnxruntime's own inputs:
    the kept indices must be onnxruntime's exactly, in its order."""
    feeds = {k: v for k, v in ort_run(pieces["main"], _image()).items() if k in CAPTURED}
    (expected,) = ort_run(pieces["else"], feeds).values()
    got = _onyxia(runtime, pieces["else"], feeds, readbacks=1)
    assert got["keep"].dtype == expected.dtype
    np.testing.assert_array_equal(got["keep"], expected)


def test_whole_model_with_the_else_branch_inlined(runtime: Any, ort_run: Any, pieces: dict[str, Path]) -> None:
    feeds = _image()
    ref = ort_run(pieces["inlined"], feeds)
    got = _onyxia(runtime, pieces["inlined"], feeds, readbacks=7)
    np.testing.assert_array_equal(got["labels"], ref["labels"], err_msg="labels")
    _same_detections(got, ref, ("boxes", "scores", "labels"))
    _, recorded = read_record("ssdlite_mobilenet_v3")
    _same_detections(got, recorded, ("boxes", "scores", "labels"))
