"""The operator catalog: every registration of a registry, and what onnx and onnxruntime define that it lacks.

Supported rows come from `OperatorRegistry.registrations()`. A row registered "since 1" serves whatever
versions onnx defines, so its first opset is shown as the later of its `since` and onnx's first schema
version of the op. The missing rows compare the registry with onnx's own schemas
(`onnx.defs.get_all_schemas_with_history()`: ai.onnx, ai.onnx.ml, ai.onnx.preview, ...) and with
onnxruntime's contrib schemas (com.microsoft, from the installed onnxruntime's `get_all_operator_schema()`,
the source `tools/contrib_schemas.py` reads too; onyxia-onnx's `contrib_schemas.json` holds only the ops
Onyxia runs). A schema version no registration serves is missing: a whole op, or its newer versions
(`MissingOp.versions`). Without onnxruntime, com.microsoft is reported as not checked, never as complete.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from onyxia.core import OperatorRegistry
from onyxia.core.registry import Registration

__all__ = ["CONTRIB_DOMAIN", "Catalog", "MissingOp", "SupportedOp", "domain_name", "operator_catalog"]

CONTRIB_DOMAIN = "com.microsoft"


@dataclass(frozen=True)
class SupportedOp:
    domain: str  # "" for ai.onnx
    op_type: str
    since: int
    until: int | None  # inclusive; None: every later version
    module: str  # where the operator's class lives, relative to onyxia.operators for built-ins

    @property
    def opsets(self) -> str:
        return f"{self.since}+" if self.until is None else f"{self.since}-{self.until}"


@dataclass(frozen=True)
class MissingOp:
    domain: str
    op_type: str
    versions: tuple[int, ...]  # the schema versions no registration serves
    partial: bool  # some other version of the op is served
    deprecated: bool

    @property
    def opsets(self) -> str:
        return ", ".join(map(str, self.versions))


@dataclass(frozen=True)
class Catalog:
    supported: tuple[SupportedOp, ...]
    missing: tuple[MissingOp, ...]
    sources: dict[str, str] = field(default_factory=dict)  # what was compared: "onnx 1.23.2", ...
    unchecked: dict[str, str] = field(default_factory=dict)  # domain -> why it was not compared

    def domains(self) -> list[str]:
        return sorted({r.domain for r in self.supported} | {r.domain for r in self.missing})


@dataclass(frozen=True)
class _Schema:
    domain: str
    name: str
    versions: tuple[int, ...]
    deprecated: bool


def domain_name(domain: str) -> str:
    return domain or "ai.onnx"


def operator_catalog(registry: OperatorRegistry) -> Catalog:
    """The registry's operators against onnx's schemas and, when onnxruntime is importable, its contrib ones."""
    schemas, sources, unchecked = _onnx_schemas()
    contrib, source, why = _contrib_schemas()
    schemas |= contrib
    if source:
        sources["onnxruntime"] = source
    if why:
        unchecked[CONTRIB_DOMAIN] = why
    registrations = registry.registrations()
    supported = tuple(_supported(r, schemas.get((r.domain, r.op_type))) for r in registrations)
    missing = tuple(_missing(schemas.values(), registry))
    return Catalog(supported, missing, sources, unchecked)


def _supported(reg: Registration, schema: _Schema | None) -> SupportedOp:
    since = max(reg.since, schema.versions[0]) if schema else reg.since
    module = type(reg.operator).__module__.removeprefix("onyxia.operators.")
    return SupportedOp(reg.domain, reg.op_type, since, reg.until, module)


def _missing(schemas: Iterable[_Schema], registry: OperatorRegistry) -> list[MissingOp]:
    rows = []
    for schema in sorted(schemas, key=lambda s: (s.domain, s.name)):
        lacking = tuple(v for v in schema.versions if registry.get(schema.domain, schema.name, v) is None)
        if lacking:
            partial = len(lacking) < len(schema.versions)
            rows.append(MissingOp(schema.domain, schema.name, lacking, partial, schema.deprecated))
    return rows


def _onnx_schemas() -> tuple[dict[tuple[str, str], _Schema], dict[str, str], dict[str, str]]:
    try:
        import onnx
        from onnx import defs
    except ImportError as e:  # onyxia-onnx depends on onnx: only a broken install gets here
        return {}, {}, {"ai.onnx": f"onnx is not importable: {e}"}
    schemas = _group((s.domain, s.name, s.since_version, s.deprecated) for s in defs.get_all_schemas_with_history())
    return schemas, {"onnx": onnx.__version__}, {}


def _contrib_schemas() -> tuple[dict[tuple[str, str], _Schema], str, str]:
    """com.microsoft from onnxruntime: (schemas, its version, "") or ({}, "", why not)."""
    try:
        import onnxruntime
        from onnxruntime.capi import onnxruntime_pybind11_state as ort_schemas
    except ImportError as e:
        return {}, "", f"needs onnxruntime for its contrib schemas ({e}); pip install onnxruntime"
    rows = ((s.domain, s.name, s.since_version, s.deprecated) for s in ort_schemas.get_all_operator_schema())
    return _group(r for r in rows if r[0] == CONTRIB_DOMAIN), onnxruntime.__version__, ""


def _group(rows: Iterable[tuple[str, str, int, bool]]) -> dict[tuple[str, str], _Schema]:
    versions: dict[tuple[str, str], list[int]] = defaultdict(list)
    deprecated: dict[tuple[str, str], bool] = {}
    for domain, name, since, is_deprecated in rows:
        key = ("" if domain == "ai.onnx" else domain, name)
        versions[key].append(since)
        if since >= max(versions[key]):
            deprecated[key] = bool(is_deprecated)  # the newest version says whether the op is deprecated
    return {k: _Schema(k[0], k[1], tuple(sorted(set(v))), deprecated[k]) for k, v in versions.items()}
