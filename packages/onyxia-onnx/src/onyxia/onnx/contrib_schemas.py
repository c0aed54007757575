"""Schemas of the onnxruntime contrib ops Onyxia runs, which the `onnx` package has no schema for.

onnxruntime registers these (com.microsoft, plus SimplifiedLayerNormalization in the default
domain) and checks them at session creation like any ONNX op: input/output counts, attribute
names and types, and type constraints. Without this table a GroupQueryAttention with seqlens_k
as int64, or with an unknown attribute, would be accepted here and rejected by onnxruntime.
The rows are onnxruntime 1.32's own schemas, written to ``contrib_schemas.json`` by
``tools/contrib_schemas.py`` for every contrib op the built-in operators run (run it again after
adding one); `_SCALARS` adds what onnxruntime checks in its kernels rather than in the schema.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

__all__ = ["CONTRIB_SCHEMAS", "ContribSchema", "contrib_schema"]

# inputs onnxruntime's kernels require to hold one element (its schema cannot say so)
_SCALARS: dict[tuple[str, str], frozenset[str]] = {
    ("com.microsoft", "GroupQueryAttention"): frozenset({"total_sequence_length"}),
}


@dataclass(frozen=True)
class ContribSchema:
    """One op: `inputs`/`outputs` are (name, type parameter) in order; a node lists at least `min_*`
    of them (optional ones by an empty name), and leaves empty only those in `optional`.

    `types` maps each type parameter to its allowed `TensorProto` dtypes; inputs sharing a
    parameter must share a dtype. With `variadic` the last input repeats (`mixed`: its values may
    differ in dtype). `attributes` maps name -> `AttributeProto` type code; `required` lists the
    attributes without a default. `scalars` names inputs that must hold one element.
    """

    min_inputs: int
    inputs: tuple[tuple[str, str], ...]
    min_outputs: int
    outputs: tuple[tuple[str, str], ...]
    types: dict[str, frozenset[int]]
    attributes: dict[str, int]
    required: frozenset[str] = frozenset()
    scalars: frozenset[str] = frozenset()
    optional: frozenset[int] = frozenset()  # input positions that may be empty
    variadic: bool = False
    mixed: bool = False

    @property
    def max_inputs(self) -> int | None:
        return None if self.variadic else len(self.inputs)

    def input_param(self, index: int) -> tuple[str, str] | None:
        """(name, type parameter) of input `index` (the repeated last one past the end when variadic)."""
        if index < len(self.inputs):
            return self.inputs[index]
        return self.inputs[-1] if self.variadic and self.inputs else None


def _schema(key: tuple[str, str], row: dict[str, Any]) -> ContribSchema:
    inputs = [(name, param) for name, param, _ in row["inputs"]]
    options = [option for _, _, option in row["inputs"]]
    return ContribSchema(
        min_inputs=row["min_inputs"],
        inputs=tuple(inputs),
        min_outputs=row["min_outputs"],
        outputs=tuple((name, param) for name, param, _ in row["outputs"]),
        types={param: frozenset(dtypes) for param, dtypes in row["types"].items()},
        attributes=dict(row["attributes"]),
        required=frozenset(row["required"]),
        scalars=_SCALARS.get(key, frozenset()),
        optional=frozenset(i for i, option in enumerate(options) if option == "optional"),
        variadic=bool(options) and options[-1].startswith("variadic"),
        mixed=bool(options) and options[-1] == "variadic-mixed",
    )


@cache
def _load() -> dict[tuple[str, str], ContribSchema]:
    text = resources.files(__package__).joinpath("contrib_schemas.json").read_text(encoding="utf-8")
    table: dict[tuple[str, str], ContribSchema] = {}
    for name, row in json.loads(text)["ops"].items():
        domain, op_type = name.split("::")
        table[(domain, op_type)] = _schema((domain, op_type), row)
    return table


CONTRIB_SCHEMAS: dict[tuple[str, str], ContribSchema] = _load()


def contrib_schema(domain: str, op_type: str) -> ContribSchema | None:
    """The table's row for (domain, op_type); com.microsoft ops only exist at opset version 1."""
    return CONTRIB_SCHEMAS.get(("" if domain == "ai.onnx" else domain, op_type))
