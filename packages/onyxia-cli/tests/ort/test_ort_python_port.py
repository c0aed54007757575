"""onnxruntime's own Python API tests (onnxruntime/test/python/onnxruntime_test_python.py), run on onyxia.ort.

Each test keeps onnxruntime's name and asserts what onnxruntime's asserts, with `ort` bound to onyxia.ort:
the contract a package relies on when its `import onnxruntime` becomes `import onyxia.ort`. Hard-coded
expected values are onnxruntime's own. Where onnxruntime's test says "CUDAExecutionProvider" / "cuda",
these say Onyxia's provider / "webgpu"; where it reaches into pybind internals (``sess._sess``,
``_get_c_value``) these call the public method that wraps them. The models are onnxruntime's test
models rebuilt by data/make_models.py. PORTED.md lists every test of the original file: ported here, or
why it does not apply to a one-device WebGPU engine.
"""

from __future__ import annotations

import importlib.util
import pathlib
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import onnx
import pytest

import onyxia.ort as ort

PROVIDER = "OnyxiaWebGPUExecutionProvider"  # Onyxia's one provider, where onnxruntime's tests say CPU or CUDA
DEVICE = "webgpu"  # Onyxia's device, where onnxruntime's tests say "cuda"

X = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=np.float32)
X_SQUARED = np.array([[1.0, 4.0], [9.0, 16.0], [25.0, 36.0]], dtype=np.float32)


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


def run_model(session_object: ort.InferenceSession, run_options: ort.RunOptions) -> None:
    input_name = session_object.get_inputs()[0].name
    res = session_object.run([], {input_name: X}, run_options=run_options)
    np.testing.assert_allclose(res[0], X_SQUARED, rtol=1e-05, atol=1e-08)


# --- module functions --------------------------------------------------------------------------------


def test_get_version_string() -> None:
    assert ort.get_version_string() is not None


def test_get_build_info() -> None:
    assert ort.get_build_info() is not None
    assert "Build Info" in ort.get_build_info()


def test_get_providers(get_name: Callable[[str], str]) -> None:
    assert PROVIDER in ort.get_available_providers()
    # get_all_providers() is the default order, highest priority first; the last is the one every
    # session can fall back to (onnxruntime's CPU, Onyxia's own)
    assert ort.get_all_providers()[-1] == PROVIDER
    sess = ort.InferenceSession(get_name("mul_1.onnx"), providers=ort.get_available_providers())
    assert PROVIDER in sess.get_providers()


def test_enabling_and_disabling_telemetry() -> None:
    # no-ops in onnxruntime's non-Windows builds (and may be in some Windows builds): callable, not raising
    assert callable(ort.disable_telemetry_events) and callable(ort.enable_telemetry_events)
    ort.disable_telemetry_events()
    ort.enable_telemetry_events()


def test_run_device() -> None:
    device = ort.get_device()
    assert "CPU" in device or "GPU" in device


# --- InferenceSession construction and providers -----------------------------------------------------


def test_deserialization_from_path_object(get_name: Callable[[str], str]) -> None:
    # path object is allowed
    ort.InferenceSession(pathlib.Path(get_name("mul_1.onnx")), providers=ort.get_available_providers())


def test_set_providers(get_name: Callable[[str], str]) -> None:
    sess = ort.InferenceSession(get_name("mul_1.onnx"), providers=[PROVIDER])
    # confirm that Onyxia's provider is in the list of registered providers
    assert PROVIDER in sess.get_providers()
    # reset the session and register only that provider
    sess.set_providers([PROVIDER])
    assert sess.get_providers() == [PROVIDER]


def test_invalid_set_providers(get_name: Callable[[str], str]) -> None:
    with pytest.raises(RuntimeError) as context:
        sess = ort.InferenceSession(get_name("mul_1.onnx"), providers=["CPUExecutionProvider"])
        sess.set_providers(["InvalidProvider"])
    assert "Unknown Provider Type: InvalidProvider" in str(context.value)


