"""Tensor data in every ONNX storage form: typed fields, raw_data, 4-bit packing, external files."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx_test_models import make_model, save, set_external, tensor_input

from onyxia.core import DataType
from onyxia.onnx import load_and_parse_model


def _load_initializer(tmp_path, tensor: TensorProto, **save_kwargs):
    """A one-Identity model whose only weight is `tensor`; returns its TensorValue."""
    model = make_model(
        [helper.make_node("Identity", [tensor.name], ["y"])],
        [],
        [helper.make_tensor_value_info("y", tensor.data_type, None)],
        [tensor],
    )
    graph = load_and_parse_model(save(model, tmp_path, **save_kwargs))
    return graph.tensor_by_name(tensor.name).initializer


TYPED_FIELDS = [
    ("float_data", TensorProto.FLOAT, np.float32, [1.5, -2.0, 3.25, 0.0]),
    ("double_data", TensorProto.DOUBLE, np.float64, [1e300, -2.0, 3.25, 0.5]),
    ("int32_data", TensorProto.INT32, np.int32, [1, -2, 2**31 - 1, 0]),
    ("int32_data", TensorProto.INT8, np.int8, [1, -2, 127, -128]),
    ("int32_data", TensorProto.UINT8, np.uint8, [1, 2, 255, 0]),
    ("int32_data", TensorProto.INT16, np.int16, [1, -2, 32767, -32768]),
    ("int32_data", TensorProto.UINT16, np.uint16, [1, 2, 65535, 0]),
    ("int32_data", TensorProto.BOOL, np.bool_, [1, 0, 1, 1]),
    ("int64_data", TensorProto.INT64, np.int64, [1, -2, 2**62, 0]),
    ("uint64_data", TensorProto.UINT32, np.uint32, [1, 2, 2**32 - 1, 0]),
    ("uint64_data", TensorProto.UINT64, np.uint64, [1, 2, 2**64 - 1, 0]),
]


@pytest.mark.parametrize(("field", "code", "np_type", "values"), TYPED_FIELDS)
def test_typed_fields(tmp_path, field, code, np_type, values):
    tensor = TensorProto(name="t", data_type=code, dims=[2, 2])
    getattr(tensor, field).extend(values)
    value = _load_initializer(tmp_path, tensor)
    assert value.dtype is DataType(code) and value.dims == (2, 2)
    np.testing.assert_array_equal(value.numpy(), np.array(values, dtype=np_type).reshape(2, 2))


@pytest.mark.parametrize("np_type", [np.float32, np.float16, np.float64, np.int64, np.int8, np.uint16, np.bool_])
def test_raw_data(tmp_path, np_type):
    array = (np.arange(6).reshape(2, 3) % 2 if np_type is np.bool_ else np.arange(6).reshape(2, 3) - 2).astype(np_type)
    value = _load_initializer(tmp_path, numpy_helper.from_array(array, "t"))
    assert value.dtype is DataType.from_numpy(np_type)
    np.testing.assert_array_equal(value.numpy(), array)


def test_float16_from_int32_bit_patterns(tmp_path):
    halves = np.array([1.0, -2.5, 65504.0, 0.000061], dtype=np.float16)
    tensor = TensorProto(name="t", data_type=TensorProto.FLOAT16, dims=[4])
    tensor.int32_data.extend(int(b) for b in halves.view(np.uint16))
    value = _load_initializer(tmp_path, tensor)
    assert value.numpy().dtype == np.float16
    np.testing.assert_array_equal(value.numpy(), halves)


@pytest.mark.parametrize("code", [TensorProto.INT4, TensorProto.UINT4])
@pytest.mark.parametrize("raw", [True, False])
def test_4bit_stays_packed(tmp_path, code, raw):
    logical = [1, -2, 3, -8, 7] if code == TensorProto.INT4 else [1, 14, 3, 15, 7]
    vals = np.array(logical, dtype=np.int8 if code == TensorProto.INT4 else np.uint8) if raw else logical
    tensor = helper.make_tensor("t", code, [5], vals, raw=raw)
    value = _load_initializer(tmp_path, tensor)
    packed = value.numpy()
    assert value.dtype is DataType(code) and value.dims == (5,)
    assert packed.dtype == np.uint8 and packed.shape == (3,)  # two per byte, low nibble first
    nibbles = np.stack([packed & 0xF, packed >> 4], axis=1).reshape(-1)[:5].astype(np.int8)
    if code == TensorProto.INT4:
        nibbles = np.where(nibbles > 7, nibbles - 16, nibbles)
    np.testing.assert_array_equal(nibbles, logical)


def test_bfloat16_kept_as_bit_patterns(tmp_path):
    bits = [0x3F80, 0xC000, 0x0000]  # 1.0, -2.0, 0.0
    tensor = TensorProto(name="t", data_type=TensorProto.BFLOAT16, dims=[3])
    tensor.int32_data.extend(bits)
    value = _load_initializer(tmp_path, tensor)
    assert value.dtype is DataType.BFLOAT16
    np.testing.assert_array_equal(value.numpy(), np.array(bits, dtype=np.uint16))


def test_string_tensor(tmp_path):
    tensor = helper.make_tensor("t", TensorProto.STRING, [2], [b"hello", "wörld".encode()])
    value = _load_initializer(tmp_path, tensor)
    assert value.dtype is DataType.STRING and list(value.numpy()) == ["hello", "wörld"]


def _external_model(tmp_path, arrays: dict[str, np.ndarray]) -> onnx.ModelProto:
    names = list(arrays)
    nodes = [helper.make_node("Add", [names[0], names[-1]], ["y"])]
    inits = [numpy_helper.from_array(a, n) for n, a in arrays.items()]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    return make_model(nodes, [], [out], inits)


def test_external_data_is_lazy_memory_mapped(tmp_path):
    rng = np.random.default_rng(0)
    big = rng.standard_normal((1024, 2048)).astype(np.float32)  # 8 MB
    small = rng.standard_normal((1024, 2048)).astype(np.float32)
    path = save(
        _external_model(tmp_path, {"big": big, "small": small}),
        tmp_path,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="weights.bin",
        size_threshold=0,
    )
    graph = load_and_parse_model(path)
    values = [graph.tensor_by_name(n).initializer for n in ("big", "small")]
    assert not any(v.is_loaded for v in values)
    assert values[0].dims == (1024, 2048) and values[0].nbytes == big.nbytes
    loaded = values[1].numpy()
    assert values[1].is_loaded and not values[0].is_loaded
    assert isinstance(loaded.base, np.memmap) or isinstance(loaded, np.memmap)
    assert not loaded.flags.writeable
    np.testing.assert_array_equal(loaded, small)
    np.testing.assert_array_equal(values[0].numpy(), big)


def test_external_data_offset_and_length_keys(tmp_path):
    """Hand-written references: a padded file, explicit offsets, and a reference with no length key."""
    a, b = np.arange(6, dtype=np.int64).reshape(2, 3), np.array([0.5, 1.5], dtype=np.float32)
    (tmp_path / "data.bin").write_bytes(b"\0" * 16 + a.tobytes() + b"\xff" * 3 + b.tobytes())
    ta = TensorProto(name="a", data_type=TensorProto.INT64, dims=[2, 3], data_location=TensorProto.EXTERNAL)
    set_external(ta, location="data.bin", offset="16", length=str(a.nbytes))
    tb = TensorProto(name="b", data_type=TensorProto.FLOAT, dims=[2], data_location=TensorProto.EXTERNAL)
    set_external(tb, location="data.bin", offset=str(16 + a.nbytes + 3))
    nodes = [helper.make_node("Cast", ["a"], ["c"], to=TensorProto.FLOAT), helper.make_node("Neg", ["b"], ["y"])]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("c", "y")]  # [2, 3] and [2]: no Add
    model = make_model(nodes, [], outs, [ta, tb])
    graph = load_and_parse_model(save(model, tmp_path))
    np.testing.assert_array_equal(graph.tensor_by_name("a").initializer.numpy(), a)
    np.testing.assert_array_equal(graph.tensor_by_name("b").initializer.numpy(), b)


def test_external_4bit_and_constant_attribute(tmp_path):
    """External data also backs 4-bit weights and Constant attribute tensors (convert_attribute=True)."""
    packed = helper.make_tensor("q", TensorProto.UINT4, [4, 8], np.tile(np.arange(16, dtype=np.uint8), 2), raw=True)
    const = helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.full(64, 3.0, np.float32), "k"))
    nodes = [const, helper.make_node("Identity", ["q"], ["qo"])]
    outs = [helper.make_tensor_value_info(n, t, None) for n, t in (("k", TensorProto.FLOAT), ("qo", TensorProto.UINT4))]
    model = make_model(nodes, [], outs, [packed])
    path = save(model, tmp_path, save_as_external_data=True, size_threshold=0, convert_attribute=True)
    graph = load_and_parse_model(path)
    q = graph.tensor_by_name("q").initializer
    k = graph.nodes[0].attributes["value"]
    assert not q.is_loaded and not k.is_loaded
    assert q.dims == (4, 8) and q.numpy().shape == (16,) and q.numpy().dtype == np.uint8
    np.testing.assert_array_equal(q.numpy() & 0xF, np.tile(np.arange(0, 16, 2), 2))
    np.testing.assert_array_equal(k.numpy(), np.full(64, 3.0, np.float32))


def test_symlinked_model_finds_data_beside_the_link(tmp_path):
    """Hugging Face cache layout: snapshot files are symlinks into a shared blobs/ folder."""
    blobs, snapshot = tmp_path / "blobs", tmp_path / "snapshots" / "rev" / "onnx"
    blobs.mkdir()
    snapshot.mkdir(parents=True)
    weight = np.arange(8, dtype=np.float32)
    save(
        _external_model(tmp_path, {"w": weight}),
        blobs,
        "m",
        save_as_external_data=True,
        location="m_data",
        size_threshold=0,
    )
    (blobs / "m").rename(blobs / "hash1")
    (blobs / "m_data").rename(blobs / "hash2")
    (snapshot / "model.onnx").symlink_to(blobs / "hash1")
    (snapshot / "m_data").symlink_to(blobs / "hash2")
    graph = load_and_parse_model(snapshot / "model.onnx")
    np.testing.assert_array_equal(graph.tensor_by_name("w").initializer.numpy(), weight)


def test_offset_beyond_2gb(tmp_path):
    """A tensor 3 GiB into a (sparse) data file: 64-bit offsets, nothing read until asked."""
    offset = 3 << 30
    weight = np.arange(4, dtype=np.float32)
    with open(tmp_path / "huge.bin", "wb") as f:
        f.seek(offset)
        f.write(weight.tobytes())
    tensor = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4])
    set_external(tensor, location="huge.bin", offset=str(offset), length=str(weight.nbytes))
    model = make_model(
        [helper.make_node("Identity", ["w"], ["y"])], [], [tensor_input("y", TensorProto.FLOAT, [4])], [tensor]
    )
    value = load_and_parse_model(save(model, tmp_path)).tensor_by_name("w").initializer
    assert not value.is_loaded
    np.testing.assert_array_equal(value.numpy(), weight)
