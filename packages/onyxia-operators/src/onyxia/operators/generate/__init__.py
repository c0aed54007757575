"""Generators: ConstantOfShape, Range, Trilu."""

from onyxia.operators.generate.ops import GENERATE, GeneratorOp

__all__ = ["GENERATE", "GeneratorOp"]
