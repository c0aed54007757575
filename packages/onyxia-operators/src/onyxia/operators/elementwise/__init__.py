"""Elementwise families: one shader and one implementation each, one row per ONNX op."""

from onyxia.operators.elementwise.binary import BINARY, BinaryElementwiseOp
from onyxia.operators.elementwise.unary import UNARY, UnaryElementwiseOp

__all__ = ["BINARY", "UNARY", "BinaryElementwiseOp", "UnaryElementwiseOp"]
