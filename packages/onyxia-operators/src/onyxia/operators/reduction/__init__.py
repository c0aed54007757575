"""Reductions: the Reduce* family (one shader, one row per op) and Softmax / LogSoftmax.

Keys carry opset ranges where ONNX changed the op: Reduce* take `axes` as an input from opset 13
(ReduceSum) or 18 (the rest), and Softmax stopped coercing to 2-D at opset 13.
"""

from onyxia.operators.reduction.reduce import REDUCTION_OPS, ReductionOp
from onyxia.operators.reduction.softmax import SOFTMAX_OPS, SoftmaxOp

__all__ = ["REDUCTION", "ReductionOp", "SoftmaxOp"]

REDUCTION: dict[tuple[str, int, int | None], ReductionOp | SoftmaxOp] = {**REDUCTION_OPS, **SOFTMAX_OPS}
