"""Elementwise families: one shader and one implementation each, one row per ONNX op."""

from onyxia.operators.elementwise.binary import BINARY, BinaryElementwiseOp, ComparisonOp, TernaryElementwiseOp
from onyxia.operators.elementwise.unary import UNARY, UnaryElementwiseOp
from onyxia.operators.elementwise.variadic import VARIADIC, VariadicElementwiseOp

__all__ = [
    "BINARY",
    "UNARY",
    "VARIADIC",
    "BinaryElementwiseOp",
    "ComparisonOp",
    "TernaryElementwiseOp",
    "UnaryElementwiseOp",
    "VariadicElementwiseOp",
]
