"""`NormalizationOp`: LayerNormalization, RMSNormalization (opset 23), onnxruntime's
SimplifiedLayerNormalization (RMSNorm) and the com.microsoft Skip* fusions, one row each, one shader.

A row is data: the role of each input position (``x``, ``skip``, ``scale``, ``beta``, ``bias``), the role
of each output position (``y``, ``mean``, ``inv_std``, ``sum``), whether the mean is subtracted, and the
spec's default epsilon. A ``skip_scale`` input (NormAddNorm) makes the skip
``rms(skip) * skip_scale`` over the same axis (epsilon ``skip_epsilon``), rounded to skip_scale's dtype
as the SimplifiedLayerNormalization it replaces stores it; that skip must have x's shape. Everything from `axis` to the end is one row; Mean and InvStdDev are float32
(ONNX type U; stash_type 1 is the only value onnxruntime's schema accepts). RMS rows write 0 to a
``mean`` output, as onnxruntime does. Skip, scale, beta and bias may be shorter than what they
combine with, broadcasting over leading dims (onnxruntime accepts skip as [1, S, H] or [S, H]).

A com.onyxia ``<norm>Int8A`` twin (the `QuantizeInNorm` pass makes it for a norm feeding a 4-bit product that
runs int8 activations) has two more outputs, ``qa`` and ``sa``: y quantized per block of attribute
``a_block_size``, laid out as `quantized.int8_activations` says, from the values y is stored as.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from onyxia.core import DataType, FoldCtx, InferenceCtx, NodeCtx, PlanCtx, SymbolicDim, TensorType, load_wgsl
from onyxia.core.adapter_facts import adapter_facts
from onyxia.core.shapes import dims_product, shape_of
from onyxia.operators.family import named_rows
from onyxia.operators.layout import node_literal, type_defs
from onyxia.operators.normalization.checks import require_rows, require_suffix, unsupported_attribute
from onyxia.operators.quantized.int8_activations import quantized_a_types, rows_padded
from onyxia.operators.typesets import FLOATS, require_dtype

__all__ = [
    "LAYER_NORMS",
    "LAYER_NORMS_MS",
    "LAYER_NORMS_ONYXIA",
    "NormalizationOp",
    "normalize_rows",
    "row_lanes",
    "row_tree_width",
]

_SOURCE = load_wgsl(__package__, "normalization.wgsl")
_READ_ORDER = ("x", "skip", "bias", "scale", "beta", "skip_scale")
_FLAGS = {
    "skip": "SKIP",
    "bias": "BIAS",
    "beta": "BETA",
    "mean": "OUT_MEAN",
    "inv_std": "OUT_INV_STD",
    "sum": "OUT_SUM",
    "skip_scale": "SKIP_NORM",
    "qa": "INT8_A",
}
_QUANTIZED = ("qa", "sa")  # the Int8A twins' outputs
_STASH_FLOAT = 1


@dataclass(frozen=True)
class NormalizationOp:
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    rms: bool
    epsilon: float
    y_dtype_from: str = "x"  # SimplifiedLayerNormalization's Y has the scale's dtype (onnxruntime type V)
    skip_epsilon: float = 1e-5  # NormAddNorm's skip norm: SimplifiedLayerNormalization's default
    name: str = "normalization"

    # ----- shape rule ------------------------------------------------------------------------
    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        dims, axis = self._checked_layout(ctx)
        stats = shape_of([*dims[:axis], *([1] * (len(dims) - axis))])
        types = {
            "y": TensorType(ctx.input_dtype(self.inputs.index(self.y_dtype_from)), ctx.input_shape(0)),
            "mean": TensorType(DataType.FLOAT, stats),
            "inv_std": TensorType(DataType.FLOAT, stats),
            "sum": TensorType(ctx.input_dtype(0), ctx.input_shape(0)),
        }
        if "qa" in self.outputs:
            types["qa"], types["sa"] = quantized_a_types(
                dims[:axis], self._row_length(ctx, dims, axis), self._block(ctx)
            )
        return [types[role] for role in self.outputs[: ctx.num_outputs]]

    def _block(self, ctx: NodeCtx) -> int:
        """An Int8A twin's block size (attribute a_block_size: a power of two, 16 .. 256, as MatMulNBits')."""
        block = ctx.attr_int("a_block_size")
        if block < 16 or block > 256 or block & (block - 1):
            raise ctx.error(f"attribute 'a_block_size' = {block}; expected a power of two from 16 to 256")
        return block

    @staticmethod
    def _row_length(ctx: NodeCtx, dims: tuple[SymbolicDim, ...], axis: int) -> int:
        length = dims_product(dims[axis:])
        if not isinstance(length, int):
            raise ctx.error(f"quantizes rows of symbolic length {length}; an Int8A norm needs a known row length")
        return length

    def _checked_layout(self, ctx: NodeCtx) -> tuple[tuple[SymbolicDim, ...], int]:
        """Validate attributes and operand shapes once; returns the input dims and the normalised axis."""
        stash = ctx.attr_int("stash_type", _STASH_FLOAT)
        if stash != _STASH_FLOAT:
            raise unsupported_attribute(ctx, "stash_type", stash, "1 (float32 statistics)")
        if ctx.num_outputs > len(self.outputs):
            raise ctx.error(f"has {ctx.num_outputs} outputs; the op defines {len(self.outputs)}")
        dims = ctx.input_dims(0)
        axis = ctx.normalize_axis(ctx.attr_int("axis", -1), len(dims))
        for role in ("skip", "scale", "beta", "bias", "skip_scale"):
            i = self._index(ctx, role)
            if i is None:
                continue
            require_suffix(ctx, i, role, dims if role == "skip" else dims[axis:])
        skip = self._index(ctx, "skip")
        if self._index(ctx, "skip_scale") is not None and skip is not None:
            require_rows(ctx, skip, "skip (normalised per row)", dims)
        return dims, axis

    def _index(self, ctx: NodeCtx, role: str) -> int | None:
        """Input position of `role` when this node provides it."""
        if role not in self.inputs:
            return None
        i = self.inputs.index(role)
        return i if ctx.has_input(i) else None

    def _epsilon(self, ctx: NodeCtx, name: str = "epsilon") -> float:
        """The attribute as the float32 onnxruntime adds (the ONNX attribute is a float32 too)."""
        default = self.skip_epsilon if name == "skip_epsilon" else self.epsilon
        return float(np.float32(ctx.attr_float(name, default)))

    # ----- folding ---------------------------------------------------------------------------
    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        values = ctx.values()
        if "qa" in self.outputs:
            return None  # an Int8A twin exists for the product reading it, made after folding
        if not ctx.all_inputs_have_values() or any(v is not None and v.dtype == object for v in values):
            return None
        _, axis = self._checked_layout(ctx)
        operands = {role: value for role, value in zip(self.inputs, values) if value is not None}
        results = normalize_rows(operands, axis, self._epsilon(ctx), self.rms, self._epsilon(ctx, "skip_epsilon"))
        return [
            results[role].astype(ctx.output_numpy_dtype(i))
            for i, role in enumerate(self.outputs[: ctx.num_outputs])
            if ctx.has_output(i)
        ]

    # ----- planning --------------------------------------------------------------------------
    def plan(self, ctx: PlanCtx) -> None:
        dims, axis = self._checked_layout(ctx)
        reads = [(role, i) for role in _READ_ORDER if (i := self._index(ctx, role)) is not None]
        writes = [(role, i) for i, role in enumerate(self.outputs[: ctx.num_outputs]) if ctx.has_output(i)]
        for role, i in reads:
            require_dtype(ctx, ctx.input_dtype(i), FLOATS, f"input {i} ({role})")
        rows, length = dims_product(dims[:axis]), dims_product(dims[axis:])
        if rows == 0 or length == 0:
            return  # nothing to normalise; the outputs are empty
        types = {f"{role.upper()}_T": ctx.input_dtype(i) for role, i in reads}
        types.update({f"{role.upper()}_T": ctx.output_tensor(i).dtype for role, i in writes if role not in _QUANTIZED})
        defs: dict[str, object] = {**type_defs(**types), **row_lanes(length)}
        extents: dict[str, SymbolicDim] = {}
        if "qa" in self.outputs:
            block = self._block(ctx)
            defs["BLOCK_SIZE"] = block
            if ctx.output_tensor(0).dtype == DataType.FLOAT16:
                defs["Y_F16"] = True  # quantize y as its f16 buffer holds it
            extents = {"NB": -(-self._row_length(ctx, dims, axis) // block), "MP": rows_padded(rows)}
        defs["EPSILON"] = node_literal(ctx, DataType.FLOAT, self._epsilon(ctx), "attribute 'epsilon'")
        if self.rms:
            defs["RMS"] = True
        if self._index(ctx, "skip_scale") is not None:
            defs["SKIP_EPSILON"] = node_literal(ctx, DataType.FLOAT, self._epsilon(ctx, "skip_epsilon"), "skip_epsilon")
            if types["SKIP_SCALE_T"] == DataType.FLOAT16:
                defs["SKIP_Y_F16"] = True  # the skip norm's output is rounded as an f16 buffer stores it
        for binding, (role, _) in enumerate([*reads, *writes]):
            defs[f"B_{role.upper()}"] = binding
            if role in _FLAGS:
                defs[_FLAGS[role]] = True
        extents |= {f"{role.upper()}_N": dims_product(ctx.input_dims(i)) for role, i in reads if role != "x"}
        shader = ctx.compile_shader(
            "normalization/normalization", _SOURCE, defs, {"ROWS": rows, "L": length, **extents}
        )
        ctx.dispatch(shader, [ctx.input(i) for _, i in reads], [ctx.output(i) for _, i in writes], rows)


# Invocations of a row's workgroup on a CPU rasteriser: the reduction tree is wider (`row_lanes`), each
# invocation holding the partial sums of several of its lanes. On lavapipe a barrier switches through a
# workgroup's coroutines (one per 8 invocations): Gemma 3 270m's decode step at 8 rows spent 5.3 ms in
# NormAddNorm and 5.6 in RmsNormRotaryPair with 256 invocations per row, 1.9 and 1.4 with 16. A GPU gets one
# invocation per lane: at 16 a decode row's loads are 40 dependent trips to memory per invocation, and an
# H200 spent 53 us on each of Gemma 3's NormAddNorm rows (a 640-wide row; 1.9 ms of a 6.4 ms step).
ROW_INVOCATIONS = 16


def row_tree_width(length: SymbolicDim) -> int:
    """The width of a row's reduction tree: one lane per element up to 256 (a power of two, as the tree
    needs); symbolic row lengths get the largest. Kernels that must reduce a row as another does (a fused
    norm and the unfused one) get the same width, so the same sums."""
    if not isinstance(length, int):
        return 256
    return min(256, max(32, 1 << max(length - 1, 1).bit_length()))


def row_lanes(length: SymbolicDim) -> dict[str, int]:
    """onyxia::reduce's defs for a row of `length`: WORKGROUP_SIZE invocations holding SPAN lanes each of a
    `row_tree_width` tree (the sum's bits depend on the width alone, so every adapter's split sums alike):
    ROW_INVOCATIONS on a CPU rasteriser, one invocation per lane on a GPU."""
    width = row_tree_width(length)
    facts = adapter_facts()
    invocations = min(width, ROW_INVOCATIONS if facts.cpu else facts.invocations_per_workgroup)
    return {"WORKGROUP_SIZE": invocations, "SPAN": width // invocations}


def normalize_rows(
    operands: dict[str, np.ndarray], axis: int, epsilon: float, rms: bool, skip_epsilon: float = 1e-5
) -> dict[str, np.ndarray]:
    """The family in numpy (float32 statistics), for folding; keyed by output role."""
    x = operands["x"]
    total = x.astype(np.float32)
    if "skip_scale" in operands:  # NormAddNorm: the skip is normalised first, stored in skip_scale's dtype
        normed = normalize_rows({"x": operands["skip"], "scale": operands["skip_scale"]}, axis, skip_epsilon, True)
        operands = {**operands, "skip": normed["y"].astype(operands["skip_scale"].dtype)}
    for role in ("skip", "bias"):
        if role in operands:
            total = total + operands[role].astype(np.float32)
    rows = total.reshape(*x.shape[:axis], -1)
    mean = np.zeros(rows.shape[:-1] + (1,), np.float32) if rms else rows.mean(-1, keepdims=True)
    inv_std = 1.0 / np.sqrt(np.square(rows - mean).mean(-1, keepdims=True) + np.float32(epsilon))
    y = ((rows - mean) * inv_std).reshape(x.shape) * operands["scale"].astype(np.float32)
    if "beta" in operands:
        y = y + operands["beta"].astype(np.float32)
    stats_shape = x.shape[:axis] + (1,) * (x.ndim - axis)
    return {"y": y, "mean": mean.reshape(stats_shape), "inv_std": inv_std.reshape(stats_shape), "sum": total}


LAYER_NORMS: dict[str, NormalizationOp] = named_rows(
    {
        "LayerNormalization": NormalizationOp(("x", "scale", "beta"), ("y", "mean", "inv_std"), False, 1e-5),
        # onnxruntime's contrib op, registered in the default domain (Gemma, Llama exports)
        "SimplifiedLayerNormalization": NormalizationOp(("x", "scale"), ("y", "inv_std"), True, 1e-5, "scale"),
        "RMSNormalization": NormalizationOp(("x", "scale"), ("y",), True, 1e-5, "scale"),  # ONNX opset 23
    }
)

LAYER_NORMS_MS: dict[str, NormalizationOp] = named_rows(
    {
        "SkipLayerNormalization": NormalizationOp(
            ("x", "skip", "scale", "beta", "bias"), ("y", "mean", "inv_std", "sum"), False, 1e-12
        ),
        "SkipSimplifiedLayerNormalization": NormalizationOp(
            ("x", "skip", "scale", "bias"), ("y", "mean", "inv_std", "sum"), True, 1e-12
        ),
    }
)

# com.onyxia: made by the FuseNormAddNorm pass (`normalization.norm_add_norm_fusions`), never by exporters
_NORM_ADD_NORM = {
    "NormAddNorm": NormalizationOp(("x", "skip", "scale", "skip_scale"), ("y", "mean", "inv_std", "sum"), True, 1e-12)
}


def _int8_a_twin(norm: NormalizationOp) -> NormalizationOp:
    """`norm` also writing y quantized for a 4-bit product (outputs qa and sa after its own)."""
    return replace(norm, outputs=(*norm.outputs, *_QUANTIZED))


# com.onyxia <norm>Int8A: made by the QuantizeInNorm pass (`quantized.quantize_in_norm_fusions`)
_INT8_A_TWINS = {
    f"{name}Int8A": _int8_a_twin(row) for name, row in {**LAYER_NORMS, **LAYER_NORMS_MS, **_NORM_ADD_NORM}.items()
}
LAYER_NORMS_ONYXIA: dict[str, NormalizationOp] = named_rows({**_NORM_ADD_NORM, **_INT8_A_TWINS})
