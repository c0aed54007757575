"""LSTM, GRU and RNN against onnxruntime on random weights: every direction and layout, each
activation with and without alpha/beta, clip, input_forget, linear_before_reset, sequence_lens
(zero and full lengths too), initial states, peepholes, each optional input and output left out,
weights as initializers; a symbolic seq_length served at two lengths by one plan of a fixed number
of dispatches (no pipeline rebuilt, nothing read back); and the errors a malformed node gets."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from oracle import (
    assert_close,
    check_rebinding,
    compile_model,
    make_model,
    onyxia_outputs,
    reference_outputs,
    runtime,
)

from onyxia.compiler import CompilerPipeline
from onyxia.core import DataType, GraphBuilder
from onyxia.core.errors import InputError, OnyxiaError, ShapeInferenceError
from onyxia.core.plan import ReadValues
from onyxia.operators import core_operator_registry
from onyxia.operators.recurrent.activations import ACTIVATIONS

RNG = np.random.default_rng(23)
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
OPS = sorted(GATES)
DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}
# onnxruntime's spelling of each activation (names compare case-insensitively)
SPELLED = {
    "affine": "Affine",
    "elu": "Elu",
    "hardsigmoid": "HardSigmoid",
    "leakyrelu": "LeakyRelu",
    "relu": "Relu",
    "scaledtanh": "ScaledTanh",
    "sigmoid": "Sigmoid",
    "softplus": "Softplus",
    "softsign": "Softsign",
    "tanh": "Tanh",
    "thresholdedrelu": "ThresholdedRelu",
}


def _f32(*shape: int, scale: float = 0.5) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def _inputs(
    op: str,
    *,
    seq: int = 5,
    batch: int = 3,
    size: int = 4,
    hidden: int = 5,
    direction: str = "forward",
    layout: int = 0,
    bias: bool = True,
    lens: list[int] | None = None,
    initial: tuple[bool, bool] = (False, False),
    peepholes: bool = False,
) -> dict[str, np.ndarray | None]:
    """The op's inputs in ONNX order, None where absent (`initial`: initial_h, initial_c given)."""
    d, rows = DIRECTIONS[direction], GATES[op] * hidden
    x = _f32(batch, seq, size, scale=1.0) if layout else _f32(seq, batch, size, scale=1.0)
    state = (batch, d, hidden) if layout else (d, batch, hidden)
    inputs: dict[str, np.ndarray | None] = {
        "X": x,
        "W": _f32(d, rows, size),
        "R": _f32(d, rows, hidden),
        "B": _f32(d, 2 * rows) if bias else None,
        "sequence_lens": None if lens is None else np.array(lens, np.int32),
        "initial_h": _f32(*state, scale=1.0) if initial[0] else None,
    }
    if op == "LSTM":
        inputs["initial_c"] = _f32(*state, scale=1.0) if initial[1] else None
        inputs["P"] = _f32(d, 3 * hidden) if peepholes else None
    while inputs and list(inputs.values())[-1] is None:  # trailing absent inputs are left out
        inputs.popitem()
    return inputs


def _scaled(inputs: Mapping[str, np.ndarray | None], name: str, factor: float) -> np.ndarray:
    value = inputs[name]
    assert value is not None
    return (value * factor).astype(np.float32)


def _attrs(op: str, hidden: int = 5, **extra: Any) -> dict[str, Any]:
    return {"hidden_size": hidden, **extra}


def _outputs(op: str) -> int:
    return 3 if op == "LSTM" else 2


