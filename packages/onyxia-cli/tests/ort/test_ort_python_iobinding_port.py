"""onnxruntime's I/O binding tests (onnxruntime/test/python/onnxruntime_test_python_iobinding.py) on onyxia.ort.

I/O binding is how an onnxruntime user keeps tensors on the device between runs (a decode loop's KV
cache): inputs bound as device OrtValues or raw device pointers, outputs left on the device or written
into preallocated OrtValues. Each test keeps onnxruntime's name and assertions; onnxruntime loops over
("cuda", CUDA EP) and ("dml", DirectML EP), Onyxia has the one pair ("webgpu", its provider). Where the
original builds pybind objects (``SessionIOBinding(sess._sess)``, ``C_OrtDevice``, ``C_OrtValue``) these
use the public `io_binding()` / `OrtValue` calls that wrap them. PORTED.md lists what is not ported.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from numpy.testing import assert_almost_equal
from onnx import TensorProto, helper
from onnx.defs import onnx_opset_version

import onyxia.ort as ort

PROVIDER = "OnyxiaWebGPUExecutionProvider"  # onnxruntime: "CUDAExecutionProvider" / "DmlExecutionProvider"
DEVICE = "webgpu"  # onnxruntime: "cuda" / "dml"


def _make_models() -> ModuleType:
    path = Path(__file__).parent / "data" / "make_models.py"
    spec = importlib.util.spec_from_file_location("ort_port_make_models", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def get_name(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], str]:
    """onnxruntime's helper.get_name: the path of a test model (here rebuilt into a temporary folder)."""
    folder = _make_models().write_all(tmp_path_factory.mktemp("ort_testdata"))
    return lambda name: str(folder / name)


def _create_ortvalue_input_on_gpu(device: str) -> ort.OrtValue:
    return ort.OrtValue.ortvalue_from_numpy(np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=np.float32), device, 0)


def _create_ortvalue_alternate_input_on_gpu(device: str) -> ort.OrtValue:
    return ort.OrtValue.ortvalue_from_numpy(
        np.array([[2.0, 4.0], [6.0, 8.0], [10.0, 12.0]], dtype=np.float32), device, 0
    )


def _create_uninitialized_ortvalue_input_on_gpu(device: str) -> ort.OrtValue:
    return ort.OrtValue.ortvalue_from_shape_and_type([3, 2], np.float32, device, 0)


def _create_numpy_input() -> np.ndarray:
    return np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=np.float32)


def _create_expected_output() -> np.ndarray:
    return np.array([[1.0, 4.0], [9.0, 16.0], [25.0, 36.0]], dtype=np.float32)


def _create_expected_output_alternate() -> np.ndarray:
    return np.array([[2.0, 8.0], [18.0, 32.0], [50.0, 72.0]], dtype=np.float32)


def _identity_model(onnx_dtype: int, width: int) -> bytes:
    """onnxruntime's inline model: Y = Identity(X), X and Y [None, width] of one element type."""
    x = helper.make_tensor_value_info("X", onnx_dtype, [None, width])
    y = helper.make_tensor_value_info("Y", onnx_dtype, [None, width])
    graph_def = helper.make_graph([helper.make_node("Identity", ["X"], ["Y"])], "lr", [x], [y], [])
    model_def = helper.make_model(
        graph_def,
        producer_name="dummy",
        ir_version=7,
        producer_version="0",
        opset_imports=[helper.make_operatorsetid("", onnx_opset_version())],
    )
    return model_def.SerializeToString()


def test_bind_input_to_cpu_arr(get_name: Callable[[str], str]) -> None:
    session = ort.InferenceSession(get_name("mul_1.onnx"), providers=ort.get_available_providers())
    io_binding = session.io_binding()

    # bind a numpy array (on the CPU) to wherever the model needs it
    io_binding.bind_cpu_input("X", _create_numpy_input())
    # bind the output to the CPU
    io_binding.bind_output("Y")
    session.run_with_iobinding(io_binding)
    io_binding.synchronize_outputs()

    # outputs bound to the device are copied to the host here
    ort_output = io_binding.copy_outputs_to_cpu()[0]
    assert np.array_equal(_create_expected_output(), ort_output)


