"""`NonMaxSuppressionOp`: ONNX NonMaxSuppression (opset 10 and 11), onnxruntime's CPU kernel's result.

Per batch and class, boxes above `score_threshold` are taken best score first (ties: the lower box
index first) and kept unless a kept box overlaps them with an IoU above `iou_threshold`, until
`max_output_boxes_per_class` are kept; the output lists ``[batch, class, box]`` rows in batch, class,
then selection order. How many rows there are depends on the data, so like NonZero (`nonzero`) the
count is a fresh dim symbol, read back mid-run from a total the GPU computes, and a last dispatch
writes the rows into a buffer sized for it (non_max_suppression.wgsl: select, total, write).

The three optional inputs are either compile-time values (baked into the shader: a huge
``max_output_boxes_per_class`` such as torchvision's INT64_MAX is clamped to what 32 bits count) or
run-time tensors the select kernel reads. A compile-time ``iou_threshold`` outside [0, 1] is an
error, as in onnxruntime; at run time the kernel has no error code for it and uses the value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import (
    DataType,
    FoldCtx,
    InferenceCtx,
    NodeCtx,
    PlanCtx,
    SymbolicDim,
    SymbolicExpr,
    TensorType,
    ceil_div,
    load_wgsl,
    shape_of,
)
from onyxia.core.bindings import BufferRange
from onyxia.core.plan import BufferRef, ReadValues
from onyxia.core.shapes import dims_product
from onyxia.operators.gather_scatter.nms_reference import non_max_suppression
from onyxia.operators.layout import WORKGROUP_SIZE, node_literal

__all__ = ["NON_MAX_SUPPRESSION", "NonMaxSuppressionOp"]

_SOURCE = load_wgsl(__package__, "non_max_suppression.wgsl")
_I32_MAX = (1 << 31) - 1
_ONE_WORKGROUP_OR_NONE = 1 << 30  # ceil_div(count, this) is 0 for count == 0, else 1


@dataclass(frozen=True)
class NonMaxSuppressionOp:
    name: str = "NonMaxSuppression"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        _check_inputs(ctx)
        count: SymbolicDim = count_symbol(ctx)
        folded = self.try_fold(ctx)
        if folded is not None:
            count = int(folded[0].shape[0])
        elif _max_out(ctx) == 0:
            count = 0
        return [TensorType(DataType.INT64, shape_of([count, 3]))]

    def try_fold(self, ctx: FoldCtx | InferenceCtx) -> list[np.ndarray] | None:
        boxes, scores = ctx.input_value(0), ctx.input_value(1)
        if boxes is None or scores is None or boxes.dtype == object or scores.dtype == object:
            return None
        params = [ctx.input_value(i) if ctx.has_input(i) else np.zeros(0) for i in (2, 3, 4)]
        if any(p is None or p.dtype == object for p in params):
            return None
        max_out, iou, score = (None if p is None or p.size == 0 else p.reshape(-1)[0] for p in params)
        center = bool(ctx.attr_int("center_point_box", 0))
        as_int = None if max_out is None else int(max_out)
        as_floats = [None if v is None else float(v) for v in (iou, score)]
        return [non_max_suppression(boxes, scores, as_int, as_floats[0], as_floats[1], center)]

    def plan(self, ctx: PlanCtx) -> None:
        count = ctx.output_dims(0)[0]
        n_boxes, classes = ctx.input_dims(0)[1], ctx.input_dims(1)[1]
        groups = dims_product([ctx.input_dims(0)[0], classes])
        if count == 0 or n_boxes == 0 or groups == 0:
            return  # nothing can be selected: the output is [0, 3]
        sizes: dict[str, SymbolicDim | list[SymbolicDim]] = {"N": n_boxes, "C": classes, "G": groups}
        alive = ctx.alloc_scratch(groups * n_boxes * 4 + 4, "alive")  # + 4: never an empty binding
        selected = ctx.alloc_scratch(groups * n_boxes * 4 + 4, "selected")
        counts = ctx.alloc_scratch(groups * 4, "counts")
        defs, reads = _select_defs(ctx)
        shader = ctx.compile_shader("gather_scatter/nms_select", _SOURCE, defs, sizes)
        ctx.dispatch(shader, reads, [alive, selected, counts], groups)
        total = ctx.alloc_scratch(4, "total")
        shader = ctx.compile_shader("gather_scatter/nms_total", _SOURCE, {"TOTAL": True}, sizes)
        ctx.dispatch(shader, [counts], [total], 1)
        if isinstance(count, SymbolicExpr):
            ctx.op.steps.append(ReadValues(total, (str(count),)))
        write = {"WRITE": True, "WORKGROUP_SIZE": WORKGROUP_SIZE}
        shader = ctx.compile_shader("gather_scatter/nms_write", _SOURCE, write, sizes)
        workgroups = ceil_div(groups * n_boxes, WORKGROUP_SIZE) * ceil_div(count, _ONE_WORKGROUP_OR_NONE)
        ctx.dispatch(shader, [counts, selected], [ctx.output(0)], workgroups)


def count_symbol(ctx: NodeCtx) -> SymbolicExpr:
    """The dim that counts the selected boxes: named after the inputs and the box format (equal nodes,
    which common-subexpression elimination merges after inference, share it), the same every round."""
    names = ", ".join(ctx.input_tensor(i).name if ctx.has_input(i) else "" for i in range(ctx.num_inputs))
    center = ctx.attr_int("center_point_box", 0)
    return SymbolicExpr.name(f"NonMaxSuppression({names}; {center}):count")


def _check_inputs(ctx: NodeCtx) -> None:
    center = ctx.attr_int("center_point_box", 0)
    if center not in (0, 1):
        raise ctx.error(f"attribute center_point_box is {center}; expected 0 or 1")
    boxes, scores = ctx.input_dims(0), ctx.input_dims(1)
    if len(boxes) != 3 or len(scores) != 3:
        raise ctx.error(f"boxes and scores must be 3-D, found {ctx.input_shape(0)} and {ctx.input_shape(1)}")
    for what, a, b in (("num_batches", boxes[0], scores[0]), ("spatial_dimension", boxes[1], scores[2])):
        if isinstance(a, int) and isinstance(b, int) and a != b:
            raise ctx.error(f"boxes and scores disagree on {what}: {a} and {b}")
    if isinstance(boxes[2], int) and boxes[2] != 4:
        raise ctx.error(f"boxes' last dim is {boxes[2]}; expected 4")
    for i, dtype in enumerate((DataType.FLOAT, DataType.FLOAT, DataType.INT64, DataType.FLOAT, DataType.FLOAT)):
        if ctx.has_input(i) and ctx.input_dtype(i) != dtype:
            raise ctx.error(f"input {i} is {ctx.input_dtype(i).name.lower()}; expected {dtype.name.lower()}")
    iou = _known(ctx, 3)
    if iou is not None and not 0.0 <= float(iou) <= 1.0:
        raise ctx.error(f"input 3 (iou_threshold) is {float(iou)}; expected a value in [0, 1]")


def _known(ctx: NodeCtx, i: int) -> np.generic | None:
    """Input `i`'s scalar value when known at compile time (absent inputs are None too)."""
    value = ctx.input_value(i) if ctx.has_input(i) else None
    if value is None or value.dtype == object or value.size != 1:
        return None
    return value.reshape(-1)[0]  # type: ignore[no-any-return]


