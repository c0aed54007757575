"""onyxia.compiler — the pass pipeline from IR to a `CompiledModel`.

Middle layer of load -> IR -> passes -> plan -> executor: it takes an `IrGraph` and an
`OperatorRegistry` and returns pure data. It must not import onnx, wgpu or onyxia.runtime.
"""

from onyxia.compiler._version import __version__ as __version__
from onyxia.compiler.passes import ConstantFoldingPass, PlanningPass, ShapeInferencePass, SymbolicResolutionPass
from onyxia.compiler.pipeline import CompilerPipeline, PassError, compile

__all__ = [
    "CompilerPipeline",
    "ConstantFoldingPass",
    "PassError",
    "PlanningPass",
    "ShapeInferencePass",
    "SymbolicResolutionPass",
    "compile",
]