def test_session_providers(get_name: Callable[[str], str]) -> None:
    # create a session from scratch, constrained to one provider
    sess = ort.InferenceSession(get_name("mul_1.onnx"), providers=[PROVIDER])
    assert sess.get_providers() == [PROVIDER]


# --- run ---------------------------------------------------------------------------------------------


def test_run_model(get_name: Callable[[str], str]) -> None:
    sess = ort.InferenceSession(get_name("mul_1.onnx"), providers=ort.get_available_providers())

    inputs = sess.get_inputs()
    assert len(inputs) == 1
    assert inputs[0].name == "X"
    assert inputs[0].shape == [3, 2]

    input_meminfos = sess.get_input_memory_infos()
    assert len(input_meminfos) == 1
    assert input_meminfos[0] is not None

    input_epdevices = sess.get_input_epdevices()
    # the entry may be None (null) but it should be present
    assert len(input_epdevices) == 1

    outputs = sess.get_outputs()
    assert len(outputs) == 1
    assert outputs[0].name == "Y"
    assert outputs[0].shape == [3, 2]

    output_meminfos = sess.get_output_memory_infos()
    assert len(output_meminfos) == 1
    assert output_meminfos[0] is not None

    res = sess.run([outputs[0].name], {inputs[0].name: X})
    np.testing.assert_allclose(res[0], X_SQUARED, rtol=1e-05, atol=1e-08)


def test_run_async(get_name: Callable[[str], str]) -> None:
    event = threading.Event()
    seen: list[tuple[list[np.ndarray] | None, object, str]] = []

    class MyData:
        def __init__(self, id: int) -> None:  # noqa: A002 - onnxruntime's test's own signature
            self.__id = id

        def get_id(self) -> int:
            return self.__id

    my_data = MyData(123456)

    def callback(res: list[np.ndarray] | None, data: MyData, err: str) -> None:
        seen.append((res, data, err))  # asserted below, on the test's thread
        event.set()

    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    sess = ort.InferenceSession(get_name("mul_1.onnx"), so, providers=ort.get_available_providers())
    sess.run_async(["Y"], {"X": X}, callback, my_data)

    event.wait(10)  # timeout in 10 sec
    assert event.is_set()
    [(res, data, err)] = seen
    assert len(err) == 0
    assert res is not None and len(res) == 1
    assert isinstance(data, MyData) and data.get_id() == 123456
    np.testing.assert_allclose(res[0], X_SQUARED, rtol=1e-05, atol=1e-08)


def test_run_model_from_bytes(get_name: Callable[[str], str]) -> None:
    content = Path(get_name("mul_1.onnx")).read_bytes()
    sess = ort.InferenceSession(content, providers=ort.get_available_providers())
    input_name = sess.get_inputs()[0].name
    assert input_name == "X"
    assert sess.get_inputs()[0].shape == [3, 2]
    output_name = sess.get_outputs()[0].name
    assert output_name == "Y"
    assert sess.get_outputs()[0].shape == [3, 2]
    res = sess.run([output_name], {input_name: X})
    np.testing.assert_allclose(res[0], X_SQUARED, rtol=1e-05, atol=1e-08)


def test_run_model2(get_name: Callable[[str], str]) -> None:
    sess = ort.InferenceSession(get_name("matmul_1.onnx"), providers=ort.get_available_providers())
    input_name = sess.get_inputs()[0].name
    assert input_name == "X"
    assert sess.get_inputs()[0].shape == [3, 2]
    output_name = sess.get_outputs()[0].name
    assert output_name == "Y"
    assert sess.get_outputs()[0].shape == [3, 1]
    res = sess.run([output_name], {input_name: X})
    np.testing.assert_allclose(res[0], np.array([[5.0], [11.0], [17.0]], dtype=np.float32), rtol=1e-05, atol=1e-08)


