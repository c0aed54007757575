"""Validation at load: each model onnxruntime rejects fails here too, naming file, node, op and problem.

Every rejected case is also offered to onnxruntime, so the table itself checks the rule "Onyxia
accepts a subset of what onnxruntime accepts"; the cases Onyxia rejects although onnxruntime
loads them are the README's listed differences (`ORT_ACCEPTS`).
"""

from __future__ import annotations

import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx_test_models import make_model, save, tensor_input

from onyxia.onnx import ModelValidationError, load_and_parse_model

F, I32, I64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64
MS = {"": 21, "com.microsoft": 1}


def _x(name="x", dtype=F, dims=(2, 3)):
    return tensor_input(name, dtype, dims)


def _y(name="y", dtype=F):
    return tensor_input(name, dtype, None)


def _one(node, inputs=None, outputs=None, opsets=None, initializers=()):
    return make_model([node], inputs or [_x()], outputs or [_y()], initializers, opsets=opsets)


def _gqa(seqlens=I32, swap=False, **attrs):
    names = ["q", "k", "v", "pk", "pv", "sk", "tl"]
    if swap:
        names[5], names[6] = names[6], names[5]
    duplicate = attrs.pop("duplicate", False)
    attrs = {"num_heads": 2, "kv_num_heads": 1, **attrs}
    node = helper.make_node("GroupQueryAttention", names, ["o", "pko", "pvo"], domain="com.microsoft", **attrs)
    if duplicate:
        node.attribute.extend([helper.make_attribute("scale", 0.5), helper.make_attribute("scale", 0.25)])
    inputs = [_x("q", F, (2, 1, 16)), _x("k", F, (2, 1, 8)), _x("v", F, (2, 1, 8))]
    inputs += [_x("pk", F, (2, 1, 4, 8)), _x("pv", F, (2, 1, 4, 8)), _x("sk", seqlens, (2,)), _x("tl", I32, ())]
    return make_model([node], inputs, [_y("o"), _y("pko"), _y("pvo")], opsets=MS)


def _axes(op, opset):
    axes = helper.make_tensor("a", I64, [1], [1])
    return _one(helper.make_node(op, ["x", "a"], ["y"]), opsets={"": opset}, initializers=[axes])


def _versions(ir=10, opset=21):
    model = _one(helper.make_node("Relu", ["x"], ["y"]), opsets={"": opset})
    model.ir_version = ir
    return model


REJECTED = {  # case: (model, what the message must say)
    "relu_two_inputs": (_one(helper.make_node("Relu", ["x", "x"], ["y"])), r"'Relu_0' \(Relu\).*input size 2"),
    "add_three_inputs": (_one(helper.make_node("Add", ["x", "x", "x"], ["y"])), r"\(Add\).*input size 3"),
    "opset_999": (_versions(opset=999), r"opset 999 of domain 'ai.onnx' is not supported; expected 1 to \d+"),
    "ir_version_99": (_versions(ir=99), r"IR version 99 is newer than the newest supported"),
    "gqa_seqlens_int64": (_gqa(seqlens=I64), r"\(GroupQueryAttention\): input 5 'seqlens_k' is int64; expected"),
    "gqa_swapped": (_gqa(swap=True), r"input 6 'total_sequence_length' has shape \[2\]; expected a scalar"),
    "gqa_unknown_attribute": (_gqa(foo=1), r"unknown attribute 'foo'"),
    "gqa_attribute_type": (_gqa(scale=1), r"attribute 'scale' is INT; expected FLOAT"),
    "gqa_attribute_twice": (_gqa(duplicate=True), r"attribute\(s\) \['scale'\] given more than once"),
    "reducesum_axes_input_opset_11": (_axes("ReduceSum", 11), r"\(ReduceSum\).*input size 2"),
    "reduceprod_axes_input_opset_13": (_axes("ReduceProd", 13), r"\(ReduceProd\).*input size 2"),
    "unknown_attribute": (_one(helper.make_node("Relu", ["x"], ["y"], foo=1)), r"Unrecognized attribute: foo"),
    "attribute_type": (_one(helper.make_node("LeakyRelu", ["x"], ["y"], alpha=1)), r"Mismatched attribute type"),
    "declared_output_dtype": (
        _one(helper.make_node("Relu", ["x"], ["y"]), outputs=[_y(dtype=I64)]),
        r"\(op_type:Relu\).*float vs int64",
    ),
    "mixed_input_dtypes": (
        _one(helper.make_node("Add", ["x", "z"], ["y"]), inputs=[_x(), _x("z", I64)]),
        r"\(op_type:Add\).*inconsistent type",
    ),
    "keepdims_2_pow_31": (
        _one(helper.make_node("ReduceSum", ["x"], ["y"], keepdims=2**31)),
        r"attribute 'keepdims' is 2147483648; expected 0 or 1",
    ),
    "dim_2_pow_32": (
        _one(helper.make_node("Relu", ["x"], ["y"]), inputs=[_x(dims=(2**32,))]),
        r"graph input 'x': dim 0 is 4294967296; expected < 2\^31",
    ),
}
ORT_ACCEPTS = {"gqa_swapped", "keepdims_2_pow_31", "dim_2_pow_32"}  # the README's listed differences


