"""Which operator implements (domain, op_type) at a given opset, and where its WGSL modules live.

Registration is data: `register()` chains, `register_family()` takes a whole family table.
`passes` carries the rewrites an operator package wants by default (a fused or transposed-operand
op is only worth registering with the pass that produces it); `CompilerPipeline` adds them.
Packages that publish operators expose a function under the ``onyxia.operators`` entry-point
group; `discover()` calls each with the registry, so a custom-op package works after a plain
``pip install``.

The `Pass` protocol and its `Stage` are defined here too (`onyxia.core.passes` re-exports them): a
pass's `run` takes the registry and the registry holds the default passes, so one module holds
both and neither imports the other.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeAlias, runtime_checkable

from onyxia.core.errors import OnyxiaError
from onyxia.core.operator import Operator
from onyxia.core.plugin_api import PluginVersionError, check_plugin_api
from onyxia.core.wgsl import ShaderLibrary

if TYPE_CHECKING:
    from onyxia.core.ir_graph import IrGraph

__all__ = [
    "ENTRY_POINT_GROUP",
    "FamilyKey",
    "FamilyTable",
    "OperatorRegistry",
    "Pass",
    "Registration",
    "Stage",
    "VersionedKey",
    "merge_families",
]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "onyxia.operators"

VersionedKey: TypeAlias = tuple[str, int, int | None]  # ("Softmax", 1, 12): op type, first and last opset
FamilyKey: TypeAlias = str | VersionedKey
# Mapping is invariant in its key, so a table typed `dict[str, BinaryElementwiseOp]` is no
# `Mapping[FamilyKey, Operator]`: accept each key type a family table is written with.
FamilyTable: TypeAlias = Mapping[str, Operator] | Mapping[VersionedKey, Operator] | Mapping[FamilyKey, Operator]


class Stage(enum.IntEnum):
    """Pipeline stages, in the order they run."""

    RESOLUTION = 0  # bind the dims the caller fixed
    INFERENCE = 1  # shapes and dtypes of every tensor (folding as it goes)
    FOLDING = 2  # compile-time values
    OPTIMIZATION = 3  # rewrites
    PLANNING = 4  # GPU steps


@runtime_checkable
class Pass(Protocol):
    """A standalone object that edits a graph in place and says if it changed it.

    A pass that can count its work may also set ``last_rewrites: int`` in each `run` (how many
    rewrites that run applied); the pipeline's `PassStats` counts 1 per changed run otherwise. It is
    not a protocol member, so passes without it still satisfy `Pass`."""

    name: str
    stage: Stage

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        """Edit `graph` in place; return True when anything changed."""
        ...


class Registration(NamedTuple):
    """One registered operator and the opsets it serves (`until` inclusive; None: open-ended)."""

    domain: str  # "" for ai.onnx
    op_type: str
    since: int
    until: int | None
    operator: Operator


@dataclass(frozen=True)
class _Entry:
    since: int
    until: int | None  # inclusive; None = open-ended
    operator: Operator


class OperatorRegistry:
    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], list[_Entry]] = {}
        self.shaders = ShaderLibrary()
        self.plugins: list[str] = []
        self.passes: list[Pass] = []  # default passes, in the order they run within their stage

    def register(
        self,
        op_type: str,
        operator: Operator,
        *,
        domain: str = "",
        since: int = 1,
        until: int | None = None,
    ) -> OperatorRegistry:
        """Add `operator` for opsets `since..until` (inclusive); later registrations win ties."""
        self._entries.setdefault((_canon(domain), op_type), []).insert(0, _Entry(since, until, operator))
        return self

    def register_family(self, domain: str, table: FamilyTable) -> OperatorRegistry:
        """Register a family table; a key ``("Softmax", 1, 12)`` limits a row to opsets 1..12."""
        for key, operator in table.items():
            op_type, since, until = (key, 1, None) if isinstance(key, str) else key
            self.register(op_type, operator, domain=domain, since=since, until=until)
        return self

    def get(self, domain: str, op_type: str, opset: int | None = None) -> Operator | None:
        for entry in self._entries.get((_canon(domain), op_type), []):
            if opset is None or opset <= 0 or (entry.since <= opset and (entry.until is None or opset <= entry.until)):
                return entry.operator
        return None

    def __contains__(self, key: tuple[str, str]) -> bool:
        return (_canon(key[0]), key[1]) in self._entries

    def op_types(self) -> list[tuple[str, str]]:
        """Every registered (domain, op_type), sorted."""
        return sorted(self._entries)

    def registrations(self) -> list[Registration]:
        """Every registration, sorted by domain, op type and first opset: what ``onyxia ops`` lists."""
        rows = [Registration(d, op, e.since, e.until, e.operator) for (d, op), es in self._entries.items() for e in es]
        return sorted(rows, key=lambda r: (r.domain, r.op_type, r.since))

    def discover(self) -> OperatorRegistry:
        """Call every ``onyxia.operators`` entry point with this registry, once its plugin API version is
        checked (`onyxia.core.plugin_api`: a mismatch raises `PluginVersionError` naming the package)."""
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.name in self.plugins:
                continue
            try:
                register = ep.load()
                check_plugin_api(ep, register)  # an incompatible plugin API version stops here, named
                register(self)
            except PluginVersionError:
                raise
            except Exception as e:  # a broken plugin must say which one it is
                raise OnyxiaError(f"operator plugin '{ep.name}' ({ep.value}) failed to register: {e}") from e
            self.plugins.append(ep.name)
            log.info("registered operator plugin %s", ep.name)
        return self


def merge_families(*tables: FamilyTable) -> dict[FamilyKey, Operator]:
    """One table from several (later rows win), where ``{**a, **b}`` would not type-check across
    key types: a package registers its plain and its opset-ranged rows as one family."""
    merged: dict[FamilyKey, Operator] = {}
    for table in tables:
        merged.update(table.items())
    return merged


def _canon(domain: str) -> str:
    """ONNX writes the default domain as '' or 'ai.onnx'."""
    return "" if domain in ("", "ai.onnx") else domain