def test_run_model2_contiguous(get_name: Callable[[str], str]) -> None:
    sess = ort.InferenceSession(get_name("matmul_1.onnx"), providers=ort.get_available_providers())
    x = np.array([[2.0, 1.0], [4.0, 3.0], [6.0, 5.0]], dtype=np.float32)[:, [1, 0]]
    input_name = sess.get_inputs()[0].name
    assert input_name == "X"
    assert sess.get_inputs()[0].shape == [3, 2]
    output_name = sess.get_outputs()[0].name
    assert output_name == "Y"
    assert sess.get_outputs()[0].shape == [3, 1]
    output_expected = np.array([[5.0], [11.0], [17.0]], dtype=np.float32)
    res = sess.run([output_name], {input_name: x})
    np.testing.assert_allclose(res[0], output_expected, rtol=1e-05, atol=1e-08)
    rescontiguous = sess.run([output_name], {input_name: np.ascontiguousarray(x)})
    np.testing.assert_allclose(rescontiguous[0], output_expected, rtol=1e-05, atol=1e-08)


def test_run_model_multiple_threads(get_name: Callable[[str], str]) -> None:
    so = ort.SessionOptions()
    so.log_verbosity_level = 1
    so.logid = "MultiThreadsTest"
    sess = ort.InferenceSession(get_name("mul_1.onnx"), sess_options=so, providers=ort.get_available_providers())
    errors: list[BaseException] = []

    def run_in_thread(run_options: ort.RunOptions) -> None:
        try:
            run_model(sess, run_options)
        except BaseException as e:  # a thread's failure is the test's (unittest's version only printed it)
            errors.append(e)

    ro1 = ort.RunOptions()
    ro1.logid = "thread1"
    t1 = threading.Thread(target=run_in_thread, args=(ro1,))
    ro2 = ort.RunOptions()
    ro2.logid = "thread2"
    t2 = threading.Thread(target=run_in_thread, args=(ro2,))
    t1.start()
    t2.start()
    t1.join()
    t2.join()
    assert errors == []


def test_list_as_input(get_name: Callable[[str], str]) -> None:
    sess = ort.InferenceSession(get_name("mul_1.onnx"), providers=ort.get_available_providers())
    input_name = sess.get_inputs()[0].name
    res = sess.run([], {input_name: X.tolist()})
    np.testing.assert_allclose(res[0], X_SQUARED, rtol=1e-05, atol=1e-08)


def test_run_model_symbolic_input(get_name: Callable[[str], str]) -> None:
    sess = ort.InferenceSession(get_name("matmul_2.onnx"), providers=ort.get_available_providers())
    input_name = sess.get_inputs()[0].name
    assert input_name == "X"
    # input X has an unknown dimension (its dim_param is the string "None")
    assert sess.get_inputs()[0].shape == ["None", 2]
    output_name = sess.get_outputs()[0].name
    assert output_name == "Y"
    assert sess.get_outputs()[0].shape == ["None", 1]
    res = sess.run([output_name], {input_name: X})
    np.testing.assert_allclose(res[0], np.array([[5.0], [11.0], [17.0]], dtype=np.float32), rtol=1e-05, atol=1e-08)


def test_boolean_inputs(get_name: Callable[[str], str]) -> None:
    sess = ort.InferenceSession(get_name("logicaland.onnx"), providers=ort.get_available_providers())
    a = np.array([[True, True], [False, False]], dtype=bool)
    b = np.array([[True, False], [True, False]], dtype=bool)

    # input1:0 is first in the protobuf, and input:0 is second, and the original order is kept
    a_name = sess.get_inputs()[0].name
    assert a_name == "input1:0"
    assert sess.get_inputs()[0].shape == [2, 2]
    assert sess.get_inputs()[0].type == "tensor(bool)"

    b_name = sess.get_inputs()[1].name
    assert b_name == "input:0"
    assert sess.get_inputs()[1].shape == [2, 2]
    assert sess.get_inputs()[0].type == "tensor(bool)"

    output_name = sess.get_outputs()[0].name
    assert output_name == "output:0"
    assert sess.get_outputs()[0].shape == [2, 2]
    assert sess.get_outputs()[0].type == "tensor(bool)"

    output_expected = np.array([[True, False], [False, False]], dtype=bool)
    res = sess.run([output_name], {a_name: a, b_name: b})
    np.testing.assert_equal(res[0], output_expected)


