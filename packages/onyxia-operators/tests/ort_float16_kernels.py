"""Which ops onnxruntime's CPU EP runs in float16, found by asking it: the data behind
`MatchOnnxruntimeCpuFloat16`.

For every op Onyxia registers, `derive_ort_f16_kernels` builds a one-node model whose float inputs are
float16, lets onnxruntime initialize it with graph optimizations off and reads back the model it saved
(`optimized_model_filepath`). Its InsertCastTransformer runs even then, so the saved graph says what
the CPU EP did with the node:

- ``"float16"``: the node is there and no Cast was inserted (a float16 kernel exists);
- ``"float32"``: Casts named ``InsertedPrecisionFreeCast_*`` wrap it (no float16 kernel);
- ``"inlined"``: the node is gone, replaced by its ONNX function body (no kernel at all for float16);
- ``"invalid"``: float16 is not a type the op's schema allows, or the session failed;
- ``"no float16 input"``: the op's inputs cannot be float16 (And, Not, ConstantOfShape ...), so no
  Cast is ever inserted before it.

Run ``python packages/onyxia-operators/tests/ort_float16_kernels.py`` to print the table the pass's
`_FLOAT16_KERNELS` / `_FLOAT32_ONLY` / `_INLINED` sets were copied from; the test
`test_the_kernel_tables_match_this_onnxruntime` re-derives them to catch a newer onnxruntime's drift.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from oracle import make_model

__all__ = ["SPECS", "classify", "derive_ort_f16_kernels", "optimized_model", "spec_model"]

H = np.float16
MS = "com.microsoft"


def _x(*shape: int) -> np.ndarray:
    return np.linspace(-1, 1, int(np.prod(shape)), dtype=np.float32).reshape(shape).astype(H)


def _i64(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


def _spec(inputs: dict[str, Any], attrs: dict[str, Any] | None = None, **options: Any) -> dict[str, Any]:
    """One op's plausible float16 inputs and attributes; `options` go to `make_model`."""
    return {"inputs": inputs, "attrs": attrs or {}, **options}


_UNARY = "Abs Ceil Cos Erf Exp Floor Identity IsNaN Log Neg Reciprocal Relu Round Sigmoid Sign Sin Softplus Sqrt Tanh"
_BINARY = "Add Div Equal Greater GreaterOrEqual Less LessOrEqual Max Mean Min Mul Pow Sub Sum"
_REDUCE = "L1 L2 LogSum LogSumExp Max Mean Min Prod Sum SumSquare"
_POOL = {"kernel_shape": [2, 2]}
_QUANT = {"B": np.zeros((4, 1, 8), np.uint8), "scales": np.ones(4, H)}
_GQA = {"num_heads": 2, "kv_num_heads": 1}

