"""Every contrib op the built-in operators run has onnxruntime's schema in onyxia-onnx's table
(`tools/contrib_schemas.py` writes it), so the loader checks its nodes as onnxruntime would."""

from __future__ import annotations

from onyxia.onnx.contrib_schemas import CONTRIB_SCHEMAS
from onyxia.operators import core_operator_registry


def test_every_registered_contrib_op_has_a_schema() -> None:
    registered = {(d, op) for d, op in core_operator_registry(plugins=False).op_types() if d == "com.microsoft"}
    missing = sorted(registered - CONTRIB_SCHEMAS.keys())
    assert not missing, f"run tools/contrib_schemas.py: no schema for {missing}"


def test_variadic_and_optional_inputs_follow_onnxruntime() -> None:
    concat = CONTRIB_SCHEMAS[("com.microsoft", "QLinearConcat")]
    assert concat.variadic and concat.mixed and concat.max_inputs is None
    assert concat.input_param(7) == concat.inputs[-1]
    lstm = CONTRIB_SCHEMAS[("com.microsoft", "DynamicQuantizeLSTM")]
    assert lstm.min_inputs == 12 and 3 in lstm.optional and 0 not in lstm.optional  # B may be empty, X not