def test_raise_wrong_num_inputs(get_name: Callable[[str], str]) -> None:
    with pytest.raises(ValueError) as context:
        sess = ort.InferenceSession(get_name("logicaland.onnx"), providers=ort.get_available_providers())
        a = np.array([[True, True], [False, False]], dtype=bool)
        sess.run([], {"input:0": a})
    assert "Required inputs (['input1:0']) are missing from input feed (['input:0'])" in str(context.value)


def test_model_meta(get_name: Callable[[str], str]) -> None:
    # onnxruntime reads ../models/opset8/test_squeezenet/model.onnx (and passes when it is absent); a model
    # with the same metadata is always here
    sess = ort.InferenceSession(get_name("squeezenet_meta.onnx"), providers=ort.get_available_providers())
    modelmeta = sess.get_modelmeta()
    assert modelmeta.producer_name == "onnx-caffe2"
    assert modelmeta.graph_name == "squeezenet_old"
    assert modelmeta.domain == ""
    assert modelmeta.description == ""
    assert modelmeta.graph_description == ""


def test_run_output_does_not_alias_input_passthrough() -> None:
    """session.run() returns independent arrays when a model input is also a model output (onnxruntime #21922)."""
    inp_shape = [1, 2, 2, 2]
    input_0 = onnx.helper.make_tensor_value_info("input_0", onnx.TensorProto.FLOAT, inp_shape)
    output_plus10 = onnx.helper.make_tensor_value_info("plus_10", onnx.TensorProto.FLOAT, inp_shape)
    ten_const = onnx.numpy_helper.from_array(np.array(10, dtype=np.float32), "ten_const")
    add_node = onnx.helper.make_node("Add", ["input_0", "ten_const"], ["plus_10"], name="Add0")
    graph = onnx.helper.make_graph(
        [add_node], "PassthroughTest", [input_0], [output_plus10, input_0], initializer=[ten_const]
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 21)])
    model = onnx.shape_inference.infer_shapes(model)

    sess_options = ort.SessionOptions()
    sess_options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        model.SerializeToString(), sess_options=sess_options, providers=ort.get_available_providers()
    )

    all_run_outputs = []
    for run_index in range(7):
        input_data = np.full(inp_shape, float(run_index), dtype=np.float32)
        outputs = session.run(None, {"input_0": input_data})
        np.testing.assert_array_equal(outputs[0], np.full(inp_shape, run_index + 10.0, dtype=np.float32))
        np.testing.assert_array_equal(outputs[1], np.full(inp_shape, float(run_index), dtype=np.float32))
        # the pass-through output is an independent copy, so it survives later runs
        assert not np.shares_memory(outputs[1], input_data), f"run {run_index}: 'input_0' aliases the input"
        all_run_outputs.append(outputs)

    for run_index, outputs in enumerate(all_run_outputs):
        np.testing.assert_array_equal(outputs[0], np.full(inp_shape, run_index + 10.0, dtype=np.float32))
        np.testing.assert_array_equal(outputs[1], np.full(inp_shape, float(run_index), dtype=np.float32))


def test_run_session_owned_output_is_zero_copy(get_name: Callable[[str], str]) -> None:
    """Session-allocated outputs are views of a backing object, not separately allocated copies."""
    sess = ort.InferenceSession(get_name("mul_1.onnx"), providers=ort.get_available_providers())
    result = sess.run(None, {sess.get_inputs()[0].name: X})
    assert result[0].base is not None, "session-owned output should have a backing base object"


def test_run_base_model(get_name: Callable[[str], str]) -> None:
    # the LoRA model without an adapter: its empty lora_param_a/b initializers (overridable inputs) are used
    expected_output = np.array([[28.0, 32.0, 36.0, 40.0]] * 4, dtype=np.float32)
    run_options = ort.RunOptions()
    session = ort.InferenceSession(get_name("lora/two_params_lora_model.onnx"))
    outputs = session.run(None, {"input_x": np.ones((4, 4), dtype=np.float32)}, run_options)
    assert len(outputs) == 1
    assert np.allclose(outputs[0], expected_output)


# --- SessionOptions and RunOptions -------------------------------------------------------------------


