"""Elementwise families: one shader and one implementation each, one row per ONNX op.

Membership: an op belongs here when output element i is a function of input element i alone (after
broadcasting): unary, binary/ternary and variadic math, and Cast/CastLike (`cast`: a change of element
type, through the unary shader).
"""

from onyxia.operators.elementwise.binary import BINARY, BinaryElementwiseOp, ComparisonOp, TernaryElementwiseOp
from onyxia.operators.elementwise.cast import CAST, CastOp
from onyxia.operators.elementwise.unary import UNARY, UnaryElementwiseOp
from onyxia.operators.elementwise.variadic import VARIADIC, VariadicElementwiseOp

__all__ = [
    "BINARY",
    "CAST",
    "UNARY",
    "VARIADIC",
    "BinaryElementwiseOp",
    "CastOp",
    "ComparisonOp",
    "TernaryElementwiseOp",
    "UnaryElementwiseOp",
    "VariadicElementwiseOp",
]
