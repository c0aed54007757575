"""Write the built-in demo model `tiny_attention.onnx` and its default inputs beside this file.

The model is a one-head attention over a learned memory (keys and values are weights, so no
Transpose is needed) with a residual, built only from ops every Onyxia install supports:

    x[1, sequence_length, 16] -> Reshape[-1, 16] -> MatMul Wq -> Add bq -> MatMul K^T -> Mul 1/sqrt(d)
      -> Softmax -> MatMul V -> Add x -> Reshape[1, -1, 16] = y        (and the Softmax as `attention`)

Regenerate with ``python -m onyxia.cli.data.make_demo_model``; weights come from a fixed seed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import onnx

__all__ = ["DEMO_INPUTS", "DEMO_MODEL", "build_demo_model", "demo_inputs", "main"]

DEMO_MODEL = "tiny_attention.onnx"
DEMO_INPUTS = "tiny_attention_inputs.npz"

_D_MODEL, _D_HEAD, _MEMORY = 16, 32, 8
_OPSET, _IR_VERSION = 17, 9  # IR 9 loads in every onnxruntime >= 1.15


def build_demo_model(seed: int = 0) -> onnx.ModelProto:
    """The demo model; onnx is imported here so importing this module stays cheap."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)

    def weight(name: str, *shape: int, scale: float = 0.3) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    initializers = [
        weight("w_q", _D_MODEL, _D_HEAD),
        weight("b_q", _D_HEAD, scale=0.1),
        weight("memory_keys_t", _D_HEAD, _MEMORY),
        weight("memory_values", _MEMORY, _D_MODEL),
        numpy_helper.from_array(np.array(1.0 / np.sqrt(_D_HEAD), dtype=np.float32), "scale"),
        numpy_helper.from_array(np.array([-1, _D_MODEL], dtype=np.int64), "rows_shape"),
        numpy_helper.from_array(np.array([1, -1, _D_MODEL], dtype=np.int64), "out_shape"),
        numpy_helper.from_array(np.array([1, -1, _MEMORY], dtype=np.int64), "attn_shape"),
    ]
    nodes = [
        helper.make_node("Reshape", ["x", "rows_shape"], ["rows"], name="flatten"),
        helper.make_node("MatMul", ["rows", "w_q"], ["q_raw"], name="query/MatMul"),
        helper.make_node("Add", ["q_raw", "b_q"], ["q"], name="query/Add"),
        helper.make_node("MatMul", ["q", "memory_keys_t"], ["scores_raw"], name="scores/MatMul"),
        helper.make_node("Mul", ["scores_raw", "scale"], ["scores"], name="scores/Mul"),
        helper.make_node("Softmax", ["scores"], ["probs"], name="softmax", axis=-1),
        helper.make_node("MatMul", ["probs", "memory_values"], ["mixed"], name="mix/MatMul"),
        helper.make_node("Add", ["mixed", "rows"], ["residual"], name="residual/Add"),
        helper.make_node("Reshape", ["residual", "out_shape"], ["y"], name="unflatten"),
        helper.make_node("Reshape", ["probs", "attn_shape"], ["attention"], name="attention/Reshape"),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_attention",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "sequence_length", _D_MODEL])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "sequence_length", _D_MODEL]),
            helper.make_tensor_value_info("attention", TensorProto.FLOAT, [1, "sequence_length", _MEMORY]),
        ],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)], producer_name="onyxia-cli")
    model.ir_version = _IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model


def demo_inputs(seed: int = 1, sequence_length: int = 4) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((1, sequence_length, _D_MODEL)).astype(np.float32)}


def main(folder: Path | None = None) -> None:
    import onnx

    folder = folder or Path(__file__).parent
    onnx.save(build_demo_model(), folder / DEMO_MODEL)
    inputs: dict[str, Any] = demo_inputs()  # Any: numpy's stubs read **kwargs as allow_pickle
    np.savez(folder / DEMO_INPUTS, **inputs)


if __name__ == "__main__":
    main()