def test_graph_optimization_level(get_name: Callable[[str], str]) -> None:
    opt = ort.SessionOptions()
    # default should be all optimizations
    assert opt.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opt.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    assert opt.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    sess = ort.InferenceSession(get_name("logicaland.onnx"), sess_options=opt, providers=ort.get_available_providers())
    a = np.array([[True, True], [False, False]], dtype=bool)
    b = np.array([[True, False], [True, False]], dtype=bool)
    sess.run([], {"input1:0": a, "input:0": b})


def test_ort_execution_mode() -> None:
    opt = ort.SessionOptions()
    assert opt.execution_mode == ort.ExecutionMode.ORT_SEQUENTIAL
    opt.execution_mode = ort.ExecutionMode.ORT_PARALLEL
    assert opt.execution_mode == ort.ExecutionMode.ORT_PARALLEL


def test_session_options_add_free_dimension_override_by_denotation(get_name: Callable[[str], str]) -> None:
    so = ort.SessionOptions()
    so.add_free_dimension_override_by_denotation("DATA_BATCH", 3)
    so.add_free_dimension_override_by_denotation("DATA_CHANNEL", 5)
    sess = ort.InferenceSession(
        get_name("abs_free_dimensions.onnx"), sess_options=so, providers=ort.get_available_providers()
    )
    assert sess.get_inputs()[0].name == "x"
    # free dims with the denotations DATA_BATCH and DATA_CHANNEL have values assigned to them
    assert sess.get_inputs()[0].shape == [3, 5, 5]


def test_session_options_add_free_dimension_override_by_name(get_name: Callable[[str], str]) -> None:
    so = ort.SessionOptions()
    so.add_free_dimension_override_by_name("Dim1", 4)
    so.add_free_dimension_override_by_name("Dim2", 6)
    sess = ort.InferenceSession(
        get_name("abs_free_dimensions.onnx"), sess_options=so, providers=ort.get_available_providers()
    )
    assert sess.get_inputs()[0].name == "x"
    # "Dim1" and "Dim2" have values assigned to them
    assert sess.get_inputs()[0].shape == [4, 6, 5]


def test_session_options_add_config_entry() -> None:
    so = ort.SessionOptions()
    so.add_session_config_entry("CONFIG_KEY", "CONFIG_VAL")
    assert so.get_session_config_entry("CONFIG_KEY") == "CONFIG_VAL"


def test_invalid_session_options_config_entry() -> None:
    so = ort.SessionOptions()
    invalide_key = "INVALID_KEY"
    with pytest.raises(RuntimeError) as context:
        so.get_session_config_entry(invalide_key)
    assert "SessionOptions does not have configuration with key: " + invalide_key in str(context.value)


def test_session_options_add_initializer(get_name: Callable[[str], str]) -> None:
    so = ort.SessionOptions()
    # this initializer differs from the model's own "W"
    ortvalue_initializer = ort.OrtValue.ortvalue_from_numpy(
        np.array([[2.0, 1.0], [4.0, 3.0], [6.0, 5.0]], dtype=np.float32)
    )
    # the caller keeps the OrtValue alive as long as a session relying on it is
    so.add_initializer("W", ortvalue_initializer)
    sess = ort.InferenceSession(get_name("mul_1.onnx"), sess_options=so, providers=ort.get_available_providers())
    res = sess.run(["Y"], {"X": X})
    assert np.array_equal(res[0], np.array([[2.0, 2.0], [12.0, 12.0], [30.0, 30.0]], dtype=np.float32))


def test_session_options_add_external_initializers(get_name: Callable[[str], str]) -> None:
    # the OrtValue replaces the initializer whose data the graph says is in a file that does not exist
    ortvalue_initializer = ort.OrtValue.ortvalue_from_numpy(np.array([0, 0, 1, 1]).astype(np.int64))
    so = ort.SessionOptions()
    so.add_external_initializers(["Pads_not_on_disk"], [ortvalue_initializer])
    # this should not throw
    ort.InferenceSession(
        get_name("model_with_external_initializer_come_from_user.onnx"),
        sess_options=so,
        providers=ort.get_available_providers(),
    )


