"""`core_operator_registry()`: every built-in operator, plus those installed packages publish."""

from __future__ import annotations

from typing import cast

from onyxia.core import FamilyTable, OperatorRegistry
from onyxia.operators.attention import ATTENTION_ONNX, ATTENTION_ONYXIA, MICROSOFT
from onyxia.operators.control import CONTROL
from onyxia.operators.elementwise import BINARY, CAST, ELEMENTWISE_MS, UNARY, VARIADIC
from onyxia.operators.elementwise.fused import FUSED_ELEMENTWISE
from onyxia.operators.family import ONYXIA_DOMAIN
from onyxia.operators.gather_scatter import GATHER_SCATTER
from onyxia.operators.generate import GENERATE
from onyxia.operators.matmul import MATMUL, MATMUL_ONYXIA
from onyxia.operators.normalization import NORMALIZATION, NORMALIZATION_MS, NORMALIZATION_ONYXIA
from onyxia.operators.passes import default_passes
from onyxia.operators.quantized import QUANTIZED, QUANTIZED_MS, QUANTIZED_ONYXIA
from onyxia.operators.rearrange import REARRANGE
from onyxia.operators.recurrent import RECURRENT
from onyxia.operators.reduction import REDUCTION, REDUCTION_ONYXIA
from onyxia.operators.shape import READ_BACK, SHAPE
from onyxia.operators.signal import SIGNAL
from onyxia.operators.transformer import TRANSFORMER_MS, LowerContribOps
from onyxia.operators.vision import VISION, VISION_ONYXIA

__all__ = ["core_operator_registry", "register_builtin"]


def register_builtin(registry: OperatorRegistry) -> OperatorRegistry:
    """Register the built-in families, the shared WGSL modules (``onyxia::indexing`` ...) and the
    default passes (`default_passes`) that produce the com.onyxia ops, after `LowerContribOps` (the
    contrib ops spelled in ops with kernels)."""
    registry.shaders.add_package("onyxia.operators", "wgsl")
    # `{**a, **b}` in matmul/__init__.py joins MatMulOp and GemmOp to `object`, so MATMUL and MATMUL_ONYXIA
    # infer as dict[str, object]; annotate them dict[str, Operator] there and these casts turn redundant.
    matmul, matmul_onyxia = cast("FamilyTable", MATMUL), cast("FamilyTable", MATMUL_ONYXIA)
    tables: dict[str, tuple[FamilyTable, ...]] = {
        "": (
            BINARY,
            UNARY,
            VARIADIC,
            CAST,
            REARRANGE,
            GENERATE,
            SHAPE,
            matmul,
            REDUCTION,
            NORMALIZATION,
            QUANTIZED,
            VISION,
            GATHER_SCATTER,
            CONTROL,
            RECURRENT,
            SIGNAL,
            ATTENTION_ONNX,
        ),
        "com.microsoft": (MICROSOFT, NORMALIZATION_MS, QUANTIZED_MS, ELEMENTWISE_MS, TRANSFORMER_MS),
        ONYXIA_DOMAIN: (
            matmul_onyxia,
            QUANTIZED_ONYXIA,
            NORMALIZATION_ONYXIA,
            ATTENTION_ONYXIA,
            FUSED_ELEMENTWISE,
            READ_BACK,
            REDUCTION_ONYXIA,
            VISION_ONYXIA,
        ),
    }
    for domain, family_tables in tables.items():
        for table in family_tables:
            registry.register_family(domain, table)
    known = {p.name for p in registry.passes}  # registering twice must not run a pass twice
    registry.passes += [p for p in [LowerContribOps(), *default_passes()] if p.name not in known]
    return registry


def core_operator_registry(*, plugins: bool = True) -> OperatorRegistry:
    """The built-in operators; with `plugins`, also every ``onyxia.operators`` entry point."""
    registry = register_builtin(OperatorRegistry())
    return registry.discover() if plugins else registry
