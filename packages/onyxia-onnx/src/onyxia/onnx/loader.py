"""ONNX file -> `IrGraph`: the one place protobuf turns into Onyxia's IR.

What it guarantees to every later stage: tensor names exactly as in the file (each defined once),
nodes in topological order with an opset each, initializers as lazy `TensorValue`s, graph inputs
with Static/Symbolic shapes, and intermediates left UNDEFINED/Absent for shape inference (the
file's value_info is not trusted; exporters leave stale or partial entries there). Sequences and
optionals the graph fixes become the tensors they hold first (`sequences`). Subgraphs (If branches,
Loop bodies) become `IrGraph` attributes whose outer-scope reads are explicit inputs
(`onyxia.core.subgraphs`); a `Scan` is read as the `Loop` it lowers to (`scan_as_loop`) and a `Loop` with
a small constant trip count as its unrolled body (`unroll_loops`). Anything Onyxia cannot represent (sparse tensors, local functions, other
sequences) fails here, naming the file and node.
"""

from __future__ import annotations

import os
from pathlib import Path

from google.protobuf.message import DecodeError

import onnx
from onyxia.core.dtypes import DataType
from onyxia.core.ir import IrGraph, TensorDef, TensorKind
from onyxia.core.shapes import Absent, Static, TensorShape
from onyxia.core.subgraphs import CAPTURED_INPUTS
from onyxia.core.values import TensorValue
from onyxia.onnx.attributes import read_attribute
from onyxia.onnx.constant_if import select_constant_ifs
from onyxia.onnx.errors import OnnxError
from onyxia.onnx.external import ExternalDataStore
from onyxia.onnx.scan_as_loop import lower_scans
from onyxia.onnx.sequences import resolve_sequences
from onyxia.onnx.subgraphs import implicit_inputs
from onyxia.onnx.tensors import read_tensor, to_datatype
from onyxia.onnx.topology import topological_order
from onyxia.onnx.unroll_loops import unroll_small_loops
from onyxia.onnx.validation import validate_model
from onyxia.onnx.value_info import read_value_info, type_text

__all__ = ["MODEL_BYTES", "load_and_parse_model", "model_label", "parse_model_proto", "read_model_proto"]

_MODEL_FIELDS = ("producer_name", "producer_version", "domain", "doc_string")

# How errors name a model given as bytes (`InferenceSession(model.SerializeToString())`). Its external
# data, as onnxruntime resolves it for bytes, is found relative to the current directory.
MODEL_BYTES = "<model bytes>"


def load_and_parse_model(source: str | os.PathLike[str] | bytes) -> IrGraph:
    """Read `source`, a path or the serialized model's bytes (and its external data references),
    into an `IrGraph`; raises `OnnxError`.

    Once it reads as a graph (the reader's structural errors come first), the model is validated
    against its operators' schemas (`validate_model`), so no later stage sees a node onnxruntime
    would reject; external data is never read for that.
    """
    source = source if isinstance(source, bytes) else Path(source)
    return parse_model_proto(read_model_proto(source), model_label(source))


def model_label(source: Path | bytes) -> Path:
    """The path errors name and external data is resolved beside: `MODEL_BYTES` for bytes."""
    return Path(MODEL_BYTES) if isinstance(source, bytes) else source


def parse_model_proto(proto: onnx.ModelProto, model_path: Path) -> IrGraph:
    """`load_and_parse_model` of a `ModelProto` already read (by `read_model_proto`) from `model_path`.

    `proto` itself is left as read (the rewrites below copy what they change), so a caller may read
    its declared inputs, outputs and `metadata_props` exactly as the file has them; `graph.metadata`
    mixes those props with the model fields under fixed keys (`_read_metadata`)."""
    model = unroll_small_loops(lower_scans(resolve_sequences(select_constant_ifs(proto))))
    graph = _GraphReader(model_path, model).read()
    validate_model(model, model_path)
    return graph


def read_model_proto(source: Path | bytes) -> onnx.ModelProto:
    """The `ModelProto` without external data (that is mapped lazily), protobuf errors wrapped."""
    if isinstance(source, bytes):
        return _parse_bytes(source)
    path = source
    if not path.exists():
        raise OnnxError(f"{path}: no such file")
    if not path.is_file():
        raise OnnxError(f"{path}: is not a file; expected an .onnx model file")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except DecodeError as e:
        raise OnnxError(f"{path}: not a valid ONNX protobuf (truncated or not an ONNX file): {e}") from e
    except OSError as e:
        raise OnnxError(f"{path}: cannot read the file: {e}") from e
    except Exception as e:  # onnx.load raises assorted types for malformed input; none may escape raw
        raise OnnxError(f"{path}: cannot parse the model: {type(e).__name__}: {e}") from e
    if not model.HasField("graph") or model.ir_version <= 0:
        raise OnnxError(f"{path}: not an ONNX model (no graph or ir_version found); is the file truncated?")
    return model