def test_session_options_add_external_initializers_from_files_in_memory(get_name: Callable[[str], str]) -> None:
    # the external file "Pads_not_on_disk.bin" the model names, given from memory
    pads_bytes = np.array([0, 0, 1, 1], dtype=np.int64).tobytes()
    so = ort.SessionOptions()
    so.add_external_initializers_from_files_in_memory(["Pads_not_on_disk.bin"], [pads_bytes], [len(pads_bytes)])
    # this should not throw
    ort.InferenceSession(
        get_name("model_with_external_initializer_come_from_user.onnx"),
        sess_options=so,
        providers=ort.get_available_providers(),
    )


def test_memory_arena_shrinkage(get_name: Callable[[str], str]) -> None:
    sess1 = ort.InferenceSession(get_name("mul_1.onnx"), providers=ort.get_available_providers())
    input_name = sess1.get_inputs()[0].name
    # a run config entry (onnxruntime: shrink the CPU arena after the run) is kept and readable
    ro1 = ort.RunOptions()
    ro1.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    assert ro1.get_run_config_entry("memory.enable_memory_arena_shrinkage") == "cpu:0"
    sess1.run([], {input_name: X}, ro1)


# --- OrtValue ----------------------------------------------------------------------------------------


def test_ort_value(get_name: Callable[[str], str]) -> None:
    def test_session_with_ortvalue_input(ortvalue: ort.OrtValue) -> None:
        sess = ort.InferenceSession(get_name("mul_1.onnx"), providers=ort.get_available_providers())
        res = sess.run(["Y"], {"X": ortvalue})
        assert np.array_equal(res[0], X_SQUARED)
        # onnxruntime calls sess._sess.run_with_ort_values and checks for an OrtValueVector; the public
        # wrapper answers a list of OrtValues
        vect = sess.run_with_ort_values(["Y"], {"X": ortvalue}, ort.RunOptions())
        assert len(vect) == 1 and isinstance(vect[0], ort.OrtValue)
        assert np.array_equal(vect[0].numpy(), X_SQUARED)

    ortvalue1 = ort.OrtValue.ortvalue_from_numpy(X)
    assert ortvalue1.device_name() == "cpu"
    assert ortvalue1.shape() == [3, 2]
    assert ortvalue1.data_type() == "tensor(float)"
    assert ortvalue1.is_tensor()
    assert ortvalue1.tensor_size_in_bytes() == 4 * 2 * 3  # float32, shape [3, 2]
    assert np.array_equal(ortvalue1.numpy(), X)

    # the OrtValue fed to a session's run() stays valid after it
    test_session_with_ortvalue_input(ortvalue1)
    assert np.array_equal(ortvalue1.numpy(), X)

    # an OrtValue over the same bytes, typed by its ONNX element type
    float_tensor_data_type = 1  # TensorProto_DataType_FLOAT
    ort_value_with_type = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(X, float_tensor_data_type)
    assert ort_value_with_type.is_tensor()
    assert ort_value_with_type.element_type() == float_tensor_data_type
    assert ort_value_with_type.shape() == [3, 2]

    # on the device (onnxruntime: "cuda", 0)
    ortvalue2 = ort.OrtValue.ortvalue_from_numpy(X, DEVICE, 0)
    assert ortvalue2.device_name() == DEVICE
    assert ortvalue2.shape() == [3, 2]
    assert ortvalue2.data_type() == "tensor(float)"
    assert ortvalue2.is_tensor()
    assert np.array_equal(ortvalue2.numpy(), X)

    test_session_with_ortvalue_input(ortvalue2)
    assert np.array_equal(ortvalue2.numpy(), X)


def test_ort_value_gh_issue9799(get_name: Callable[[str], str]) -> None:
    # device-resident inputs of a new length every run into a symbolic-dim Identity (onnxruntime #9799)
    session = ort.InferenceSession(get_name("identity_9799.onnx"), providers=ort.get_available_providers())
    for seq_length in range(40, 200):
        inps = np.ones((seq_length, 16, 7, 5, 3, 3)).astype(np.float32)
        ort_val = ort.OrtValue.ortvalue_from_numpy(inps, DEVICE, 0)
        outs = session.run(output_names=["output"], input_feed={"input": ort_val})[0]
        assert np.allclose(inps, outs)


