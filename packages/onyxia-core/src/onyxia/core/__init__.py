"""onyxia.core — the graph IR, shapes, operator/pass protocols, plan types and WGSL preprocessor.

Bottom layer of load -> IR -> passes -> plan -> executor. It depends on numpy only and must not
import onnx, wgpu or any other onyxia package.
"""

from onyxia.core._version import __version__ as __version__
from onyxia.core.bindings import (
    BINDING_ALIGNMENT,
    MAX_BINDING_BYTES,
    MAX_BUFFER_BYTES,
    BufferRange,
    Chunk,
    binding_limit,
    max_binding_bytes,
    max_buffer_bytes,
)
from onyxia.core.builder import GraphBuilder
from onyxia.core.context import (
    FOLD_ELEMENT_LIMIT,
    WEIGHT_FOLD_ELEMENT_LIMIT,
    FoldCtx,
    InferenceCtx,
    NodeCtx,
    as_output_value,
    is_symbolic_value,
)
from onyxia.core.dtypes import DataType, require_gpu_type
from onyxia.core.errors import (
    DeviceError,
    InputError,
    ModelLoadError,
    OnyxiaError,
    PlanningError,
    ShaderError,
    ShapeInferenceError,
    SymbolicError,
    UnsupportedOpError,
)
from onyxia.core.fixed_point import FixedPoint
from onyxia.core.ir import GraphError, IrGraph, IrNode, TensorDef, TensorKind, TensorRef
from onyxia.core.operator import Operator, OperatorBase, TensorType
from onyxia.core.passes import Pass, PassSet, Stage
from onyxia.core.plan import (
    BindingDesc,
    BufferRef,
    CompiledModel,
    CompiledShader,
    CopyBuffer,
    Dispatch,
    ImmediateField,
    PlannedOp,
    PlanTensor,
    Replanner,
    ScratchBufferDesc,
    Step,
    SymbolicBinding,
    TensorRole,
    WriteBuffer,
)
from onyxia.core.plan_builder import PlanBuilder, ShaderHandle
from onyxia.core.plan_ctx import PlanCtx
from onyxia.core.plugin_api import (
    PLUGIN_API_VERSION,
    PluginApiWarning,
    PluginVersionError,
    is_compatible,
    plugin_api,
)
from onyxia.core.registry import FamilyKey, FamilyTable, OperatorRegistry, VersionedKey, merge_families
from onyxia.core.shapes import Absent, Static, Symbolic, TensorShape, shape_of, static_dims
from onyxia.core.symbolic import SymbolicDim, SymbolicExpr, ceil_div
from onyxia.core.values import TensorValue
from onyxia.core.wgsl import ShaderLibrary, load_wgsl, preprocess
from onyxia.core.wgsl_literals import wgsl_dim, wgsl_literal

__all__ = [
    "BINDING_ALIGNMENT",
    "FOLD_ELEMENT_LIMIT",
    "WEIGHT_FOLD_ELEMENT_LIMIT",
    "MAX_BINDING_BYTES",
    "MAX_BUFFER_BYTES",
    "PLUGIN_API_VERSION",
    "Absent",
    "BindingDesc",
    "BufferRange",
    "BufferRef",
    "Chunk",
    "CompiledModel",
    "CompiledShader",
    "CopyBuffer",
    "DataType",
    "DeviceError",
    "Dispatch",
    "FamilyKey",
    "FamilyTable",
    "FixedPoint",
    "FoldCtx",
    "GraphBuilder",
    "GraphError",
    "ImmediateField",
    "InferenceCtx",
    "InputError",
    "IrGraph",
    "IrNode",
    "ModelLoadError",
    "NodeCtx",
    "OnyxiaError",
    "Operator",
    "OperatorBase",
    "OperatorRegistry",
    "Pass",
    "PassSet",
    "PlanBuilder",
    "PlanCtx",
    "PlanTensor",
    "PlannedOp",
    "PluginApiWarning",
    "PluginVersionError",
    "Replanner",
    "PlanningError",
    "ScratchBufferDesc",
    "ShaderError",
    "ShaderHandle",
    "ShaderLibrary",
    "ShapeInferenceError",
    "Stage",
    "Static",
    "Step",
    "Symbolic",
    "SymbolicBinding",
    "SymbolicDim",
    "SymbolicError",
    "SymbolicExpr",
    "TensorDef",
    "TensorKind",
    "TensorRef",
    "TensorRole",
    "TensorShape",
    "TensorType",
    "TensorValue",
    "UnsupportedOpError",
    "VersionedKey",
    "WriteBuffer",
    "as_output_value",
    "binding_limit",
    "is_compatible",
    "is_symbolic_value",
    "ceil_div",
    "load_wgsl",
    "max_binding_bytes",
    "max_buffer_bytes",
    "merge_families",
    "plugin_api",
    "preprocess",
    "require_gpu_type",
    "shape_of",
    "static_dims",
    "wgsl_dim",
    "wgsl_literal",
]