# (domain, op_type) -> spec. Inputs named in `initializers` are initializers (ops that need constants)
SPECS: dict[tuple[str, str], dict[str, Any]] = {
    **{("", op): _spec({"x": _x(2, 3)}) for op in _UNARY.split()},
    **{("", op): _spec({"a": _x(2, 3), "b": _x(2, 3)}) for op in _BINARY.split()},
    **{("", f"Reduce{r}"): _spec({"x": _x(2, 3), "axes": _i64(1)}, initializers=["axes"]) for r in _REDUCE.split()},
    **{("", op): _spec({"x": _x(1, 1, 4, 4)}) for op in ("GlobalAveragePool", "GlobalLpPool", "GlobalMaxPool")},
    **{("", op): _spec({"x": _x(1, 1, 4, 4)}, _POOL) for op in ("AveragePool", "LpPool", "MaxPool")},
    **{("", op): _spec({"a": np.ones((2, 3), bool), "b": np.ones((2, 3), bool)}) for op in ("And", "Or", "Xor")},
    **{("", f"Bitwise{op}"): _spec({"a": _i64(1, 2), "b": _i64(3, 4)}) for op in ("And", "Or", "Xor")},
    ("", "Not"): _spec({"x": np.ones(3, bool)}),
    ("", "ArgMax"): _spec({"x": _x(2, 3)}, {"axis": 1}),
    ("", "ArgMin"): _spec({"x": _x(2, 3)}, {"axis": 1}),
    ("", "BatchNormalization"): _spec({"x": _x(1, 2, 3, 3), **{k: np.ones(2, H) for k in ("s", "b", "m", "v")}}),
    ("", "Cast"): _spec({"x": _x(2, 3)}, {"to": onnx.TensorProto.FLOAT}),
    ("", "CastLike"): _spec({"x": _x(2, 3), "like": np.zeros(1, np.float32)}),
    ("", "Clip"): _spec({"x": _x(2, 3), "lo": H(-0.5), "hi": H(0.5)}, initializers=["lo", "hi"]),
    ("", "Concat"): _spec({"a": _x(2, 3), "b": _x(2, 3)}, {"axis": 0}),
    ("", "Constant"): _spec({}, {"value": onnx.numpy_helper.from_array(_x(2, 3))}),
    ("", "ConstantOfShape"): _spec({"shape": _i64(2, 3)}, {"value": onnx.numpy_helper.from_array(np.ones(1, H))}),
    ("", "Conv"): _spec({"x": _x(1, 2, 4, 4), "w": _x(3, 2, 3, 3)}),
    ("", "ConvTranspose"): _spec({"x": _x(1, 2, 4, 4), "w": _x(2, 3, 3, 3)}),
    ("", "CumSum"): _spec({"x": _x(2, 3), "axis": np.array(1, np.int64)}, initializers=["axis"]),
    ("", "DepthToSpace"): _spec({"x": _x(1, 4, 2, 2)}, {"blocksize": 2}),
    ("", "SpaceToDepth"): _spec({"x": _x(1, 1, 4, 4)}, {"blocksize": 2}),
    ("", "Expand"): _spec({"x": _x(3, 1), "shape": _i64(2, 3, 4)}, initializers=["shape"]),
    ("", "Flatten"): _spec({"x": _x(2, 3, 4)}, {"axis": 1}),
    ("", "Gather"): _spec({"x": _x(3, 4), "i": _i64(2, 0)}),
    ("", "GatherElements"): _spec({"x": _x(3, 4), "i": np.zeros((3, 4), np.int64)}),
    ("", "GatherND"): _spec({"x": _x(2, 2), "i": np.zeros((2, 2), np.int64)}),
    ("", "Gelu"): _spec({"x": _x(2, 3)}),
    ("", "LayerNormalization"): _spec({"x": _x(2, 4), "s": np.ones(4, H), "b": np.zeros(4, H)}),
    ("", "LeakyRelu"): _spec({"x": _x(2, 3)}, {"alpha": 0.1}),
    ("", "LogSoftmax"): _spec({"x": _x(2, 3)}, {"axis": -1}),
    ("", "Softmax"): _spec({"x": _x(2, 3)}, {"axis": -1}),
    ("", "MatMul"): _spec({"a": _x(2, 3), "b": _x(3, 4)}),
    ("", "Mod"): _spec({"a": _x(2, 3), "b": np.full((2, 3), 0.3, H)}, {"fmod": 1}),
    ("", "OneHot"): _spec({"i": _i64(0, 2), "depth": _i64(3), "values": np.array([0, 1], H)}, initializers=["depth"]),
    ("", "Pad"): _spec({"x": _x(2, 3), "pads": _i64(1, 1, 1, 1), "c": H(0)}, initializers=["pads", "c"]),
    ("", "RMSNormalization"): _spec({"x": _x(2, 4), "s": np.ones(4, H)}, opset=23),
    ("", "Range"): _spec({"a": H(0), "b": H(4), "d": H(1)}),
    ("", "Reshape"): _spec({"x": _x(2, 3), "shape": _i64(3, 2)}, initializers=["shape"]),
    ("", "Resize"): _spec(
        {"x": _x(1, 1, 2, 2), "roi": None, "scales": np.array([1, 1, 2, 2], np.float32)}, initializers=["scales"]
    ),
    ("", "Scatter"): _spec({"x": _x(3, 3), "i": np.zeros((1, 3), np.int64), "u": _x(1, 3)}, opset=10),
    ("", "ScatterElements"): _spec({"x": _x(3, 3), "i": np.zeros((1, 3), np.int64), "u": _x(1, 3)}),
    ("", "ScatterND"): _spec({"x": _x(4), "i": np.array([[1]], np.int64), "u": _x(1)}),
    ("", "Shape"): _spec({"x": _x(2, 3)}),
    ("", "SimplifiedLayerNormalization"): _spec({"x": _x(2, 4), "s": np.ones(4, H)}, {"axis": -1}),
    ("", "Slice"): _spec({"x": _x(4, 4), "s": _i64(1), "e": _i64(3), "a": _i64(0)}, initializers=["s", "e", "a"]),
    ("", "Split"): _spec({"x": _x(4, 2), "split": _i64(2, 2)}, {"axis": 0}, initializers=["split"], num_outputs=2),
    ("", "Squeeze"): _spec({"x": _x(1, 3), "axes": _i64(0)}, initializers=["axes"]),
    ("", "Unsqueeze"): _spec({"x": _x(3), "axes": _i64(0)}, initializers=["axes"]),
    ("", "Tile"): _spec({"x": _x(2, 3), "repeats": _i64(2, 1)}, initializers=["repeats"]),
    ("", "Transpose"): _spec({"x": _x(2, 3)}, {"perm": [1, 0]}),
    ("", "Trilu"): _spec({"x": _x(3, 3)}),
    ("", "Where"): _spec({"c": np.ones((2, 3), bool), "a": _x(2, 3), "b": _x(2, 3)}),
    (MS, "GatherBlockQuantized"): _spec(
        {"data": np.zeros((4, 8), np.uint8), "i": _i64(1), "scales": np.ones((4, 1), H)},
        {"block_size": 16, "bits": 4, "quantize_axis": 1},
        initializers=["data", "scales"],
    ),
    (MS, "GroupQueryAttention"): _spec(
        {
            **{k: _x(1, 2, w) for k, w in (("q", 32), ("k", 16), ("v", 16))},
            **{k: _x(1, 1, 0, 16) for k in ("past_k", "past_v")},
            "seqlens_k": np.array([1], np.int32),
            "total": np.array(2, np.int32),
        },
        _GQA,
        num_outputs=3,
    ),
    (MS, "MatMulNBits"): _spec({"a": _x(1, 16), **_QUANT}, {"K": 16, "N": 4, "bits": 4, "block_size": 16}),
    (MS, "RotaryEmbedding"): _spec({"x": _x(1, 2, 16), "pos": _i64(0, 1).reshape(1, 2), "c": _x(8, 4), "s": _x(8, 4)}),
    (MS, "SkipLayerNormalization"): _spec({"x": _x(1, 2, 4), "skip": _x(1, 2, 4), "g": np.ones(4, H)}),
    (MS, "SkipSimplifiedLayerNormalization"): _spec({"x": _x(1, 2, 4), "skip": _x(1, 2, 4), "g": np.ones(4, H)}),
}


