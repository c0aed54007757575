"""BatchNormalization against onnxruntime: inference mode, and training mode (batch statistics, and
the running statistics' update as outputs 1 and 2)."""

import numpy as np
import pytest
from oracle import check_op, compile_model, make_model

from onyxia.onnx.errors import ModelValidationError

RNG = np.random.default_rng(0)


def _inputs(shape: tuple[int, ...], dtype: type = np.float32, param_dtype: type | None = None) -> dict:
    channels = shape[1]
    params = [RNG.standard_normal(channels) for _ in range(3)] + [RNG.random(channels) + 0.5]
    values = {"x": RNG.standard_normal(shape).astype(dtype)}
    values.update({k: v.astype(param_dtype or dtype) for k, v in zip(("scale", "bias", "mean", "var"), params)})
    return values


@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 5), (2, 4, 3, 5)], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_matches_onnxruntime(shape: tuple[int, ...], dtype: type) -> None:
    check_op("BatchNormalization", _inputs(shape, dtype), {"epsilon": 1e-3}, opset=15)


@pytest.mark.parametrize("opset", [9, 14])
def test_older_opsets(opset: int) -> None:
    check_op("BatchNormalization", _inputs((2, 3, 4)), opset=opset)


def test_float32_parameters_for_float16_data() -> None:
    """Opset 15 lets scale/bias (T1) and the statistics (T2) differ from X."""
    check_op("BatchNormalization", _inputs((2, 3, 4), np.float16, np.float32), opset=15)


def test_symbolic_batch() -> None:
    check_op("BatchNormalization", _inputs((3, 4, 5)), opset=15, dim_params={"x": ["batch", 4, "width"]})


def test_known_inputs_fold_to_no_gpu_step() -> None:
    inputs = _inputs((2, 3, 4))
    model = make_model("BatchNormalization", inputs, opset=15, initializers=list(inputs))
    assert compile_model(model).operations == []
    check_op("BatchNormalization", inputs, opset=15, initializers=list(inputs))


def test_training_mode_is_refused_naming_node_op_and_attribute() -> None:
    """Training mode with one output is an invalid model (onnxruntime refuses it too): refused at load."""
    model = make_model("BatchNormalization", _inputs((2, 3, 4)), {"training_mode": 1}, opset=15)
    model.graph.node[0].name = "bn_3"
    with pytest.raises(ModelValidationError, match=r"BatchNormalization, node name: bn_3.*Training_mode"):
        compile_model(model)


@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 5), (4, 2, 3, 5)], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_training_mode_matches_onnxruntime(shape: tuple[int, ...], dtype: type) -> None:
    attrs = {"training_mode": 1, "epsilon": 1e-2, "momentum": 0.8}
    check_op("BatchNormalization", _inputs(shape, dtype), attrs, opset=15, num_outputs=3)


def test_training_mode_opset_14_and_float32_statistics_for_float16_data() -> None:
    check_op("BatchNormalization", _inputs((3, 4, 6)), {"training_mode": 1}, opset=14, num_outputs=3)
    inputs = _inputs((3, 4, 6), np.float16, np.float32)
    check_op("BatchNormalization", inputs, {"training_mode": 1}, opset=15, num_outputs=3)


def test_training_mode_with_known_inputs_folds() -> None:
    inputs = _inputs((2, 3, 4))
    attrs = {"training_mode": 1, "momentum": 0.7}
    model = make_model("BatchNormalization", inputs, attrs, opset=15, num_outputs=3, initializers=list(inputs))
    assert compile_model(model).operations == []
    check_op("BatchNormalization", inputs, attrs, opset=15, num_outputs=3, initializers=list(inputs))
