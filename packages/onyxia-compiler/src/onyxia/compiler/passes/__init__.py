"""The four built-in passes, one per file."""

from onyxia.compiler.passes.constant_folding import ConstantFoldingPass
from onyxia.compiler.passes.planning import PlanningPass
from onyxia.compiler.passes.shape_inference import ShapeInferencePass
from onyxia.compiler.passes.symbolic_resolution import SymbolicResolutionPass

__all__ = ["ConstantFoldingPass", "PlanningPass", "ShapeInferencePass", "SymbolicResolutionPass"]
