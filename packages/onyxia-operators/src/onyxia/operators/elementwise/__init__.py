"""Elementwise families: one shader and one implementation each, one row per ONNX op.

Membership: an op belongs here when output element i is a function of input element i alone (after
broadcasting): unary, binary/ternary and variadic math, and Cast/CastLike (`cast`: a change of element
type, through the unary shader). `ELEMENTWISE_MS` holds the com.microsoft activations onnxruntime's
transformer optimizer writes (Gelu, BiasGelu, FastGelu, QuickGelu, BiasAdd).
"""

from onyxia.operators.elementwise.binary import BINARY, BinaryElementwiseOp, ComparisonOp, TernaryElementwiseOp
from onyxia.operators.elementwise.cast import CAST, CastOp
from onyxia.operators.elementwise.microsoft import ELEMENTWISE_MS, BiasedActivationOp
from onyxia.operators.elementwise.unary import UNARY, UnaryElementwiseOp
from onyxia.operators.elementwise.variadic import VARIADIC, VariadicElementwiseOp

__all__ = [
    "BINARY",
    "CAST",
    "ELEMENTWISE_MS",
    "UNARY",
    "VARIADIC",
    "BiasedActivationOp",
    "BinaryElementwiseOp",
    "CastOp",
    "ComparisonOp",
    "TernaryElementwiseOp",
    "UnaryElementwiseOp",
    "VariadicElementwiseOp",
]