def _max_out(ctx: NodeCtx) -> int | None:
    """max_output_boxes_per_class when known (0 when absent: nothing is selected), else None."""
    if not ctx.has_input(2):
        return 0
    value = _known(ctx, 2)
    return None if value is None else max(int(value), 0)


def _select_defs(ctx: PlanCtx) -> tuple[dict[str, object], list[BufferRef | BufferRange]]:
    """The select stage's defs and read bindings: each optional input a literal when known, else a
    binding the kernel reads (with its binding index)."""
    defs: dict[str, object] = {"SELECT": True, "CENTER": bool(ctx.attr_int("center_point_box", 0))}
    if not defs["CENTER"]:
        del defs["CENTER"]
    reads: list[BufferRef | BufferRange] = [ctx.input(0), ctx.input(1)]
    max_out = _max_out(ctx)
    literals = {
        "MAX_OUT": None if max_out is None else f"{min(max_out, _I32_MAX)}u",
        "IOU": _float_literal(ctx, 3, "0.0"),
        "SCORE": _float_literal(ctx, 4, "0.0"),  # unused without SCORE_FILTER
    }
    runtime = {"MAX_OUT": ("MAX_INPUT", "B_MAX", 2, "u32(max(in_max[0], 0))")}
    runtime |= {"IOU": ("IOU_INPUT", "B_IOU", 3, "in_iou[0]"), "SCORE": ("SCORE_INPUT", "B_SCORE", 4, "in_score[0]")}
    for key, (flag, binding, index, expression) in runtime.items():
        if literals[key] is not None:
            defs[key] = literals[key]
            continue
        defs |= {key: expression, flag: True, binding: len(reads)}
        reads.append(ctx.input(index))
    if ctx.has_input(4):
        defs["SCORE_FILTER"] = True
    defs |= {"B_ALIVE": len(reads), "B_SELECTED": len(reads) + 1, "B_COUNTS": len(reads) + 2}
    return defs, reads


def _float_literal(ctx: PlanCtx, i: int, absent: str) -> str | None:
    """Input `i` (a float threshold) as a WGSL literal when known or absent, None when read at run time."""
    if not ctx.has_input(i):
        return absent
    value = _known(ctx, i)
    return None if value is None else node_literal(ctx, DataType.FLOAT, float(value), f"input {i}")


NON_MAX_SUPPRESSION: dict[str, NonMaxSuppressionOp] = {"NonMaxSuppression": NonMaxSuppressionOp()}