def test_ort_value_array_protocol() -> None:
    """OrtValue supports numpy's __array__ protocol."""
    numpy_arr = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    ortvalue = ort.OrtValue.ortvalue_from_numpy(numpy_arr)

    # np.asarray works via __array__ and shares memory (zero-copy)
    result = np.asarray(ortvalue)
    np.testing.assert_equal(numpy_arr, result)
    assert result.dtype == np.float32
    assert ortvalue.data_ptr() == result.ctypes.data

    result2 = np.array(ortvalue)
    np.testing.assert_equal(numpy_arr, result2)

    # the same dtype still shares memory
    result_same = np.asarray(ortvalue, dtype=np.float32)
    np.testing.assert_equal(numpy_arr, result_same)
    assert ortvalue.data_ptr() == result_same.ctypes.data

    # dtype conversion via __array__
    result_f64 = np.asarray(ortvalue, dtype=np.float64)
    np.testing.assert_equal(numpy_arr.astype(np.float64), result_f64)
    assert result_f64.dtype == np.float64

    int_arr = np.array([1, 2, 3], dtype=np.int64)
    result_int = np.asarray(ort.OrtValue.ortvalue_from_numpy(int_arr))
    np.testing.assert_equal(int_arr, result_int)
    assert result_int.dtype == np.int64

    bool_arr = np.array([True, False, True], dtype=np.bool_)
    result_bool = np.asarray(ort.OrtValue.ortvalue_from_numpy(bool_arr))
    np.testing.assert_equal(bool_arr, result_bool)
    assert result_bool.dtype == np.bool_


def test_ort_value_dlpack_protocol() -> None:
    """OrtValue exposes __dlpack__ and __dlpack_device__."""
    numpy_arr = X.copy()
    ortvalue = ort.OrtValue.ortvalue_from_numpy(numpy_arr)
    # (device_type, device_id) for the CPU
    assert ortvalue.__dlpack_device__() == (1, 0)
    # __dlpack__ returns a capsule from_dlpack consumes
    ortvalue2 = ort.OrtValue.from_dlpack(ortvalue.__dlpack__())
    np.testing.assert_equal(numpy_arr, ortvalue2.numpy())


def test_ort_value_from_dlpack_protocol_object() -> None:
    """OrtValue.from_dlpack takes objects that implement the __dlpack__ protocol."""
    numpy_arr = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
    ortvalue = ort.OrtValue.from_dlpack(numpy_arr)  # numpy arrays have __dlpack__ (numpy >= 1.22)
    np.testing.assert_equal(numpy_arr, ortvalue.numpy())
    assert list(ortvalue.shape()) == list(numpy_arr.shape)

    # round trip numpy -> OrtValue -> OrtValue (via __dlpack__), sharing memory
    ortvalue_src = ort.OrtValue.ortvalue_from_numpy(numpy_arr)
    ortvalue_dst = ort.OrtValue.from_dlpack(ortvalue_src)
    np.testing.assert_equal(numpy_arr, ortvalue_dst.numpy())
    assert ortvalue_src.data_ptr() == ortvalue_dst.data_ptr()


def test_ort_value_from_dlpack_bool() -> None:
    """from_dlpack keeps booleans boolean, and does not take uint8 for bool."""
    bool_arr = np.array([True, False, True, False], dtype=np.bool_)
    result = ort.OrtValue.from_dlpack(ort.OrtValue.ortvalue_from_numpy(bool_arr)).numpy()
    np.testing.assert_equal(bool_arr, result)

    uint8_arr = np.array([1, 2, 255], dtype=np.uint8)
    result_uint8 = ort.OrtValue.from_dlpack(ort.OrtValue.ortvalue_from_numpy(uint8_arr)).numpy()
    np.testing.assert_equal(uint8_arr, result_uint8)
    assert result_uint8.dtype == np.uint8