BIND_DTYPES = [
    np.float32,
    np.float64,
    np.int32,
    np.uint32,
    np.int64,
    np.uint64,
    np.int16,
    np.uint16,
    np.int8,
    np.uint8,
    np.float16,
    np.bool_,
]


@pytest.mark.parametrize("inner_device", ["cpu", DEVICE])
@pytest.mark.parametrize("dtype", BIND_DTYPES, ids=lambda d: np.dtype(d).name)
def test_bind_input_types(dtype: type, inner_device: str) -> None:
    x: np.ndarray = np.arange(8).reshape((-1, 2)).astype(dtype)
    sess = ort.InferenceSession(
        _identity_model(helper.np_dtype_to_tensor_dtype(x.dtype), x.shape[1]), providers=[PROVIDER]
    )

    bind = sess.io_binding()
    ort_value = ort.OrtValue.ortvalue_from_numpy(x, inner_device, 0)
    bind.bind_ortvalue_input("X", ort_value)
    bind.bind_output("Y", inner_device)
    sess.run_with_iobinding(bind)
    # onnxruntime's pybind binding answers an OrtValueVector; the public get_outputs() a list of OrtValues
    ortvaluevector = bind.get_outputs()
    assert all(isinstance(value, ort.OrtValue) for value in ortvaluevector)
    y = bind.get_outputs()[0].numpy()
    assert_almost_equal(x, y)

    bind = sess.io_binding()
    bind.bind_input("X", inner_device, 0, dtype, x.shape, ort_value.data_ptr())
    bind.bind_output("Y", inner_device)
    sess.run_with_iobinding(bind)
    y = bind.get_outputs()[0].numpy()
    assert_almost_equal(x, y)


SUPPORTED_BY_NUMPY = [
    TensorProto.FLOAT,
    TensorProto.UINT8,
    TensorProto.INT8,
    TensorProto.UINT16,
    TensorProto.INT16,
    TensorProto.INT32,
    TensorProto.INT64,
    TensorProto.BOOL,
    TensorProto.FLOAT16,
    TensorProto.DOUBLE,
    TensorProto.UINT32,
    TensorProto.UINT64,
]


@pytest.mark.parametrize("onnx_dtype", SUPPORTED_BY_NUMPY, ids=lambda t: TensorProto.DataType.Name(t))
def test_bind_onnx_types_supported_by_numpy(onnx_dtype: int) -> None:
    # onnxruntime runs this one on the CPU device only; so does the port (host pointers, ONNX type codes)
    np_dtype = helper.tensor_dtype_to_np_dtype(onnx_dtype)
    x = np.arange(8).reshape((-1, 2)).astype(np_dtype)

    ort_value_x = ort.OrtValue.ortvalue_from_numpy(x, "cpu", 0)
    ort_value_y = ort.OrtValue.ortvalue_from_shape_and_type(x.shape, onnx_dtype)

    sess = ort.InferenceSession(_identity_model(onnx_dtype, x.shape[1]), providers=[PROVIDER])
    bind = sess.io_binding()
    bind.bind_input("X", "cpu", 0, onnx_dtype, x.shape, ort_value_x.data_ptr())
    bind.bind_output("Y", "cpu", 0, onnx_dtype, x.shape, ort_value_y.data_ptr())
    sess.run_with_iobinding(bind)
    assert_almost_equal(x, ort_value_y.numpy())


def test_bind_input_only(get_name: Callable[[str], str]) -> None:
    input = _create_ortvalue_input_on_gpu(DEVICE)  # noqa: A001 - onnxruntime's test's own name
    session = ort.InferenceSession(get_name("mul_1.onnx"), providers=ort.get_available_providers())
    io_binding = session.io_binding()

    # bind the input on the device by its pointer
    io_binding.bind_input("X", DEVICE, 0, np.float32, [3, 2], input.data_ptr())
    io_binding.synchronize_inputs()
    # bind the output to the CPU
    io_binding.bind_output("Y")
    session.run_with_iobinding(io_binding)
    io_binding.synchronize_outputs()

    ort_output = io_binding.copy_outputs_to_cpu()[0]
    assert np.array_equal(_create_expected_output(), ort_output)


