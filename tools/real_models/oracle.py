"""onnxruntime's outputs on fixed inputs, saved beside each model as `<name>.npz`.

The archive holds `input.<graph input>` and `output.<graph output>` arrays; the suite feeds the first
to Onyxia and compares with the second. Inputs are drawn from the graph's own input list (names,
dtypes, dims), seeded, with the dim values of `DIMS`, so every file gets what its exporter declared.
Whisper's decoders are fed a real chain: the encoder's output, then the first decoder step's
`present.*` as the next step's `past_key_values.*` (so the past has the values a session would hold).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

__all__ = ["DIMS", "make_inputs", "ort_outputs", "save_record"]

# Symbolic dims of the optimum exports (torch-exported files carry their own example shapes; the
# decoders' encoder/past lengths come from the arrays they are given).
DIMS = {
    "batch_size": 2,
    "sequence_length": 16,
    "num_channels": 3,
    "height": 32,
    "width": 32,
    "decoder_sequence_length": 4,
}

_NP = {
    onnx.TensorProto.FLOAT: np.float32,
    onnx.TensorProto.INT64: np.int64,
    onnx.TensorProto.INT32: np.int32,
    onnx.TensorProto.BOOL: np.bool_,
}


def _shape(value: onnx.ValueInfoProto, overrides: dict[str, int]) -> list[int]:
    dims = []
    for d in value.type.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            dims.append(d.dim_value)
        elif d.dim_param in overrides or d.dim_param in DIMS:
            dims.append(overrides.get(d.dim_param, DIMS.get(d.dim_param, 0)))
        else:
            raise ValueError(f"input {value.name!r}: no size for dim {d.dim_param!r}; add it to DIMS")
    return dims


def _fill(name: str, shape: list[int], dtype: type, rng: np.random.Generator) -> np.ndarray:
    """Token ids below the smallest vocabulary (512); masks with padding in the last row."""
    if dtype is np.bool_:
        return np.zeros(shape, dtype=np.bool_)
    if name == "attention_mask":
        mask = np.ones(shape, dtype=dtype)
        if shape[0] > 1:
            mask[-1, shape[1] // 2 :] = 0
        return mask
    if name == "token_type_ids":
        types = np.zeros(shape, dtype=dtype)
        types[:, shape[1] // 2 :] = 1
        return types
    if np.issubdtype(dtype, np.integer):
        return rng.integers(3, 500, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(np.float32)


def make_inputs(
    path: Path, seed: int, given: dict[str, np.ndarray] | None = None, overrides: dict[str, int] | None = None
) -> dict[str, np.ndarray]:
    """Seeded inputs for every graph input of `path`; `given` arrays are used as they are."""
    rng = np.random.default_rng(seed)
    model = onnx.load(str(path), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    out: dict[str, np.ndarray] = {}
    for value in model.graph.input:
        if value.name in inits:
            continue
        if given and value.name in given:
            out[value.name] = given[value.name]
            continue
        dtype = _NP[value.type.tensor_type.elem_type]
        out[value.name] = _fill(value.name, _shape(value, overrides or {}), dtype, rng)
    return out


def ort_outputs(path: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """onnxruntime CPU, default graph optimizations, one thread per core: what a user runs."""
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, inputs)))


def save_record(path: Path, inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> Path:
    """`<model>.npz` beside the model (compressed: masks and ids shrink, random floats do not)."""
    npz = path.with_suffix(".npz")
    arrays = {f"input.{k}": v for k, v in inputs.items()} | {f"output.{k}": v for k, v in outputs.items()}
    np.savez_compressed(npz, **arrays)  # type: ignore[arg-type]
    return npz