def _parse_bytes(data: bytes) -> onnx.ModelProto:
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except DecodeError as e:
        raise OnnxError(f"{MODEL_BYTES}: not a valid ONNX protobuf (truncated or not an ONNX model): {e}") from e
    if not model.HasField("graph") or model.ir_version <= 0:
        raise OnnxError(f"{MODEL_BYTES}: not an ONNX model (no graph or ir_version found); are the bytes truncated?")
    return model


class _GraphReader:
    """One conversion; `origin` remembers where each name was defined, for duplicate errors.

    With a `parent` it reads subgraph `proto` of one of the parent's nodes: its own inputs get their
    types from the outer node when compiled (a Loop body's declared ones are often partial), and each
    of `captures` (the outer names the node's subgraphs read) becomes one more graph input."""

    def __init__(
        self,
        path: Path,
        model: onnx.ModelProto,
        proto: onnx.GraphProto | None = None,
        parent: _GraphReader | None = None,
        captures: list[str] | None = None,
    ) -> None:
        self.path = path
        self.model = model
        self.proto = model.graph if proto is None else proto
        self.parent = parent
        self.captures = captures or []
        self.graph = IrGraph(self.proto.name or path.stem)
        self.store: ExternalDataStore = ExternalDataStore(path) if parent is None else parent.store
        self.tensors: dict[str, TensorDef] = {}
        self.origin: dict[str, str] = {}
        self.node_names: set[str] = set()
        self.functions = {(_domain(f.domain), f.name) for f in model.functions}

    def read(self) -> IrGraph:
        self._read_opsets()
        if self.parent is None:
            self._read_metadata()
        self._read_initializers()
        self._read_inputs()
        self._declare_node_outputs()
        order = topological_order(self.proto.node, str(self.path))
        for index in order:
            self._add_node(index, self.proto.node[index])
        self._mark_outputs()
        return self.graph

    # ----- model level -----------------------------------------------------------------------
    def _read_opsets(self) -> None:
        if self.parent is not None:
            self.graph.opset_imports.update(self.parent.graph.opset_imports)
            return
        for opset in self.model.opset_import:
            self.graph.opset_imports[_domain(opset.domain)] = int(opset.version)

    def _read_metadata(self) -> None:
        """Model fields under fixed keys, which metadata_props entries of the same name cannot override."""
        meta = self.graph.metadata
        meta.update({prop.key: prop.value for prop in self.model.metadata_props})
        meta.update({key: getattr(self.model, key) for key in _MODEL_FIELDS if getattr(self.model, key)})
        if self.model.model_version:
            meta["model_version"] = str(self.model.model_version)
        meta["ir_version"] = str(self.model.ir_version)
        meta["path"] = str(self.path)

    # ----- tensors -----------------------------------------------------------------------------
    def _define(self, name: str, what: str, dtype: DataType, shape: TensorShape, kind: TensorKind) -> TensorDef:
        if name in self.origin:
            raise OnnxError(f"{self.path}: tensor '{name}' is defined twice: as {self.origin[name]} and as {what}")
        self.origin[name] = what
        tensor = self.graph.add_tensor(name, dtype, shape, kind)
        self.tensors[name] = tensor
        return tensor

    def _read_tensor(self, proto: onnx.TensorProto, where: str) -> TensorValue:
        return read_tensor(proto, where, self.store)

    def _read_initializers(self) -> None:
        if len(self.proto.sparse_initializer):
            name = self.proto.sparse_initializer[0].values.name
            raise OnnxError(f"{self.path}: sparse initializer '{name}' is not supported; expected dense initializers")
        for proto in self.proto.initializer:
            value = self._read_tensor(proto, f"{self.path}: initializer '{proto.name}'")
            tensor = self._define(proto.name, "an initializer", value.dtype, Static(value.dims), TensorKind.INITIALIZER)
            tensor.initializer = value

    def _read_inputs(self) -> None:
        """Inputs that are also initializers are overridable defaults; Onyxia treats them as weights."""
        initializers = {proto.name for proto in self.proto.initializer}
        for info in self.proto.input:
            if info.name in initializers:
                continue
            if self.parent is not None:  # shaped by the outer node when compiled (declared shapes are often partial)
                self._define(info.name, "a subgraph input", *_declared_type(info), TensorKind.INPUT)
                continue
            dtype, shape = read_value_info(info, f"{self.path}: graph input '{info.name}'")
            self._define(info.name, "a graph input", dtype, shape, TensorKind.INPUT)
        for name in self.captures:
            self._define(name, "an outer-scope value", DataType.UNDEFINED, Absent(), TensorKind.INPUT)

    def _declare_node_outputs(self) -> None:
        """Create every node output before any node, so names stay exact and node order may vary."""
        declared = {info.name: info for info in self.proto.output}
        for index, node in enumerate(self.proto.node):
            what = f"an output of node '{_node_name(node, index)}' ({node.op_type})"
            for name in node.output:
                if not name:
                    continue
                dtype, shape = (
                    self._declared_output(declared[name]) if name in declared else (DataType.UNDEFINED, Absent())
                )
                self._define(name, what, dtype, shape, TensorKind.INTERMEDIATE)

    def _declared_output(self, info: onnx.ValueInfoProto) -> tuple[DataType, TensorShape]:
        """The file's type for a graph output: a starting point that shape inference overwrites."""
        where = f"{self.path}: graph output '{info.name}'"
        tensor_type = info.type.tensor_type
        if info.type.WhichOneof("value") not in (None, "tensor_type"):
            raise OnnxError(f"{where}: has type {type_text(info.type)}; Onyxia runs tensors only")
        if not tensor_type.HasField("shape"):
            dtype = to_datatype(tensor_type.elem_type, where) if tensor_type.elem_type else DataType.UNDEFINED
            return dtype, Absent()
        return read_value_info(info, where)

    # ----- nodes -------------------------------------------------------------------------------
    def _add_node(self, index: int, node: onnx.NodeProto) -> None:
        name = _node_name(node, index)
        where = f"{self.path}: node '{name}' ({node.op_type})"
        domain = _domain(node.domain)
        if domain not in self.graph.opset_imports:
            raise OnnxError(
                f"{where}: domain '{domain}' is not in the model's opset_import "
                f"(imported: {sorted(self.graph.opset_imports)})"
            )
        if (domain, node.op_type) in self.functions:
            raise OnnxError(
                f"{where}: calls a model-local function; functions are not supported "
                "(inline them first with onnx.inliner.inline_local_functions)"
            )
        captures = implicit_inputs(node)
        inputs = [self._node_input(where, i, x) for i, x in enumerate([*node.input, *captures])]
        outputs = [self.tensors[x] if x else None for x in node.output]

        def read_graph(proto: onnx.GraphProto, _where: str) -> IrGraph:
            return _GraphReader(self.path, self.model, proto, self, captures).read()

        attributes = {a.name: read_attribute(a, where, self._read_tensor, read_graph) for a in node.attribute}
        if captures:
            attributes[CAPTURED_INPUTS] = len(captures)
        added = self.graph.add_node(node.op_type, inputs, outputs, attributes, domain=domain, name=name)
        self.node_names.add(added.name)

    def _node_input(self, where: str, index: int, name: str) -> TensorDef | None:
        if not name:
            return None
        if name not in self.tensors:
            raise OnnxError(
                f"{where}: input {index} '{name}' is not a graph input, an initializer or any node's output"
            )
        return self.tensors[name]

    def _mark_outputs(self) -> None:
        for info in self.proto.output:
            if info.name not in self.tensors:
                raise OnnxError(
                    f"{self.path}: graph output '{info.name}' is not produced by any node, input or initializer"
                )
            self.graph.mark_output(self.tensors[info.name])


def _declared_type(info: onnx.ValueInfoProto) -> tuple[DataType, TensorShape]:
    """A subgraph input's declared dtype, and its shape when fully static (else Absent: the compiler
    shapes it from the outer node, and exporters often declare partial or stale ones)."""
    tensor_type = info.type.tensor_type
    if not info.type.HasField("tensor_type") or not tensor_type.elem_type:
        return DataType.UNDEFINED, Absent()
    dtype = to_datatype(tensor_type.elem_type, f"subgraph input '{info.name}'")
    dims = tensor_type.shape.dim if tensor_type.HasField("shape") else None
    if dims is None or not all(d.HasField("dim_value") for d in dims):
        return dtype, Absent()
    return dtype, Static(tuple(int(d.dim_value) for d in dims))


def _domain(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


def _node_name(node: onnx.NodeProto, index: int) -> str:
    """Exporters often leave names empty; errors and dumps need one, so index-based names fill in."""
    return node.name or f"{node.op_type}_{index}"
