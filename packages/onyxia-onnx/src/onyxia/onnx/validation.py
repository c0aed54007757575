"""Validation at load: every node against its operator schema, before anything is compiled.

The rule it enforces: Onyxia accepts no model that onnxruntime rejects (the few deliberate differences are
listed in docs/reference/conformance.md). onnxruntime checks, at session creation, the IR and opset versions, each node's input/output
counts and attribute names and types, type constraints, declared output dtypes, and the ops' shape inference; a
model failing any of these ran here before, with undefined results. So this checks the same things, with onnx's
own schemas (`check_node` per node, then strict type and shape inference on a copy without weights, so loading a
1 GB model never reads its external data), onnxruntime's contrib ops from `contrib_schemas`, a few attribute
values the spec bounds, the 32-bit index range Onyxia's kernels use, and that every value is a tensor, all
in one `ModelValidationError`. Plugins' domains (`com.example`) are left to their operators, at planning.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterator
from pathlib import Path

import onnx
from onnx import AttributeProto, TensorProto
from onyxia.onnx.contrib_schemas import ContribSchema, contrib_schema
from onyxia.onnx.errors import ModelValidationError
from onyxia.onnx.subgraphs import graph_attributes, nodes_within
from onyxia.onnx.topology import topological_order
from onyxia.onnx.value_info import non_tensor_values

__all__ = ["INDEX_LIMIT", "validate_model"]

INDEX_LIMIT = 2**31  # kernels index with i32/u32 arithmetic; a dim or element count must stay below this
_ONNX_DOMAINS = dict(onnx.defs.C.schema_version_map())  # domain -> (min, max) opset the schemas know
_CONTRIB_DOMAINS = {"com.microsoft": (1, 1)}  # onnxruntime registers its contrib ops at version 1 only
_INLINE_LIMIT = 4096  # initializers with more elements never feed shape inference as data (they are weights)
_ELEM_TYPES = re.compile(r"\((\d+)\) vs \((\d+)\)")  # onnx prints dtype codes: "(1) vs (7)"
_FLAGS = {  # attributes the spec states as 0/1 flags, for the ops that carry them
    "keepdims": ("Reduce", "ArgMax", "ArgMin"),
    "noop_with_empty_axes": ("Reduce",),
    "select_last_index": ("ArgMax", "ArgMin"),
}


def validate_model(model: onnx.ModelProto, path: Path) -> None:
    """Raise `ModelValidationError` listing every problem found in `model` (read from `path`)."""
    problems = list(_check_versions(model))
    if problems:  # schemas at an unknown opset or IR version say nothing useful
        raise ModelValidationError(path, problems)
    problems += _check_sizes(model.graph)
    opsets = {_domain(o.domain): int(o.version) for o in model.opset_import}
    context = onnx.checker.C.CheckerContext()
    context.ir_version = model.ir_version
    context.opset_imports = {**opsets, **({"ai.onnx": opsets[""]} if "" in opsets else {})}
    for node, where in nodes_within(model.graph):
        problems += _check_node(node, where, opsets, context)
    if not problems:
        types, shapes, inference_problems = _infer(model)
        problems += inference_problems
        for index, node in enumerate(model.graph.node):
            schema = contrib_schema(node.domain, node.op_type)
            if schema is not None and _is_contrib(node, opsets):
                problems += _check_contrib_types(node, _where(node, index), schema, types, shapes)
    if problems:
        raise ModelValidationError(path, problems)


# ----- model level -------------------------------------------------------------------------------
def _check_versions(model: onnx.ModelProto) -> Iterator[str]:
    if model.ir_version > onnx.IR_VERSION:
        yield f"IR version {model.ir_version} is newer than the newest supported ({onnx.IR_VERSION})"
    for opset in model.opset_import:
        domain = _domain(opset.domain)
        known = _ONNX_DOMAINS.get(domain) or _CONTRIB_DOMAINS.get(domain)
        if known is not None and not known[0] <= opset.version <= known[1]:
            yield (
                f"opset {opset.version} of domain '{domain or 'ai.onnx'}' is not supported; "
                f"expected {known[0]} to {known[1]}"
            )


def _check_sizes(graph: onnx.GraphProto) -> Iterator[str]:
    initializers = {t.name for t in graph.initializer}
    for info in graph.input:
        if info.name in initializers or not info.type.HasField("tensor_type"):
            continue
        for axis, dim in enumerate(info.type.tensor_type.shape.dim):
            if dim.HasField("dim_value") and dim.dim_value >= INDEX_LIMIT:
                yield (
                    f"graph input '{info.name}': dim {axis} is {dim.dim_value}; expected < 2^31 "
                    "(Onyxia's kernels index with 32-bit integers)"
                )
    for tensor in graph.initializer:
        count = math.prod(int(d) for d in tensor.dims)
        if count >= INDEX_LIMIT:
            yield (
                f"initializer '{tensor.name}': {count} elements (shape {list(tensor.dims)}); expected < 2^31 "
                "(Onyxia's kernels index with 32-bit integers)"
            )


# ----- nodes -------------------------------------------------------------------------------------
def _check_node(
    node: onnx.NodeProto, where: str, opsets: dict[str, int], context: onnx.checker.C.CheckerContext
) -> list[str]:
    domain = _domain(node.domain)
    if domain not in opsets:
        return []  # the loader names the missing opset_import entry
    schema = contrib_schema(domain, node.op_type)
    if schema is not None and _is_contrib(node, opsets):
        return [f"{where}: {p}" for p in _check_contrib_node(node, schema)]
    if domain not in _ONNX_DOMAINS:
        return []  # a plugin's domain: its registered operator checks the node when planning it
    if any(
        graph_attributes(node)
    ):  # onnx checks a subgraph only with its outer scope: its nodes are checked one by one
        return []
    try:
        onnx.checker.check_node(_checkable(node), context)
    except (onnx.checker.ValidationError, onnx.defs.SchemaError, ValueError) as e:
        return [f"{where}: {_first_line(str(e))}"]
    return [f"{where}: {p}" for p in _check_flags(node)]


def _checkable(node: onnx.NodeProto) -> onnx.NodeProto:
    """`node` as the checker wants it: domain "" for "ai.onnx", and a stand-in for external tensor
    attributes (the checker would look for their files relative to the working directory)."""
    external = any(
        a.type == AttributeProto.TENSOR and a.t.data_location == TensorProto.EXTERNAL for a in node.attribute
    )
    if not external and node.domain != "ai.onnx":
        return node
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    copy.domain = _domain(node.domain)
    for attr in copy.attribute:
        if attr.type == AttributeProto.TENSOR and attr.t.data_location == TensorProto.EXTERNAL:
            attr.t.CopyFrom(onnx.TensorProto(name=attr.t.name, data_type=TensorProto.FLOAT, dims=[1], float_data=[0]))
    return copy


def _is_contrib(node: onnx.NodeProto, opsets: dict[str, int]) -> bool:
    """com.microsoft ops always; default-domain ones only where onnx has no schema of that name."""
    return _domain(node.domain) != "" or not _onnx_knows(node.op_type, opsets.get("", 1))


@functools.cache
def _onnx_knows(op_type: str, opset: int) -> bool:
    try:
        onnx.defs.get_schema(op_type, max_inclusive_version=opset, domain="")
    except onnx.defs.SchemaError:
        return False
    return True


def _check_contrib_node(node: onnx.NodeProto, schema: ContribSchema) -> Iterator[str]:
    inputs, outputs, most = list(node.input), list(node.output), schema.max_inputs
    if len(inputs) < schema.min_inputs or (most is not None and len(inputs) > most):
        yield f"has {len(inputs)} inputs; expected {_count_range(schema.min_inputs, most)}"
    if not schema.min_outputs <= len(outputs) <= len(schema.outputs):
        yield f"has {len(outputs)} outputs; expected {_count_range(schema.min_outputs, len(schema.outputs))}"
    for index, (name, _param) in enumerate(schema.inputs):
        if index < len(inputs) and not inputs[index] and index not in schema.optional:
            yield f"input {index} '{name}' is empty; it is required"
    present = {attr.name: attr for attr in node.attribute}
    if len(present) < len(node.attribute):
        names = [attr.name for attr in node.attribute]
        yield f"attribute(s) {sorted({n for n in names if names.count(n) > 1})} given more than once"
    for name, attr in present.items():
        if name not in schema.attributes:
            yield f"unknown attribute '{name}'; expected one of {sorted(schema.attributes)}"
        elif attr.type != schema.attributes[name]:
            found, expected = (AttributeProto.AttributeType.Name(t) for t in (attr.type, schema.attributes[name]))
            yield f"attribute '{name}' is {found}; expected {expected}"
    for name in sorted(schema.required - present.keys()):
        yield f"required attribute '{name}' is missing"


def _count_range(least: int, most: int | None) -> str:
    return str(least) if least == most else f"{least} to {'any number' if most is None else most}"


def _check_flags(node: onnx.NodeProto) -> Iterator[str]:
    """0/1 flags with other values: onnxruntime reads them leniently, Onyxia rejects rather than guess."""
    for attr in node.attribute:
        prefixes = _FLAGS.get(attr.name)
        if prefixes and node.op_type.startswith(prefixes) and attr.type == AttributeProto.INT and attr.i not in (0, 1):
            yield f"attribute '{attr.name}' is {attr.i}; expected 0 or 1"


def _check_contrib_types(
    node: onnx.NodeProto,
    where: str,
    schema: ContribSchema,
    types: dict[str, int],
    shapes: dict[str, list[int | None]],
) -> Iterator[str]:
    """Type constraints over the inputs, then the declared dtypes of the outputs (as onnxruntime does)."""
    bound: dict[str, tuple[str, int]] = {}
    slots = [("input", i, n, *p) for i, n in enumerate(node.input) if (p := schema.input_param(i)) is not None]
    slots += [("output", i, n, *s) for i, (n, s) in enumerate(zip(node.output, schema.outputs, strict=False))]
    for kind, index, name, value, param in slots:
        dtype = types.get(name) if name else None
        if dtype is None:
            continue
        if dtype not in schema.types[param]:
            allowed = ", ".join(sorted(_dtype_name(t) for t in schema.types[param]))
            yield f"{where}: {kind} {index} '{value}' is {_dtype_name(dtype)}; expected one of {allowed}"
        elif param in bound and bound[param][1] != dtype and not (schema.mixed and value == schema.inputs[-1][0]):
            first, first_dtype = bound[param]
            yield (
                f"{where}: {kind} {index} '{value}' is {_dtype_name(dtype)} but '{first}' is "
                f"{_dtype_name(first_dtype)}; both have type {param}, so they must match"
            )
        else:
            bound.setdefault(param, (value, dtype))
        dims = shapes.get(name)
        if value in schema.scalars and dims is not None and (len(dims) > 1 or (dims and dims[0] not in (1, None))):
            yield f"{where}: {kind} {index} '{value}' has shape {dims}; expected a scalar (one element)"


# ----- type and shape inference ------------------------------------------------------------------
def _infer(model: onnx.ModelProto) -> tuple[dict[str, int], dict[str, list[int | None]], list[str]]:
    """onnx's strict type/shape inference on a weightless copy: the dtypes it knows, and its errors."""
    light = _light_copy(model)
    try:
        inferred = onnx.shape_inference.infer_shapes(light, check_type=True, strict_mode=True)
    except onnx.shape_inference.InferenceError as e:
        inferred, problems = light, _inference_problems(str(e))
    except (ValueError, RuntimeError) as e:  # onnx raises these for values it cannot even represent
        inferred, problems = light, [f"type/shape inference: {type(e).__name__}: {_first_line(str(e))}"]
    else:
        problems = non_tensor_values(inferred.graph)  # sequences and optionals, named with their types
    types: dict[str, int] = {}
    shapes: dict[str, list[int | None]] = {}
    graph = inferred.graph
    for info in [*graph.input, *graph.value_info, *graph.output]:
        tensor_type = info.type.tensor_type
        if info.type.HasField("tensor_type") and tensor_type.elem_type:
            types[info.name] = tensor_type.elem_type
            if tensor_type.HasField("shape"):
                shapes[info.name] = [d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim]
    for tensor in model.graph.initializer:
        types[tensor.name] = tensor.data_type
        shapes[tensor.name] = [int(d) for d in tensor.dims]
    return types, shapes, problems