@pytest.mark.parametrize("case", sorted(REJECTED))
def test_rejected_with_a_clear_error(case, tmp_path):
    model, pattern = REJECTED[case]
    path = save(model, tmp_path)
    with pytest.raises(ModelValidationError, match=pattern) as info:
        load_and_parse_model(path)
    assert str(info.value).startswith(str(path))
    try:
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        accepted = True
    except Exception:
        accepted = False
    assert accepted == (case in ORT_ACCEPTS)


ACCEPTED = {
    "leaky_relu_alpha_inf": _one(helper.make_node("LeakyRelu", ["x"], ["y"], alpha=float("inf"))),
    "leaky_relu_alpha_nan": _one(helper.make_node("LeakyRelu", ["x"], ["y"], alpha=float("nan"))),
    "declared_output_shape_differs": _one(helper.make_node("Relu", ["x"], ["y"]), outputs=[tensor_input("y", F, [7])]),
    "gqa": _gqa(),
    "custom_domain": _one(
        helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example", anything=3),
        opsets={"": 21, "com.example": 1},
    ),
}


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_accepted(case, tmp_path):
    graph = load_and_parse_model(save(ACCEPTED[case], tmp_path))
    assert len(graph.nodes) == 1


def test_every_problem_is_reported_at_once(tmp_path):
    nodes = [helper.make_node("Relu", ["x", "x"], ["a"], name="first"), helper.make_node("Neg", ["a"], ["y"], foo=2)]
    with pytest.raises(ModelValidationError) as info:
        load_and_parse_model(save(make_model(nodes, [_x()], [_y()]), tmp_path))
    assert len(info.value.problems) == 2
    assert "2 problems" in str(info.value) and "node 'first' (Relu)" in str(info.value)
    assert "node 'Neg_1' (Neg): Unrecognized attribute: foo" in str(info.value)


def test_initializer_of_2_pow_31_elements_is_rejected_without_reading_it(tmp_path):
    big = TensorProto(name="w", data_type=F, dims=[2**16, 2**15], data_location=TensorProto.EXTERNAL)
    entry = big.external_data.add()
    entry.key, entry.value = "location", "w.bin"
    with open(tmp_path / "w.bin", "wb") as f:
        f.truncate(2**31 * 4)  # sparse: nothing is written, and validation must not read it
    model = _one(helper.make_node("Add", ["x", "w"], ["y"]), inputs=[_x(dims=(1,))], initializers=[big])
    with pytest.raises(ModelValidationError, match=r"initializer 'w': 2147483648 elements"):
        load_and_parse_model(save(model, tmp_path))


def test_weights_listed_in_value_info_keep_their_shapes(tmp_path):
    """torch's dynamo exporter lists weights in value_info too; their shapes must reach onnx's checks
    (STFT requires a rank-1 window), not be dropped with the declared shapes of intermediates."""
    window = helper.make_tensor("window", F, [16], [1.0] * 16)
    step = helper.make_tensor("step", TensorProto.INT64, [], [4])
    node = helper.make_node("STFT", ["signal", "step", "window"], ["y"], onesided=1)
    inputs, outputs = [tensor_input("signal", F, [1, 64, 1])], [tensor_input("y", F, None)]
    model = make_model([node], inputs, outputs, [window, step], opsets={"": 17})
    model.graph.value_info.extend([tensor_input("window", F, [16]), tensor_input("step", TensorProto.INT64, [])])
    path = save(model, tmp_path)
    ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])  # onnxruntime loads it
    graph = load_and_parse_model(path)
    assert [n.op_type for n in graph.nodes] == ["STFT"]


def test_contrib_ops_are_checked_against_onnxruntime_schemas(tmp_path):
    """QLinearConcat's variadic, mixed-dtype inputs are accepted; an unknown attribute on QLinearAdd is not."""
    u8, f = TensorProto.UINT8, F
    scalars = [helper.make_tensor(n, t, [], [v]) for n, t, v in (("s", f, 0.1), ("z", u8, 3))]
    concat = helper.make_node(
        "QLinearConcat", ["s", "z", "a", "s", "z", "b", "s", "z"], ["y"], domain="com.microsoft", axis=0
    )
    inputs = [tensor_input("a", u8, [2, 3]), tensor_input("b", u8, [1, 3])]
    model = make_model([concat], inputs, [tensor_input("y", u8, None)], scalars, opsets=MS)
    path = save(model, tmp_path)
    ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [n.op_type for n in load_and_parse_model(path).nodes] == ["QLinearConcat"]
    add = helper.make_node(
        "QLinearAdd", ["a", "s", "z", "a", "s", "z", "s", "z"], ["y"], domain="com.microsoft", fused=1
    )
    bad = make_model([add], inputs[:1], [tensor_input("y", u8, None)], scalars, opsets=MS)
    with pytest.raises(ModelValidationError, match=r"\(QLinearAdd\): unknown attribute 'fused'"):
        load_and_parse_model(save(bad, tmp_path, "bad.onnx"))