def _expected(
    op: str,
    inputs: Mapping[str, np.ndarray | None],
    attrs: Mapping[str, Any],
    omit: tuple[int, ...] = (),
    opset: int = 14,
) -> list[np.ndarray]:
    """onnxruntime's outputs. Its CPU kernels refuse layout 1 (batch first), which ONNX defines as
    layout 0 with X, the states and the outputs transposed: a layout-1 case is run that way."""
    layout = int(attrs.get("layout", 0))
    swap = {"X", "initial_h", "initial_c"} if layout else set()
    ref = {k: (np.ascontiguousarray(v.swapaxes(0, 1)) if k in swap and v is not None else v) for k, v in inputs.items()}
    ref_attrs = {**attrs, "layout": 0} if layout else dict(attrs)  # opsets before 14 have no layout attribute
    model = make_model(op, ref, ref_attrs, opset=opset, num_outputs=_outputs(op), omit_outputs=omit)
    got = reference_outputs(model, {k: v for k, v in ref.items() if v is not None}, "ort")
    present = [i for i in range(_outputs(op)) if i not in omit]
    if layout:  # Y [S, D, B, H] -> [B, S, D, H]; Y_h, Y_c [D, B, H] -> [B, D, H]
        got = [y.transpose(2, 0, 1, 3) if i == 0 else y.swapaxes(0, 1) for i, y in zip(present, got)]
    return got


def _check(
    op: str,
    inputs: Mapping[str, np.ndarray | None],
    attrs: Mapping[str, Any],
    *,
    omit: tuple[int, ...] = (),
    initializers: tuple[str, ...] = (),
    opset: int = 14,
) -> list[np.ndarray]:
    """Onyxia's outputs for the node, checked against `_expected` (`initializers` are baked in the file)."""
    model = make_model(
        op, inputs, attrs, opset=opset, num_outputs=_outputs(op), omit_outputs=omit, initializers=initializers
    )
    feeds = {k: v for k, v in inputs.items() if v is not None and k not in initializers}
    actual = onyxia_outputs(model, feeds)
    for output, a, e in zip(model.graph.output, actual, _expected(op, inputs, attrs, omit, opset)):
        assert_close(a, e, output.name)
    return actual


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("direction", sorted(DIRECTIONS))
@pytest.mark.parametrize("layout", [0, 1])
def test_directions_and_layouts_match_onnxruntime(op: str, direction: str, layout: int) -> None:
    """sequence_lens with a zero, a partial and a full length; both initial states."""
    inputs = _inputs(op, direction=direction, layout=layout, lens=[0, 3, 5], initial=(True, True))
    outputs = _check(op, inputs, _attrs(op, direction=direction, layout=layout))
    assert np.abs(outputs[0]).max() > 0.05, "the case should produce a non-trivial Y"


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("layout", [0, 1])
def test_batch_tiles(op: str, layout: int) -> None:
    """Batch 6 runs as a full tile of 4 entries and a half-empty one; lengths differ inside each tile
    (the loop runs to the longest, the others keep their state), reverse direction included."""
    inputs = _inputs(
        op, batch=6, direction="bidirectional", layout=layout, lens=[5, 0, 2, 4, 1, 3], initial=(True, True)
    )
    _check(op, inputs, _attrs(op, direction="bidirectional", layout=layout))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_without_optional_inputs(op: str, direction: str) -> None:
    """No bias, no sequence_lens, no initial state: zeros where onnxruntime assumes them."""
    _check(op, _inputs(op, direction=direction, bias=False), _attrs(op, direction=direction))


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@pytest.mark.parametrize("given", [True, False], ids=["alpha_beta", "defaults"])
def test_each_activation_in_rnn(name: str, given: bool) -> None:
    """The activation as RNN's f; alpha/beta given (consumed only where it takes them) or defaulted."""
    attrs = _attrs("RNN", activations=[SPELLED[name]])
    if given:
        attrs |= {"activation_alpha": [0.7], "activation_beta": [0.3]}
    _check("RNN", _inputs("RNN", lens=[4, 5, 2], initial=(True, False)), attrs)


