"""Schemas of the onnxruntime contrib ops Onyxia runs, which the `onnx` package has no schema for.

onnxruntime registers these (com.microsoft, plus SimplifiedLayerNormalization in the default
domain) and checks them at session creation like any ONNX op: input/output counts, attribute
names and types, and type constraints. Without this table a GroupQueryAttention with seqlens_k
as int64, or with an unknown attribute, would be accepted here and rejected by onnxruntime.
The rows are copied from onnxruntime 1.32's schemas
(``onnxruntime.capi._pybind_state.get_all_operator_schema()``; ContribOperators.md documents them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from onnx import AttributeProto, TensorProto

__all__ = ["CONTRIB_SCHEMAS", "ContribSchema", "contrib_schema"]

_F, _I, _S = AttributeProto.FLOAT, AttributeProto.INT, AttributeProto.STRING
_FLOATS = frozenset({TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16})
_NORM_FLOATS = _FLOATS | {TensorProto.DOUBLE}
_INT32 = frozenset({TensorProto.INT32})
_INT64 = frozenset({TensorProto.INT64})
_CACHE = _FLOATS | {TensorProto.UINT8, TensorProto.INT8, TensorProto.FLOAT8E4M3FN}
_BYTES = frozenset({TensorProto.INT8, TensorProto.UINT8})
_PACKED = frozenset(
    {
        TensorProto.INT4,
        TensorProto.UINT4,
        TensorProto.UINT8,
        TensorProto.FLOAT8E4M3FN,
        TensorProto.FLOAT8E4M3FNUZ,
        TensorProto.FLOAT8E5M2,
        TensorProto.FLOAT8E5M2FNUZ,
        TensorProto.FLOAT4E2M1,
    }
)


@dataclass(frozen=True)
class ContribSchema:
    """One op: `inputs`/`outputs` are (name, type parameter) in order; the first `min_*` are required.

    `types` maps each type parameter to its allowed `TensorProto` dtypes; inputs sharing a
    parameter must share a dtype. `attributes` maps name -> `AttributeProto` type code;
    `required` lists the attributes without a default. `scalars` names inputs that must hold one
    element (onnxruntime checks total_sequence_length so).
    """

    min_inputs: int
    inputs: tuple[tuple[str, str], ...]
    min_outputs: int
    outputs: tuple[tuple[str, str], ...]
    types: dict[str, frozenset[int]]
    attributes: dict[str, int]
    required: frozenset[str] = frozenset()
    scalars: frozenset[str] = field(default_factory=frozenset)


_SKIP_NORM_OUTPUTS = (("output", "T"), ("mean", "U"), ("inv_std_var", "U"), ("input_skip_bias_sum", "T"))
_FLOAT32 = frozenset({TensorProto.FLOAT})

CONTRIB_SCHEMAS: dict[tuple[str, str], ContribSchema] = {
    ("com.microsoft", "GroupQueryAttention"): ContribSchema(
        min_inputs=1,  # key/value are empty with packed QKV; the op itself requires seqlens_k and total length
        inputs=(
            ("query", "T"),
            ("key", "T"),
            ("value", "T"),
            ("past_key", "T_CACHE"),
            ("past_value", "T_CACHE"),
            ("seqlens_k", "M"),
            ("total_sequence_length", "M"),
            ("cos_cache", "T"),
            ("sin_cache", "T"),
            ("position_ids", "P"),
            ("attention_bias", "T"),
            ("head_sink", "T"),
            ("k_scale", "T_KV_SCALE"),
            ("v_scale", "T_KV_SCALE"),
            ("q_norm_weight", "T"),
            ("k_norm_weight", "T"),
            ("query_seqlens", "M"),
        ),
        min_outputs=1,
        outputs=(("output", "T"), ("present_key", "T_CACHE"), ("present_value", "T_CACHE"), ("output_qk", "T")),
        types={"T": _FLOATS, "T_CACHE": _CACHE, "T_KV_SCALE": _FLOAT32, "M": _INT32, "P": _INT64},
        attributes={
            "num_heads": _I,
            "kv_num_heads": _I,
            "scale": _F,
            "softcap": _F,
            "local_window_size": _I,
            "do_rotary": _I,
            "rotary_interleaved": _I,
            "smooth_softmax": _I,
            "qk_output": _I,
            "causal": _I,
            "sliding_window_cache": _I,
            "kv_cache_bit_width": _I,
            "k_quant_type": _S,
            "v_quant_type": _S,
            "q_norm_epsilon": _F,
            "k_norm_epsilon": _F,
            "qk_norm_epsilon": _F,
        },
        required=frozenset({"num_heads", "kv_num_heads"}),
        scalars=frozenset({"total_sequence_length"}),
    ),
    ("com.microsoft", "MatMulNBits"): ContribSchema(
        min_inputs=3,
        inputs=(("A", "T1"), ("B", "T2"), ("scales", "T1"), ("zero_points", "T3"), ("g_idx", "T4"), ("bias", "T1")),
        min_outputs=1,
        outputs=(("Y", "T1"),),
        types={
            "T1": _FLOATS,
            "T2": frozenset({TensorProto.UINT8}),
            "T3": _FLOATS | {TensorProto.UINT8},
            "T4": _INT32,
        },
        attributes={"K": _I, "N": _I, "bits": _I, "block_size": _I, "accuracy_level": _I, "weight_prepacked": _I},
        required=frozenset({"K", "N", "block_size"}),
    ),
    ("com.microsoft", "MatMulBnb4"): ContribSchema(
        min_inputs=3,
        inputs=(("A", "T1"), ("B", "T2"), ("absmax", "T1")),
        min_outputs=1,
        outputs=(("Y", "T1"),),
        types={"T1": _FLOATS, "T2": frozenset({TensorProto.UINT8})},
        attributes={"K": _I, "N": _I, "block_size": _I, "quant_type": _I, "training_mode": _I, "transB": _I},
        required=frozenset({"K", "N", "block_size", "quant_type"}),
    ),
    ("com.microsoft", "MatMulIntegerToFloat"): ContribSchema(
        min_inputs=4,
        inputs=(
            ("A", "T1"),
            ("B", "T2"),
            ("a_scale", "T3"),
            ("b_scale", "T3"),
            ("a_zero_point", "T1"),
            ("b_zero_point", "T2"),
            ("bias", "T3"),
        ),
        min_outputs=1,
        outputs=(("Y", "T3"),),
        types={"T1": _BYTES, "T2": _BYTES, "T3": frozenset({TensorProto.FLOAT, TensorProto.FLOAT16})},
        attributes={},
    ),
    ("com.microsoft", "DynamicQuantizeMatMul"): ContribSchema(
        min_inputs=3,
        inputs=(("A", "T1"), ("B", "T2"), ("b_scale", "T1"), ("b_zero_point", "T2"), ("bias", "T1")),
        min_outputs=1,
        outputs=(("Y", "T1"),),
        types={"T1": _FLOAT32, "T2": _BYTES},
        attributes={},
    ),
    ("com.microsoft", "RotaryEmbedding"): ContribSchema(
        min_inputs=4,
        inputs=(("input", "T"), ("position_ids", "M"), ("cos_cache", "T"), ("sin_cache", "T")),
        min_outputs=1,
        outputs=(("output", "T"),),
        types={"T": _FLOATS, "M": _INT64},
        attributes={
            "num_heads": _I,
            "rotary_embedding_dim": _I,
            "interleaved": _I,
            "is_packed_batching": _I,
            "scale": _F,
        },
    ),
    ("com.microsoft", "SkipLayerNormalization"): ContribSchema(
        min_inputs=3,
        inputs=(("input", "T"), ("skip", "T"), ("gamma", "T"), ("beta", "T"), ("bias", "T")),
        min_outputs=1,
        outputs=_SKIP_NORM_OUTPUTS,
        types={"T": _FLOATS, "U": _FLOAT32},
        attributes={"epsilon": _F},
    ),
    ("com.microsoft", "SkipSimplifiedLayerNormalization"): ContribSchema(
        min_inputs=3,
        inputs=(("input", "T"), ("skip", "T"), ("gamma", "T"), ("bias", "T")),
        min_outputs=1,
        outputs=_SKIP_NORM_OUTPUTS,
        types={"T": _FLOATS, "U": _FLOAT32},
        attributes={"epsilon": _F},
    ),
    ("com.microsoft", "GatherBlockQuantized"): ContribSchema(
        min_inputs=3,
        inputs=(("data", "T1"), ("indices", "Tind"), ("scales", "T2"), ("zero_points", "T1")),
        min_outputs=1,
        outputs=(("output", "T2"),),
        types={"T1": _PACKED, "T2": _FLOATS, "Tind": _INT32 | _INT64},
        attributes={"bits": _I, "block_size": _I, "quantize_axis": _I, "gather_axis": _I},
    ),
    # onnxruntime registers this contrib op in the default ONNX domain, where onnx has no schema for it
    ("", "SimplifiedLayerNormalization"): ContribSchema(
        min_inputs=2,
        inputs=(("X", "T"), ("scale", "V")),
        min_outputs=1,
        outputs=(("Y", "V"), ("inv_std_var", "U")),
        types={"T": _NORM_FLOATS, "V": _NORM_FLOATS, "U": frozenset({TensorProto.FLOAT, TensorProto.DOUBLE})},
        attributes={"axis": _I, "epsilon": _F, "stash_type": _I},
    ),
}


def contrib_schema(domain: str, op_type: str) -> ContribSchema | None:
    """The table's row for (domain, op_type); com.microsoft ops only exist at opset version 1."""
    return CONTRIB_SCHEMAS.get(("" if domain == "ai.onnx" else domain, op_type))