def optimized_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """The graph onnxruntime's CPU EP runs for `model` with graph optimizations off: what
    InsertCastTransformer (and function inlining) made of it. Raises if the session fails."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.optimized_model_filepath = str(Path(tmp, "optimized.onnx"))
        options.log_severity_level = 4
        ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return onnx.load(options.optimized_model_filepath)


def classify(optimized: onnx.ModelProto, op_type: str) -> str:
    """What onnxruntime's InsertCastTransformer did to the model's one `op_type` node."""
    if op_type not in [n.op_type for n in optimized.graph.node]:
        return "inlined"
    inserted = any(n.name.startswith("InsertedPrecisionFreeCast_") for n in optimized.graph.node)
    return "float32" if inserted else "float16"


def spec_model(domain: str, op_type: str, opset: int | None = None) -> onnx.ModelProto:
    """The one-node float16 model of SPECS[(domain, op_type)], at `opset` if given."""
    spec = dict(SPECS[(domain, op_type)])
    inputs, attrs = spec.pop("inputs"), spec.pop("attrs")
    spec["opset"] = opset or spec.get("opset", 21)
    return make_model(op_type, inputs, attrs, domain=domain, **spec)


def derive_one(domain: str, op_type: str, opset: int | None = None) -> str:
    inputs = SPECS[(domain, op_type)]["inputs"].values()
    if not any(v is not None and v.dtype == np.float16 for v in inputs):
        return "no float16 input"  # never wrapped, whatever the kernel: casts are only inserted on inputs
    try:
        return classify(optimized_model(spec_model(domain, op_type, opset)), op_type)
    except Exception:  # float16 is not allowed for this op, or no kernel at all
        return "invalid"


def derive_ort_f16_kernels(ops: list[tuple[str, str]] | None = None) -> dict[tuple[str, str], str]:
    """(domain, op_type) -> "float16" | "float32" | "inlined" | "invalid" | "no float16 input" for this
    onnxruntime, at opset 21 (the ops' specs may ask for another)."""
    return {op: derive_one(*op) for op in (ops or sorted(SPECS))}


if __name__ == "__main__":
    import onnxruntime

    table = derive_ort_f16_kernels()
    print(f"onnxruntime {onnxruntime.__version__}")
    for kind in ("float16", "float32", "inlined", "invalid", "no float16 input"):
        names = [f"({d!r}, {o!r})" for (d, o), k in table.items() if k == kind]
        print(f"{kind} ({len(names)}):\n    " + ",\n    ".join(names))
