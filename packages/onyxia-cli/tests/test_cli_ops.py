"""`onyxia ops`: the registry's operators by domain, name and opsets, and with --missing what onnx's and
onnxruntime's schemas define that no registration serves; the pass catalog the docs' pass table reads."""

from __future__ import annotations

import json
import sys

import pytest
from onnx import defs

from onyxia.cli.catalog import operator_catalog, pass_rows
from onyxia.compiler import CompilerPipeline
from onyxia.core import FixedPoint
from onyxia.operators import core_operator_registry, default_passes

REGISTRY = core_operator_registry()


def _domain(name: str) -> str:
    return "" if name == "ai.onnx" else name


def test_ops_lists_every_registered_operator(cli) -> None:
    result = cli("ops", "--json")
    assert result.code == 0, result.err
    rows = json.loads(result.out)["operators"]
    assert {(_domain(r["domain"]), r["op_type"]) for r in rows} == set(REGISTRY.op_types())
    for r in rows:  # each row's first opset is one its operator serves
        assert REGISTRY.get(_domain(r["domain"]), r["op_type"], r["since"]) is not None, r


def test_ops_table_counts_operator_types(cli) -> None:
    result = cli("ops")
    assert result.code == 0, result.err
    assert f"{len(REGISTRY.op_types())} operators" in result.out


def test_missing_covers_every_onnx_schema_version_exactly_once(cli) -> None:
    result = cli("ops", "--missing", "--json", "--domain", "ai.onnx")
    assert result.code == 0, result.err
    listed = {r["op_type"]: set(r["versions"]) for r in json.loads(result.out)["operators"]}
    for schema in defs.get_all_schemas_with_history():
        if schema.domain not in ("", "ai.onnx"):
            continue
        served = REGISTRY.get("", schema.name, schema.since_version) is not None
        assert served != (schema.since_version in listed.get(schema.name, set())), (schema.name, schema.since_version)


def test_missing_lists_contrib_ops_from_onnxruntime(cli) -> None:
    from onnxruntime.capi import onnxruntime_pybind11_state as ort_schemas

    result = cli("ops", "--missing", "--json", "--domain", "com.microsoft")
    report = json.loads(result.out)
    contrib = {s.name for s in ort_schemas.get_all_operator_schema() if s.domain == "com.microsoft"}
    missing = {r["op_type"] for r in report["operators"]}
    supported = {op for d, op in REGISTRY.op_types() if d == "com.microsoft"}
    assert missing == contrib - supported and "onnxruntime" in report["sources"]


def test_without_onnxruntime_contrib_ops_are_reported_as_not_compared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    catalog = operator_catalog(REGISTRY)
    assert "pip install onnxruntime" in catalog.unchecked["com.microsoft"]
    assert not [r for r in catalog.missing if r.domain == "com.microsoft"]


def test_an_unknown_domain_names_the_known_ones(cli) -> None:
    result = cli("ops", "--domain", "com.nowhere")
    assert result.code == 2
    assert "com.nowhere" in result.err and "com.microsoft" in result.err and "ai.onnx" in result.err


def test_markdown_is_the_docs_table(cli) -> None:
    result = cli("ops", "--markdown", "--domain", "com.onyxia")
    assert result.code == 0, result.err
    ops = {op for d, op in REGISTRY.op_types() if d == "com.onyxia"}
    assert result.out.startswith(f"### com.onyxia: {len(ops)} operators")
    assert all(f"| {op} |" in result.out for op in ops)


def test_pass_catalog_is_the_pipeline_in_order() -> None:
    rows = pass_rows(REGISTRY)
    compile_rows = [r.name for r in rows if r.scope == "every compile"]
    assert compile_rows == [p.name for p in CompilerPipeline(REGISTRY).passes({})] + ["Planning"]
    assert all(r.purpose for r in rows), [r.name for r in rows if not r.purpose]


def test_every_default_pass_says_what_it_does() -> None:
    """The first sentence of its class docstring (or of its module's, where that opens with the class's name:
    one pass per file) is the pass table's "what it does"; a FixedPoint's come from the passes it settles."""
    for p in default_passes():
        for q in p.passes if isinstance(p, FixedPoint) else [p]:
            module_doc = sys.modules[type(q).__module__].__doc__ or ""
            own_module = module_doc.lstrip("`").startswith(f"{type(q).__name__}`")
            assert type(q).__doc__ or own_module, f"{q.name}: give the pass class a docstring saying what it does"
