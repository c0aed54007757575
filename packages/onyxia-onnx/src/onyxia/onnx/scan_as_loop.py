"""Every `Scan` (opset 9 on) becomes the equivalent `Loop`, so the engine only has to run `If` and `Loop`.

A Scan is a Loop whose trip count is the length of its first scan input along that input's scan axis:

* the trip count is ``Gather(Shape(x0), axis0)`` in the enclosing graph (a `Constant` when inference
  knows that dim statically, so `unroll_loops` can inline a short scan);
* each scan input is read inside the body as ``Gather(x, i, axis)`` (a scalar index drops the axis, and
  Gather takes negative axes without knowing the rank), with ``i = len-1-iter_num`` for reverse direction;
  the body reads ``x`` from the enclosing scope, as any ONNX subgraph may;
* the state variables are the loop-carried values (same body names, same order);
* the scan outputs are the Loop's scan outputs (stacked on axis 0), then reversed (``Slice`` step -1;
  before opset 10, which has no step, a ``Gather`` with the loop's own reversed iteration numbers) and
  ``Transpose``d when their ``scan_output_axes`` entry is not 0 (that needs the output's rank: from the
  body output's declared shape or shape inference; a Scan whose rank is unknown there stays a Scan).

Nested graphs are lowered first (a Scan in an If branch, a Loop body or another Scan's body). Opset 8's
Scan (batched, with ``sequence_lens``) keeps its node: the loader refuses it as any other unsupported op.
"""

from __future__ import annotations

import numpy as np

import onnx
from onnx import AttributeProto, TensorProto, helper
from onyxia.onnx.subgraphs import (
    Names,
    all_graphs,
    contains_op,
    default_opset,
    graph_attributes,
    is_onnx_op,
    scalar_constant,
)

__all__ = ["lower_scans"]

_INT64_MIN = np.iinfo(np.int64).min
_Dims = dict[str, list[int | None]]


