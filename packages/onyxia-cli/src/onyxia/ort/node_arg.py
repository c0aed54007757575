"""`NodeArg` and `ModelMetadata`: what onnxruntime's `get_inputs()` and `get_modelmeta()` hand back.

Both are plain values (picklable, no graph behind them), made by `onyxia.ort.signature` from the model's
protobuf, so a compiled-plan cache can store them beside the plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Dim", "ModelMetadata", "NodeArg"]

Dim = int | str | None  # onnxruntime's spelling: a value, a dim_param exactly as written, or None


class NodeArg:
    """One graph input, output or overridable initializer: `.name`, `.type` (``"tensor(float)"``) and
    `.shape` (ints, the file's dim_param strings, None for a dim with neither), as onnxruntime 1.32 reports them."""

    __slots__ = ("_name", "_shape", "_type")

    def __init__(self, name: str, type: str, shape: list[Dim]) -> None:  # noqa: A002 - onnxruntime's name
        self._name, self._type, self._shape = name, type, list(shape)

    @property
    def name(self) -> str:
        return self._name

    @property
    def type(self) -> str:
        return self._type

    @property
    def shape(self) -> list[Dim]:
        return list(self._shape)  # a copy, as onnxruntime returns a fresh list each time

    def __str__(self) -> str:
        return f"NodeArg(name={self._name!r}, type={self._type!r}, shape={self._shape!r})"

    __repr__ = __str__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NodeArg):
            return NotImplemented
        return (self._name, self._type, self._shape) == (other._name, other._type, other._shape)

    def __hash__(self) -> int:
        return hash((self._name, self._type))

    def __getstate__(self) -> tuple[str, str, list[Dim]]:
        return self._name, self._type, self._shape

    def __setstate__(self, state: tuple[str, str, list[Dim]]) -> None:
        self._name, self._type, self._shape = state


@dataclass(frozen=True)
class ModelMetadata:
    """onnxruntime's `ModelMetadata`; `custom_metadata_map` is exactly the file's `metadata_props`
    (packages read their label lists from it), with none of Onyxia's own keys."""

    producer_name: str = ""
    graph_name: str = ""
    domain: str = ""
    description: str = ""
    graph_description: str = ""
    version: int = 0
    custom_metadata_map: dict[str, str] = field(default_factory=dict)
