"""Which ONNX op inputs carry values that size outputs, and which set a kernel's structure.

ONNX lets any input be a tensor, but some inputs of some ops are read as numbers that decide the
output's shape (a Reshape target, Slice bounds) and others as numbers that decide what the kernel
is (an axis, the steps). Onyxia plans kernels at compile time, so the first kind may come at run
time as dim symbols (bound from a graph input on the host, or read back from the GPU) while the
second must be known when compiling. These tables say which is which for the default ONNX domain;
the compiler's `MarkValueInputsPass` and the operators' `InsertValueReadbacksPass` read them.
"""

from __future__ import annotations

import numpy as np

from onyxia.core.ir_graph import IrGraph
from onyxia.core.ir_records import IrNode
from onyxia.core.values import TensorValue

__all__ = ["PASSTHROUGH", "REDUCE_OPS", "STRUCTURAL_SLOTS", "VALUE_SLOTS", "passes_value", "slot_role"]

# (op, input index) -> what the input is, for the slots whose value becomes output dims
VALUE_SLOTS: dict[tuple[str, int], str] = {
    ("Reshape", 1): "shape",
    ("Expand", 1): "shape",
    ("ConstantOfShape", 0): "input",
    ("Tile", 1): "repeats",
    ("Slice", 1): "starts",
    ("Slice", 2): "ends",
    ("Range", 0): "start",
    ("Range", 1): "limit",
    ("OneHot", 1): "depth",
    **{(op, 0): "size" for op in ("HannWindow", "HammingWindow", "BlackmanWindow")},
}

_MEL_INPUTS = ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz")

REDUCE_OPS: tuple[str, ...] = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1")
REDUCE_OPS += ("ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")

# (op, input index) -> what the input is, for slots whose value shapes the kernel itself
STRUCTURAL_SLOTS: dict[tuple[str, int], str] = {
    ("Unsqueeze", 1): "axes",
    ("Squeeze", 1): "axes",
    ("Slice", 3): "axes",
    ("Slice", 4): "steps",
    ("Pad", 1): "pads",
    ("Pad", 3): "axes",
    ("Split", 1): "split",
    ("Range", 2): "delta",
    ("Resize", 1): "roi",
    ("Resize", 2): "scales",
    ("Resize", 3): "sizes",
    ("If", 0): "condition",  # a graph input condition: the plan is made per value, with only its branch
    ("DFT", 1): "dft_length",  # the transform size: the twiddle table and the kernel's loop
    ("DFT", 2): "axis",
    ("STFT", 1): "frame_step",
    ("STFT", 3): "frame_length",
    # MelWeightMatrix: five scalars that decide every weight; the matrix is made on the host per value
    **{("MelWeightMatrix", i): name for i, name in enumerate(_MEL_INPUTS)},
    **{(op, 1): "axes" for op in REDUCE_OPS},
}

# ops whose folds carry symbolic values through the listed input slots (None: every slot)
PASSTHROUGH: dict[str, tuple[int, ...] | None] = {
    "Cast": None,
    "Identity": None,
    "Concat": None,
    "Add": None,
    "Sub": None,
    "Mul": None,
    "Unsqueeze": (0,),
    "Squeeze": (0,),
    "Reshape": (0,),
    "Flatten": (0,),
    "Gather": (0,),
    "Slice": (0,),
}


def passes_value(op_type: str, index: int) -> bool:
    """Whether a value at input `index` of `op_type` folds through to its outputs (`PASSTHROUGH`)."""
    slots = PASSTHROUGH.get(op_type, ())
    return slots is None or index in slots


def slot_role(graph: IrGraph, node: IrNode, index: int) -> str | None:
    """``"value"`` when input `index` of `node` sizes an output and may come at run time,
    ``"structural"`` when it must be known at compile time, None when it is neither (data).

    Slice bounds and Range's start and limit size the output only over positive steps known at
    compile time (`slicing._symbolic`, the Range count): otherwise they too must be constants."""
    if node.domain not in ("", "ai.onnx"):
        return None
    slot = (node.op_type, index)
    if slot in STRUCTURAL_SLOTS:
        return "structural"
    if slot not in VALUE_SLOTS:
        return None
    steps = {"Slice": 4, "Range": 2}.get(node.op_type)
    if steps is None or (node.op_type == "Slice" and (len(node.inputs) <= steps or node.inputs[steps] is None)):
        return "value"
    known = _constant(graph, node.inputs[steps] if len(node.inputs) > steps else None)
    return "value" if known is not None and known.size and bool(np.all(known > 0)) else "structural"


def _constant(graph: IrGraph, tid: int | None) -> np.ndarray | None:
    """The value of `tid` if it is plainly constant before inference: folded, an initializer, a Constant."""
    if tid is None:
        return None
    tensor = graph.tensor(tid)
    if tensor.value is not None and tensor.value.dtype != object:
        return np.asarray(tensor.value)
    if tensor.initializer is not None:
        return np.asarray(tensor.initializer.numpy())
    producer = graph.tensor_producer(tid)
    value = producer.attributes.get("value") if producer is not None and producer.op_type == "Constant" else None
    return np.asarray(value.numpy()) if isinstance(value, TensorValue) else None