def lower_scans(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with every Scan rewritten as a Loop (a copy), or `model` itself when it has none to lower."""
    opset = default_opset(model)
    if opset < 9 or not contains_op(model.graph, "Scan"):
        return model
    dims, main = _inferred_dims(model)
    model = onnx.ModelProto.FromString(model.SerializeToString())
    _Lowering(Names(model), opset, dims, main).graph(model.graph)
    return model


class _Lowering:
    def __init__(self, names: Names, opset: int, dims: _Dims, main: set[str]) -> None:
        self.names = names
        self.opset = opset
        self.dims = dims  # every graph's values: ranks
        self.main = main  # the main graph's values: static dims follow from its inputs' declared shapes

    def graph(self, graph: onnx.GraphProto) -> None:
        """Lower the Scans of `graph` and of every graph nested in it, in place."""
        nodes: list[onnx.NodeProto] = []
        for node in graph.node:
            for sub in graph_attributes(node):
                self.graph(sub)
            nodes.extend(self.scan(node) if is_onnx_op(node, "Scan") else [node])
        del graph.node[:]
        graph.node.extend(nodes)

    def scan(self, node: onnx.NodeProto) -> list[onnx.NodeProto]:
        """The nodes replacing one Scan: trip count, the Loop, and each scan output's reverse/transpose."""
        attrs = {a.name: a for a in node.attribute}
        if "body" not in attrs or "num_scan_inputs" not in attrs:
            return [node]  # malformed: validation names what is wrong with it
        body, m = attrs["body"].g, attrs["num_scan_inputs"].i
        n, k = len(node.input) - m, len(attrs["body"].g.output) - (len(node.input) - m)
        in_axes, in_dirs = _ints(attrs, "scan_input_axes", m), _ints(attrs, "scan_input_directions", m)
        out_axes, out_dirs = _ints(attrs, "scan_output_axes", k), _ints(attrs, "scan_output_directions", k)
        if min(m, n, k) < 0 or None in (in_axes, in_dirs, out_axes, out_dirs):
            return [node]  # malformed: validation names what is wrong with it
        assert in_axes is not None and in_dirs is not None and out_axes is not None and out_dirs is not None
        ranks = [self._output_rank(node.output[n + j], body.output[n + j]) for j in range(k)]
        if any(axis != 0 and rank is None for axis, rank in zip(out_axes, ranks, strict=True)):
            return [node]
        base = node.name or f"Scan_{node.output[0]}"
        fresh = self.names.fresh
        outer: list[onnx.NodeProto] = []
        trip = self._trip_count(node.input[n], in_axes[0], base, outer)
        reverse_out = [d != 0 and name != "" for d, name in zip(out_dirs, node.output[n:], strict=True)]
        gather_reverse = self.opset < 10 and any(reverse_out)
        last = ""
        if any(in_dirs) or gather_reverse:
            one = fresh(f"{base}/one")
            last = fresh(f"{base}/last")
            outer += [scalar_constant(one, np.array(1, np.int64)), helper.make_node("Sub", [trip, one], [last])]
        loop_body, rev_out = self._body(body, node.input[n:], in_axes, in_dirs, last, n, base, gather_reverse)
        stacked = [
            fresh(f"{o}/stacked") if o and (a or r) else o
            for o, a, r in zip(node.output[n:], out_axes, reverse_out, strict=True)
        ]
        outputs = [*node.output[:n], *stacked, *([rev_out] if rev_out else [])]
        loop = helper.make_node(
            "Loop", [trip, "", *node.input[:n]], outputs, name=fresh(f"{base}/loop"), body=loop_body
        )
        post: list[onnx.NodeProto] = []
        for j, out in enumerate(node.output[n:]):
            value = stacked[j]
            if reverse_out[j]:
                value = self._reversed(value, out if out_axes[j] == 0 else fresh(f"{out}/reversed"), rev_out, post)
            if out_axes[j] != 0:
                rank = ranks[j]
                assert rank is not None
                axis = out_axes[j] % rank
                perm = [*range(1, axis + 1), 0, *range(axis + 1, rank)]
                post.append(helper.make_node("Transpose", [value], [out], name=fresh(f"{out}/transpose"), perm=perm))
        return [*outer, loop, *post]

    def _trip_count(self, x: str, axis: int, base: str, nodes: list[onnx.NodeProto]) -> str:
        """The scan length: a Constant when inference knows the dim, else Gather(Shape(x), axis)."""
        trip = self.names.fresh(f"{base}/trip_count")
        dims = self.dims.get(x) if x in self.main else None
        if dims is not None and -len(dims) <= axis < len(dims) and dims[axis] is not None:
            nodes.append(scalar_constant(trip, np.array(dims[axis], np.int64)))
            return trip
        shape, index = self.names.fresh(f"{base}/shape"), self.names.fresh(f"{base}/axis")
        nodes += [
            helper.make_node("Shape", [x], [shape]),
            scalar_constant(index, np.array(axis, np.int64)),
            helper.make_node("Gather", [shape, index], [trip], axis=0),
        ]
        return trip

    def _body(
        self,
        body: onnx.GraphProto,
        xs: list[str],
        axes: list[int],
        dirs: list[int],
        last: str,
        n: int,
        base: str,
        reverse_indices: bool,
    ) -> tuple[onnx.GraphProto, str]:
        """The Loop body: Scan's body behind per-input Gathers; `rev_out` is the extra scan output of
        reversed iteration numbers (only before opset 10, for reversing scan outputs by Gather)."""
        fresh = self.names.fresh
        iteration, cond_in, cond_out = fresh(f"{base}/iter_num"), fresh(f"{base}/cond_in"), fresh(f"{base}/cond_out")
        nodes = [helper.make_node("Identity", [cond_in], [cond_out])]
        backwards = ""
        if any(dirs) or reverse_indices:
            backwards = fresh(f"{base}/reverse_index")
            nodes.append(helper.make_node("Sub", [last, iteration], [backwards]))
        for x, axis, direction, value in zip(xs, axes, dirs, body.input[n:], strict=True):
            index = backwards if direction else iteration
            nodes.append(
                helper.make_node("Gather", [x, index], [value.name], name=fresh(f"{value.name}/slice"), axis=axis)
            )
        nodes.extend(body.node)
        scalar = [
            helper.make_tensor_value_info(iteration, TensorProto.INT64, []),
            helper.make_tensor_value_info(cond_in, TensorProto.BOOL, []),
        ]
        outputs = [helper.make_tensor_value_info(cond_out, TensorProto.BOOL, []), *body.output]
        if reverse_indices:
            outputs.append(helper.make_tensor_value_info(backwards, TensorProto.INT64, []))
        loop_body = helper.make_graph(
            nodes,
            body.name or f"{base}/body",
            [*scalar, *body.input[:n]],
            outputs,
            list(body.initializer),
            value_info=[*body.value_info, *body.input[n:]],
        )
        return loop_body, (fresh(f"{base}/reversed_iterations") if reverse_indices else "")

    def _reversed(self, value: str, out: str, rev_iterations: str, nodes: list[onnx.NodeProto]) -> str:
        """`value` reversed along axis 0 into `out`: Slice with step -1, or (opset 9) a Gather."""
        if rev_iterations:
            nodes.append(
                helper.make_node(
                    "Gather", [value, rev_iterations], [out], name=self.names.fresh(f"{out}/reverse"), axis=0
                )
            )
            return out
        consts = {"starts": -1, "ends": _INT64_MIN, "axes": 0, "steps": -1}
        names = {key: self.names.fresh(f"{out}/{key}") for key in consts}
        nodes.extend(scalar_constant(names[key], np.array([v], np.int64)) for key, v in consts.items())
        slice_inputs = [value, *names.values()]
        nodes.append(helper.make_node("Slice", slice_inputs, [out], name=self.names.fresh(f"{out}/reverse")))
        return out

    def _output_rank(self, outer_name: str, body_output: onnx.ValueInfoProto) -> int | None:
        """Rank of a stacked scan output: inferred for the Scan's output, or the body output's + 1."""
        if outer_name in self.dims:
            return len(self.dims[outer_name])
        tensor = body_output.type.tensor_type
        if body_output.type.WhichOneof("value") == "tensor_type" and tensor.HasField("shape"):
            return len(tensor.shape.dim) + 1
        inner = self.dims.get(body_output.name)
        return None if inner is None else len(inner) + 1


def _ints(attrs: dict[str, AttributeProto], name: str, count: int) -> list[int] | None:
    """The per-input (or per-output) attribute, its default zeros when absent; None when malformed."""
    values = list(attrs[name].ints) if name in attrs else [0] * count
    return values if len(values) == count else None


def _inferred_dims(model: onnx.ModelProto) -> tuple[_Dims, set[str]]:
    """Each tensor's dims (None where symbolic) from ONNX shape inference over the graph inputs and
    initializers alone (the file's value_info may be stale), and the main graph's names among them.
    A subgraph's values are only read for ranks: a loop-carried value's declared shape may not hold
    every iteration. Nothing is known when inference fails."""
    bare = onnx.ModelProto.FromString(model.SerializeToString())
    for g in all_graphs(bare.graph):
        del g.value_info[:]
    try:
        inferred = onnx.shape_inference.infer_shapes(bare, data_prop=True)
    except Exception:  # an op inference does not know: fall back to run-time trip counts
        return {}, set()
    dims: dict[str, list[int | None]] = {}
    for g in all_graphs(inferred.graph):
        for value in (*g.input, *g.output, *g.value_info):
            if g is not inferred.graph and value.name in dims:
                continue
            tensor = value.type.tensor_type
            if value.type.WhichOneof("value") == "tensor_type" and tensor.HasField("shape"):
                dims[value.name] = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
    g = inferred.graph
    return dims, {v.name for v in (*g.input, *g.output, *g.value_info)}
