"""The layer-norm family table drives these tests: every row, every output combination, both float dtypes."""

import numpy as np
import pytest
from oracle import assert_close, check_op, compile_model, make_model, reference_outputs, runtime

from onyxia.core import ShapeInferenceError, UnsupportedOpError
from onyxia.operators.normalization import LAYER_NORMS, LAYER_NORMS_MS

RNG = np.random.default_rng(0)
ROWS = {**LAYER_NORMS, **LAYER_NORMS_MS}
DOMAIN = {**{op: "" for op in LAYER_NORMS}, **{op: "com.microsoft" for op in LAYER_NORMS_MS}}
OPSET = 23  # RMSNormalization's first opset (LayerNormalization: 17)


def _inputs(op: str, dtype: type, shape: tuple[int, ...], axis: int = -1, **shapes: tuple[int, ...]) -> dict:
    """Random operands by role; `shapes` overrides a role's shape, None leaves an optional input out."""
    normalized = shape[axis:]
    inputs = {}
    for role in ROWS[op].inputs:
        role_shape = shapes.get(role, shape if role in ("x", "skip") else normalized)
        values = RNG.standard_normal(role_shape) if role_shape is not None else None
        inputs[role] = None if values is None else (values + (1.0 if role == "scale" else 0.0)).astype(dtype)
    return inputs


def _output_combos(op: str) -> list[tuple[int, tuple[int, ...]]]:
    """(num_outputs, omitted positions): Y alone, everything, and Y with the last output only."""
    n = len(ROWS[op].outputs)
    return [(1, ()), (n, ()), (n, tuple(range(1, n - 1)))]


CASES = [
    (op, dtype, combo)
    for op in sorted(ROWS)
    for dtype in (np.float32, np.float16)
    for combo in dict.fromkeys(_output_combos(op))
]


@pytest.mark.parametrize(("op", "dtype", "combo"), CASES, ids=str)
def test_rows_match_onnxruntime(op: str, dtype: type, combo: tuple[int, tuple[int, ...]]) -> None:
    num_outputs, omitted = combo
    check_op(
        op,
        _inputs(op, dtype, (2, 3, 24)),
        {"epsilon": 1e-6},
        opset=OPSET,
        domain=DOMAIN[op],
        num_outputs=num_outputs,
        omit_outputs=omitted,
    )


@pytest.mark.parametrize("op", sorted(LAYER_NORMS))
@pytest.mark.parametrize("axis", [0, 1, -2])
def test_non_last_axis(op: str, axis: int) -> None:
    n = len(ROWS[op].outputs)
    check_op(op, _inputs(op, np.float32, (2, 3, 8), axis), {"axis": axis}, opset=OPSET, num_outputs=n)


def test_scale_broadcasts_over_leading_normalized_dims() -> None:
    inputs = _inputs("LayerNormalization", np.float32, (2, 3, 8), 1, scale=(8,), beta=(1, 8))
    check_op("LayerNormalization", inputs, {"axis": 1}, opset=OPSET, num_outputs=3)


@pytest.mark.parametrize("op", sorted(ROWS))
def test_long_rows_loop_over_the_workgroup(op: str) -> None:
    """1000 elements per row: several elements per invocation, not a power of two."""
    check_op(op, _inputs(op, np.float32, (3, 1000)), opset=OPSET, domain=DOMAIN[op], num_outputs=len(ROWS[op].outputs))


@pytest.mark.parametrize("skip_shape", [(1, 3, 16), (3, 16)])
@pytest.mark.parametrize("op", sorted(LAYER_NORMS_MS))
def test_skip_broadcasts_over_batch(op: str, skip_shape: tuple[int, ...]) -> None:
    check_op(op, _inputs(op, np.float32, (2, 3, 16), skip=skip_shape), domain=DOMAIN[op], num_outputs=4)


@pytest.mark.parametrize(
    ("op", "left_out"),
    [("LayerNormalization", "beta"), ("SkipLayerNormalization", "beta"), ("SkipLayerNormalization", "bias")],
)
def test_optional_inputs_left_out(op: str, left_out: str) -> None:
    inputs = _inputs(op, np.float32, (2, 3, 16), **{left_out: None})
    if list(inputs)[-1] == left_out:
        del inputs[left_out]  # a trailing optional input is simply not named
    check_op(op, inputs, opset=OPSET, domain=DOMAIN[op], num_outputs=len(ROWS[op].outputs))


@pytest.mark.parametrize(("x_dtype", "scale_dtype"), [(np.float16, np.float32), (np.float32, np.float16)])
def test_simplified_output_takes_the_scale_dtype(x_dtype: type, scale_dtype: type) -> None:
    """onnxruntime types Y like the scale (type V), so an f16 graph may norm in f32 without a Cast."""
    x = RNG.standard_normal((2, 3, 16)).astype(x_dtype)
    scale = RNG.standard_normal(16).astype(scale_dtype)
    check_op("SimplifiedLayerNormalization", {"x": x, "scale": scale}, opset=OPSET, num_outputs=2)


@pytest.mark.parametrize("op", sorted(ROWS))
def test_symbolic_leading_dims_rebind_without_recompiling(op: str) -> None:
    """Batch and sequence are immediates: two sizes run on one set of pipelines."""
    row = ROWS[op]
    dim_params = {role: ["batch", "seq", 32] for role in ("x", "skip") if role in row.inputs}
    model = make_model(
        op, _inputs(op, np.float32, (1, 1, 32)), opset=OPSET, domain=DOMAIN[op],
        num_outputs=len(row.outputs), dim_params=dim_params,
    )  # fmt: skip
    executor = runtime().load_model(compile_model(model))
    pipelines = None
    for shape in [(2, 5, 32), (1, 3, 32)]:
        feeds = _inputs(op, np.float32, shape)
        got = executor.run(feeds)
        for output, expected in zip(model.graph.output, reference_outputs(model, feeds, "ort")):
            assert_close(got[output.name], expected, output.name)
        pipelines = pipelines or executor.stats.pipelines_created
        assert executor.stats.pipelines_created == pipelines


@pytest.mark.parametrize("op", sorted(ROWS))
def test_known_inputs_fold_to_no_gpu_step(op: str) -> None:
    inputs = _inputs(op, np.float32, (2, 3, 8))
    kwargs = {"opset": OPSET, "domain": DOMAIN[op], "num_outputs": len(ROWS[op].outputs)}
    assert compile_model(make_model(op, inputs, initializers=list(inputs), **kwargs)).operations == []
    check_op(op, inputs, initializers=list(inputs), **kwargs)


def _compile_named(op: str, inputs: dict, attrs: dict, name: str) -> None:
    model = make_model(op, inputs, attrs, opset=OPSET, domain=DOMAIN[op], num_outputs=1)
    model.graph.node[0].name = name
    compile_model(model)


def test_unsupported_stash_type_names_node_op_and_attribute() -> None:
    inputs = _inputs("LayerNormalization", np.float32, (2, 8))
    with pytest.raises(UnsupportedOpError, match=r"node 'ln_7' \(LayerNormalization.*stash_type=0"):
        _compile_named("LayerNormalization", inputs, {"stash_type": 0}, "ln_7")


def test_scale_of_the_wrong_shape_names_the_input() -> None:
    inputs = _inputs("SimplifiedLayerNormalization", np.float32, (2, 8), scale=(4,))
    with pytest.raises(ShapeInferenceError, match=r"node 'norm' \(SimplifiedLayerNormalization.*input 1 \(scale\)"):
        _compile_named("SimplifiedLayerNormalization", inputs, {}, "norm")
