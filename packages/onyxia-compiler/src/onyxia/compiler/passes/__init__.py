"""The four built-in passes, one per file, and the plan-level `ComputePassBatchingPass` planning runs."""

from onyxia.compiler.passes.compute_pass_batching import ComputePassBatchingPass
from onyxia.compiler.passes.constant_folding import ConstantFoldingPass
from onyxia.compiler.passes.planning import PlanningPass
from onyxia.compiler.passes.shape_inference import ShapeInferencePass
from onyxia.compiler.passes.symbolic_resolution import SymbolicResolutionPass

__all__ = [
    "ComputePassBatchingPass",
    "ConstantFoldingPass",
    "PlanningPass",
    "ShapeInferencePass",
    "SymbolicResolutionPass",
]