@pytest.mark.parametrize(
    ("op", "activations", "alpha", "beta"),
    [
        ("LSTM", ["HardSigmoid", "Elu", "Softsign", "Sigmoid", "LeakyRelu", "ScaledTanh"], [0.3, 0.9, 0.05], [0.4]),
        ("LSTM", ["sigmoid", "tanh", "relu", "HardSigmoid", "Softplus", "Affine"], [0.25, 0.5], [0.6, 0.1]),
        ("GRU", ["HardSigmoid", "Softsign", "Sigmoid", "ScaledTanh"], [0.3, 0.8], [0.45, 1.5]),
        ("GRU", ["Sigmoid", "Elu", "HardSigmoid", "ThresholdedRelu"], [], []),
        ("RNN", ["Relu", "LeakyRelu"], [0.2], []),
    ],
)
def test_activations_per_direction(op: str, activations: list[str], alpha: list[float], beta: list[float]) -> None:
    """Bidirectional: each direction its own functions, alpha/beta consumed across both in order."""
    attrs = _attrs(op, direction="bidirectional", activations=activations)
    if alpha:
        attrs["activation_alpha"] = alpha
    if beta:
        attrs["activation_beta"] = beta
    _check(op, _inputs(op, direction="bidirectional", lens=[5, 1, 4], initial=(True, True)), attrs)


@pytest.mark.parametrize("op", OPS)
def test_clip(op: str) -> None:
    inputs = _inputs(op, direction="bidirectional", initial=(True, True))
    inputs["W"], inputs["R"] = _scaled(inputs, "W", 4.0), _scaled(inputs, "R", 4.0)  # pre-activations past the bound
    _check(op, inputs, _attrs(op, direction="bidirectional", clip=0.6))


@pytest.mark.parametrize("input_forget", [0, 1])
@pytest.mark.parametrize("peepholes", [False, True])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_lstm_input_forget_and_peepholes(input_forget: int, peepholes: bool, direction: str) -> None:
    inputs = _inputs("LSTM", direction=direction, lens=[2, 5, 4], initial=(True, True), peepholes=peepholes)
    _check("LSTM", inputs, _attrs("LSTM", direction=direction, input_forget=input_forget, clip=2.0))


@pytest.mark.parametrize("linear_before_reset", [0, 1])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("layout", [0, 1])
def test_gru_linear_before_reset(linear_before_reset: int, bias: bool, layout: int) -> None:
    inputs = _inputs("GRU", direction="bidirectional", layout=layout, bias=bias, lens=[5, 3, 1], initial=(True, False))
    attrs = _attrs("GRU", direction="bidirectional", layout=layout, linear_before_reset=linear_before_reset)
    _check("GRU", inputs, attrs)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("opset", [7, 22])
def test_other_opsets(op: str, opset: int) -> None:
    """Opset 7 (before the layout attribute) and 22 read the same node."""
    inputs = _inputs(op, direction="bidirectional", lens=[3, 5, 1], initial=(True, True), peepholes=True)
    _check(op, inputs, _attrs(op, direction="bidirectional"), opset=opset)


def test_lstm_initial_c_without_initial_h() -> None:
    _check("LSTM", _inputs("LSTM", direction="reverse", initial=(False, True)), _attrs("LSTM", direction="reverse"))


_OMITTED = [
    (op, omit)
    for op in OPS
    for omit in [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2)]
    if max(omit) < _outputs(op) and len(omit) < _outputs(op)
]


@pytest.mark.parametrize(("op", "omit"), _OMITTED, ids=[f"{op}-omit{''.join(map(str, o))}" for op, o in _OMITTED])
def test_optional_outputs(op: str, omit: tuple[int, ...]) -> None:
    """Every proper subset of the outputs left out (ONNX's empty name), the rest still right."""
    _check(op, _inputs(op, direction="bidirectional", lens=[5, 2, 3]), _attrs(op, direction="bidirectional"), omit=omit)