def _light_copy(model: onnx.ModelProto) -> onnx.ModelProto:
    """Nodes, inputs and small initializers; weights become typed inputs, declared shapes are dropped
    (onnxruntime merges a disagreeing declared shape with a warning, onnx's strict mode fails on it)."""
    light = onnx.ModelProto(ir_version=model.ir_version)
    opsets = {_domain(o.domain): o.version for o in model.opset_import}  # onnx's inference knows no "ai.onnx"
    light.opset_import.extend(onnx.helper.make_opsetid(domain, version) for domain, version in opsets.items())
    light.functions.extend(model.functions)
    graph = light.graph
    graph.node.extend(model.graph.node[i] for i in topological_order(model.graph.node, "model"))  # onnx needs order
    for node in graph.node:
        node.domain = _domain(node.domain)
    graph.input.extend(model.graph.input)
    declared = {info.name for info in model.graph.input}
    for tensor in model.graph.initializer:
        external = tensor.data_location == TensorProto.EXTERNAL
        if not external and math.prod(tensor.dims) <= _INLINE_LIMIT:
            graph.initializer.append(tensor)
        elif tensor.name not in declared:
            graph.input.append(onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims)))
    weights = {tensor.name for tensor in model.graph.initializer}
    for source, target in ((model.graph.output, graph.output), (model.graph.value_info, graph.value_info)):
        for info in source:
            if source is model.graph.value_info and info.name in weights:
                continue  # torch's dynamo exporter lists weights here: cleared below, it would hide their shapes
            copy = target.add()
            copy.CopyFrom(info)
            if copy.type.HasField("tensor_type"):
                copy.type.tensor_type.ClearField("shape")
    return light


def _inference_problems(message: str) -> list[str]:
    """onnx joins one line per failing node after a header; each becomes one problem."""
    body = message.split("Inference error(s):", 1)[-1]
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    lines = [_ELEM_TYPES.sub(lambda m: f"{_dtype_name(int(m[1]))} vs {_dtype_name(int(m[2]))}", x) for x in lines]
    return [f"type/shape inference: {line}" for line in lines] or [f"type/shape inference: {message.strip()}"]


# ----- helpers -----------------------------------------------------------------------------------
def _domain(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


def _where(node: onnx.NodeProto, index: int) -> str:
    return f"node '{node.name or f'{node.op_type}_{index}'}' ({node.op_type})"


def _first_line(message: str) -> str:
    return message.strip().splitlines()[0] if message.strip() else message


def _dtype_name(code: int) -> str:
    return TensorProto.DataType.Name(code).lower()
