"""Write onyxia-onnx's table of onnxruntime contrib-op schemas (`contrib_schemas.json`).

The `onnx` package has no schema for onnxruntime's com.microsoft ops, so Onyxia's loader checks them
against this table, as onnxruntime checks them at session creation: input and output counts,
attribute names and types, type constraints. Rows are read from the installed onnxruntime
(``get_all_operator_schema()``, the schemas ContribOperators.md documents) for every contrib op the
built-in registry runs, so a new operator gets its row by running this again:

    .venv/bin/python tools/contrib_schemas.py

Needs onnxruntime (the project pins 1.32) and onyxia-operators; the package reads only the JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import onnxruntime
from onnx import TensorProto
from onnxruntime.capi import onnxruntime_pybind11_state as ort_schemas

from onyxia.operators.registry import core_operator_registry

OUT = Path(__file__).resolve().parents[1] / "packages/onyxia-onnx/src/onyxia/onnx/contrib_schemas.json"
_DEFAULT_DOMAIN_CONTRIB = {"SimplifiedLayerNormalization"}  # onnxruntime's, registered in the ONNX domain


def _dtype(type_str: str) -> int | None:
    """``tensor(float16)`` -> TensorProto.FLOAT16; None for what is not a tensor (sequences, maps)."""
    if not (type_str.startswith("tensor(") and type_str.endswith(")")):
        return None
    try:
        return int(TensorProto.DataType.Value(type_str[len("tensor(") : -1].upper()))
    except ValueError:
        return None


def _row(schema: Any) -> dict[str, Any]:
    types = {
        c.type_param_str: sorted(d for d in (_dtype(t) for t in c.allowed_type_strs) if d is not None)
        for c in schema.type_constraints
    }

    def params(formal: Any) -> list[list[str]]:
        """[name, type parameter, option]: a parameter typed directly (no constraint name) gets a
        constraint of its own; option is single, optional, variadic or variadic-mixed (its values
        may differ in dtype)."""
        out = []
        for p in formal:
            if p.typeStr not in types:
                types[p.typeStr] = sorted(d for d in (_dtype(t) for t in p.types) if d is not None)
            option = str(p.option).rsplit(".", 1)[-1].lower()
            if option == "variadic" and not p.isHomogeneous:
                option = "variadic-mixed"
            out.append([p.name, p.typeStr, option])
        return out

    attributes = {name: int(a.type.value) for name, a in sorted(schema.attributes.items())}
    required = sorted(name for name, a in schema.attributes.items() if a.required)
    return {
        "min_inputs": schema.min_input,
        "inputs": params(schema.inputs),
        "min_outputs": schema.min_output,
        "outputs": params(schema.outputs),
        "types": dict(sorted(types.items())),
        "attributes": attributes,
        "required": required,
    }


def main() -> None:
    registry = core_operator_registry(plugins=False)
    wanted = {(d, op) for d, op in registry.op_types() if d == "com.microsoft"}
    wanted |= {("", op) for op in _DEFAULT_DOMAIN_CONTRIB}
    schemas = {(s.domain, s.name): s for s in ort_schemas.get_all_operator_schema() if s.domain == "com.microsoft"}
    schemas |= {
        ("", s.name): s
        for s in ort_schemas.get_all_operator_schema()
        if s.name in _DEFAULT_DOMAIN_CONTRIB and s.domain == ""
    }
    missing = sorted(wanted - schemas.keys())
    if missing:
        raise SystemExit(f"onnxruntime has no schema for {missing}")
    rows = {f"{d}::{op}": _row(schemas[(d, op)]) for d, op in sorted(wanted)}
    lines = [f"  {json.dumps(name)}: {json.dumps(row)}" for name, row in rows.items()]  # one op per line
    OUT.write_text(f'{{"onnxruntime": "{onnxruntime.__version__}", "ops": {{\n' + ",\n".join(lines) + "\n}}\n")
    print(f"{OUT}: {len(rows)} ops from onnxruntime {onnxruntime.__version__}")


if __name__ == "__main__":
    main()