@pytest.mark.parametrize("op", OPS)
def test_weights_as_initializers_and_wide_hidden(op: str) -> None:
    """An exporter's node (weights, bias and peepholes in the file) with more hidden units than one
    workgroup's invocations, so each invocation carries several units."""
    inputs = _inputs(op, seq=4, batch=2, size=12, hidden=300, direction="bidirectional", peepholes=True)
    inputs["W"], inputs["R"] = _scaled(inputs, "W", 0.2), _scaled(inputs, "R", 0.1)
    weights = tuple(n for n in ("W", "R", "B", "P") if inputs.get(n) is not None)
    attrs = _attrs(op, hidden=300, direction="bidirectional")
    _check(op, inputs, attrs, initializers=weights)
    # W and R known at compile time are packed on the host at upload: no PACK dispatch runs
    model = make_model(op, inputs, attrs, opset=14, num_outputs=_outputs(op), initializers=weights)
    assert "recurrent/pack" not in {s.label for s in compile_model(model).shaders}
    runtime_weights = make_model(op, inputs, attrs, opset=14, num_outputs=_outputs(op))
    assert "recurrent/pack" in {s.label for s in compile_model(runtime_weights).shaders}


def _symbolic_model(op: str, layout: int) -> tuple[Any, dict[str, np.ndarray | None]]:
    """A bidirectional node whose X has a symbolic seq_length (and batch size) and whose weights are
    initializers, as an exported speech model has."""
    inputs = _inputs(op, direction="bidirectional", layout=layout, batch=2, initial=(True, True))
    x_dims: list[int | str] = ["batch", "seq", 4] if layout else ["seq", "batch", 4]
    state: list[int | str] = ["batch", 2, 5] if layout else [2, "batch", 5]
    dims: dict[str, Sequence[int | str]] = {"X": x_dims, "initial_h": state, "initial_c": state}
    attrs = _attrs(op, direction="bidirectional", layout=layout)
    num_outputs = 3 if op == "LSTM" else 2
    model = make_model(
        op, inputs, attrs, opset=14, num_outputs=num_outputs, initializers=("W", "R", "B"), dim_params=dims
    )
    return model, inputs


def _resized(
    inputs: Mapping[str, np.ndarray | None], seq: int, batch: int, layout: int
) -> dict[str, np.ndarray | None]:
    """`inputs` with X and the initial states drawn again at (seq, batch); the weights kept."""
    out: dict[str, np.ndarray | None] = {}
    for name, value in inputs.items():
        if value is None or name in ("W", "R", "B"):
            out[name] = value
        elif name == "X":
            shape = (batch, seq, value.shape[-1]) if layout else (seq, batch, value.shape[-1])
            out[name] = _f32(*shape, scale=1.0)
        else:
            shape = (batch, 2, value.shape[-1]) if layout else (2, batch, value.shape[-1])
            out[name] = _f32(*shape, scale=1.0)
    return out


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("layout", [0, 1])
def test_symbolic_seq_length_one_plan(op: str, layout: int) -> None:
    """One plan serves seq_length 3, 11 and 1 (batch 2, then 4): the steps are a fixed list of
    dispatches (no step per time step, no read-back), and no run builds a pipeline."""
    model, inputs = _symbolic_model(op, layout)
    plan = compile_model(model)
    steps = [s for o in plan.operations for s in o.steps]
    assert plan.dispatch_count <= 5, f"{plan.dispatch_count} dispatches: the time loop must not unroll"
    assert not any(isinstance(s, ReadValues) for s in steps), "a recurrent node must not read back"
    executor = runtime().load_model(plan)
    pipelines = None
    attrs = _attrs(op, direction="bidirectional", layout=layout)
    for seq, batch in ((3, 2), (11, 4), (1, 2)):
        sized = _resized(inputs, seq, batch, layout)
        got = executor.run({k: v for k, v in sized.items() if v is not None and k not in ("W", "R", "B")})
        for output, expected in zip(model.graph.output, _expected(op, sized, attrs)):
            assert_close(got[output.name], expected, f"{output.name} at seq_length {seq}, batch {batch}")
        pipelines = pipelines or executor.stats.pipelines_created
        assert executor.stats.pipelines_created == pipelines, f"seq_length {seq}, batch {batch} recompiled"