def test_bind_input_and_preallocated_output(get_name: Callable[[str], str]) -> None:
    input = _create_ortvalue_input_on_gpu(DEVICE)  # noqa: A001
    session = ort.InferenceSession(get_name("mul_1.onnx"), providers=ort.get_available_providers())
    io_binding = session.io_binding()

    io_binding.bind_input("X", DEVICE, 0, np.float32, [3, 2], input.data_ptr())
    # bind the output into a buffer allocated on the device beforehand
    output = _create_uninitialized_ortvalue_input_on_gpu(DEVICE)
    io_binding.bind_output("Y", DEVICE, 0, np.float32, [3, 2], output.data_ptr())
    io_binding.synchronize_inputs()
    session.run_with_iobinding(io_binding)
    io_binding.synchronize_outputs()

    ort_output_vals = io_binding.copy_outputs_to_cpu()[0]
    assert np.array_equal(_create_expected_output(), ort_output_vals)

    # the run wrote into the preallocated buffer itself
    ort_output_vals_in_cpu = output.numpy()
    assert np.array_equal(_create_expected_output(), ort_output_vals_in_cpu)


def test_bind_input_and_non_preallocated_output(get_name: Callable[[str], str]) -> None:
    session = ort.InferenceSession(get_name("mul_1.onnx"), providers=ort.get_available_providers())
    io_binding = session.io_binding()

    input = _create_ortvalue_input_on_gpu(DEVICE)  # noqa: A001
    io_binding.bind_input("X", DEVICE, 0, np.float32, [3, 2], input.data_ptr())
    # bind the output to the device, allocated by the session
    io_binding.bind_output("Y", DEVICE)
    io_binding.synchronize_inputs()
    session.run_with_iobinding(io_binding)
    io_binding.synchronize_outputs()

    # an OrtValue whose data the session allocated on the device
    ort_outputs = io_binding.get_outputs()
    assert len(ort_outputs) == 1
    assert ort_outputs[0].device_name() == DEVICE
    assert np.array_equal(_create_expected_output(), ort_outputs[0].numpy())

    # asking again answers the same
    ort_outputs = io_binding.get_outputs()
    assert len(ort_outputs) == 1
    assert ort_outputs[0].device_name() == DEVICE
    assert np.array_equal(_create_expected_output(), ort_outputs[0].numpy())

    # rebinding the input and running again updates the bound output
    input = _create_ortvalue_alternate_input_on_gpu(DEVICE)  # noqa: A001
    io_binding.bind_input("X", DEVICE, 0, np.float32, [3, 2], input.data_ptr())
    io_binding.synchronize_inputs()
    session.run_with_iobinding(io_binding)
    io_binding.synchronize_outputs()

    ort_outputs = io_binding.get_outputs()
    assert len(ort_outputs) == 1
    assert ort_outputs[0].device_name() == DEVICE
    assert np.array_equal(_create_expected_output_alternate(), ort_outputs[0].numpy())


def test_bind_input_and_bind_output_with_ortvalues(get_name: Callable[[str], str]) -> None:
    session = ort.InferenceSession(get_name("mul_1.onnx"), providers=ort.get_available_providers())
    io_binding = session.io_binding()

    input_ortvalue = _create_ortvalue_input_on_gpu(DEVICE)
    io_binding.bind_ortvalue_input("X", input_ortvalue)
    output_ortvalue = _create_uninitialized_ortvalue_input_on_gpu(DEVICE)
    io_binding.bind_ortvalue_output("Y", output_ortvalue)
    io_binding.synchronize_inputs()
    session.run_with_iobinding(io_binding)
    io_binding.synchronize_outputs()

    # the bound output OrtValue holds the result
    assert np.array_equal(_create_expected_output(), output_ortvalue.numpy())

    # bind another OrtValue as the input; the same output OrtValue receives the new result
    input_ortvalue_2 = _create_ortvalue_alternate_input_on_gpu(DEVICE)
    io_binding.bind_ortvalue_input("X", input_ortvalue_2)
    io_binding.synchronize_inputs()
    session.run_with_iobinding(io_binding)
    io_binding.synchronize_outputs()

    assert np.array_equal(_create_expected_output_alternate(), output_ortvalue.numpy())