def _stacked_lstm(layers: int, size: int, hidden: int) -> Any:
    """nn.LSTM(size, hidden, num_layers=layers, bidirectional=True) as torch.onnx writes it: h0/c0
    inputs sliced per layer, Y's direction axis moved next to the features (Transpose, Reshape) to feed
    the next layer, the final states concatenated; seq_length and batch symbolic."""
    nodes, inits = [], []
    x = "input"
    for layer in range(layers):
        k = size if layer == 0 else 2 * hidden
        for name, shape in (("W", (2, 4 * hidden, k)), ("R", (2, 4 * hidden, hidden)), ("B", (2, 8 * hidden))):
            inits.append(numpy_helper.from_array(_f32(*shape, scale=0.3), f"{name}{layer}"))
        for name, lo in (("starts", 2 * layer), ("ends", 2 * layer + 2)):
            inits.append(numpy_helper.from_array(np.array([lo], np.int64), f"{name}{layer}"))
        for state in ("h0", "c0"):
            nodes.append(helper.make_node("Slice", [state, f"starts{layer}", f"ends{layer}"], [f"{state}_{layer}"]))
        lstm_inputs = [x, f"W{layer}", f"R{layer}", f"B{layer}", "", f"h0_{layer}", f"c0_{layer}"]
        outputs = [f"y{layer}", f"hn{layer}", f"cn{layer}"]
        nodes.append(helper.make_node("LSTM", lstm_inputs, outputs, hidden_size=hidden, direction="bidirectional"))
        nodes.append(helper.make_node("Transpose", [f"y{layer}"], [f"yt{layer}"], perm=[0, 2, 1, 3]))
        x = "output" if layer == layers - 1 else f"x{layer + 1}"
        nodes.append(helper.make_node("Reshape", [f"yt{layer}", "features"], [x]))
    inits.append(numpy_helper.from_array(np.array([0, 0, -1], np.int64), "features"))
    for state in ("h", "c"):
        nodes.append(helper.make_node("Concat", [f"{state}n{i}" for i in range(layers)], [f"{state}n"], axis=0))
    f32 = onnx.TensorProto.FLOAT
    graph_inputs = [helper.make_tensor_value_info("input", f32, ["seq_len", "batch", size])]
    graph_inputs += [helper.make_tensor_value_info(s, f32, [2 * layers, "batch", hidden]) for s in ("h0", "c0")]
    graph_outputs = [helper.make_tensor_value_info(n, f32, None) for n in ("output", "hn", "cn")]
    graph = helper.make_graph(nodes, "torch_lstm", graph_inputs, graph_outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def test_torch_style_stacked_bidirectional_lstm() -> None:
    """The graph torch.onnx exports for a 2-layer bidirectional nn.LSTM (torch is not a test dependency,
    so the graph is written here node for node), one plan at three (seq_len, batch) sizes."""
    layers, size, hidden = 2, 6, 7
    model = _stacked_lstm(layers, size, hidden)

    def feeds(seq: int, batch: int) -> dict[str, np.ndarray]:
        states = {s: _f32(2 * layers, batch, hidden, scale=1.0) for s in ("h0", "c0")}
        return {"input": _f32(seq, batch, size, scale=1.0), **states}

    check_rebinding(model, [feeds(9, 2), feeds(4, 3), feeds(1, 1)])


def test_two_gru_layers_without_bias_of_different_sizes() -> None:
    """Two linear_before_reset GRUs without B (each binds zeros for its Rb, sized for it) in one graph,
    the first one's Y squeezed into the second one's X."""
    x, hidden = _f32(5, 2, 4, scale=1.0), (6, 3)
    inits = [numpy_helper.from_array(np.array([1], np.int64), "axis")]
    nodes = []
    for layer, (h, k) in enumerate(zip(hidden, (4, hidden[0]))):
        inits += [
            numpy_helper.from_array(_f32(1, 3 * h, k), f"W{layer}"),
            numpy_helper.from_array(_f32(1, 3 * h, h), f"R{layer}"),
        ]
        source = "x" if layer == 0 else "x1"
        names = [f"y{layer}", f"h{layer}"]
        nodes.append(
            helper.make_node("GRU", [source, f"W{layer}", f"R{layer}"], names, hidden_size=h, linear_before_reset=1)
        )
    nodes.insert(1, helper.make_node("Squeeze", ["y0", "axis"], ["x1"]))
    f32 = onnx.TensorProto.FLOAT
    outputs = [helper.make_tensor_value_info(n, f32, None) for n in ("y1", "h0", "h1")]
    graph = helper.make_graph(nodes, "grus", [helper.make_tensor_value_info("x", f32, [5, 2, 4])], outputs, inits)
    check_rebinding(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=10), [{"x": x}])


def _named(op: str, inputs: Mapping[str, np.ndarray | None], attrs: Mapping[str, Any]) -> Any:
    model = make_model(op, inputs, attrs, opset=14, num_outputs=2)
    model.graph.node[0].name = "encoder/rnn_7"
    return model


@pytest.mark.parametrize("bad", [6, -1])
def test_sequence_lens_out_of_range_is_an_error_naming_the_node(bad: int) -> None:
    inputs = _inputs("GRU", lens=[2, bad, 5])
    executor = runtime().load_model(compile_model(_named("GRU", inputs, _attrs("GRU"))))
    feeds = {k: v for k, v in inputs.items() if v is not None}
    with pytest.raises(InputError, match=rf"node 'encoder/rnn_7' \(GRU\): index {bad} is out of range.*sequence_lens"):
        executor.run(feeds)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"W": _f32(1, 15, 3)}, r"input 1 \(W\) has shape \[1, 15, 3\]; expected dim 2 to be 4"),
        ({"R": _f32(2, 15, 5)}, r"input 2 \(R\) has shape \[2, 15, 5\]; expected dim 0 to be 1"),
        ({"B": _f32(1, 15)}, r"input 3 \(B\) has shape \[1, 15\]; expected dim 1 to be 30"),
        ({"sequence_lens": np.array([1, 2, 3], np.int64)}, r"input 4 \(sequence_lens\) is int64; expected int32"),
        ({"X": np.ones((5, 3, 4), np.int32)}, r"input 0 \(X\) is int32; expected float32"),
        ({"X": _f32(5, 4)}, r"input 0 \(X\) has rank 2; expected 3"),
    ],
)
def test_malformed_inputs_are_errors_naming_the_node(change: Mapping[str, np.ndarray], message: str) -> None:
    """Built in code (a file's schema check would refuse some of these first, naming the node too)."""
    inputs = {**_inputs("GRU", lens=[1, 2, 3]), **change}
    b = GraphBuilder(opsets={"": 14})
    tensors = [None if v is None else b.input(k, DataType.from_numpy(v.dtype), v.shape) for k, v in inputs.items()]
    b.output(*b.op("GRU", *tensors, _outputs=2, _name="encoder/rnn_7", hidden_size=5))
    with pytest.raises(ShapeInferenceError, match=rf"node 'encoder/rnn_7' \(GRU.*{message}"):
        CompilerPipeline(core_operator_registry()).compile(b.graph, {})


def test_a_mis_shaped_file_is_refused_naming_the_node() -> None:
    inputs = {**_inputs("GRU"), "X": _f32(5, 4)}
    with pytest.raises(OnyxiaError, match=r"encoder/rnn_7.*rank 3"):
        compile_model(_named("GRU", inputs, _attrs("GRU")))


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        ({"direction": "sideways"}, r"attribute direction is 'sideways'"),
        ({"activations": ["Swish", "Tanh"]}, r"attribute activations names 'Swish'"),
        ({"activations": ["Sigmoid"]}, r"attribute activations has 1 entries; expected 2"),
        ({"layout": 2}, r"attribute layout is 2; expected 0 or 1"),
        ({"clip": -1.0}, r"attribute clip is -1.0; expected a positive threshold"),
    ],
)
def test_bad_attributes_are_errors_naming_the_node(attrs: Mapping[str, Any], message: str) -> None:
    inputs = _inputs("GRU")
    model = _named("GRU", inputs, {**_attrs("GRU"), **attrs})
    with pytest.raises(Exception, match=rf"{message}") as info:
        compile_model(model)
    assert "encoder/rnn_7" in str(info.value)
