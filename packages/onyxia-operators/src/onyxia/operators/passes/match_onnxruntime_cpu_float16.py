"""`MatchOnnxruntimeCpuFloat16`: compute in float32 exactly where onnxruntime's CPU EP does on a float16 graph.

onnxruntime has float16 CPU kernels for few ops. For the others its InsertCastTransformer, which runs even
with graph optimizations off (onnxruntime/core/optimizer/insert_cast_transformer.cc), makes the graph run
in float32, and this pass replays it step by step so Onyxia's tokens equal onnxruntime's:

1. a function op with no float16 kernel (Gelu, Softmax-13, ReduceL1-18 ...) is replaced by its ONNX
   function body (the partitioner inlines it), constants staying float32 behind a CastLike -> Cast;
2. every node with a float16 input and no float16 kernel gets ``Cast(to=float)`` on each float16 input (one
   per source tensor, shared by all its consumers, initializers included) and ``Cast(to=float16)`` on
   each float16 output, named ``InsertedPrecisionFreeCast_*``; a node whose float16 kernel would sit
   alone between such nodes (all its float16 producers and consumers wrapped, no graph output, not fed
   by initializers or inputs only) is wrapped too;
3. Cast pairs that round-trip a dtype are removed (RemoveDuplicateCastTransformer): a pair is kept only
   when the first Cast loses precision and the second, read backwards, would too; a Cast is "lossy"
   when it narrows, unless its name says it was inserted. So f32 -> f16 -> f32 through a model Cast and
   an inserted one vanishes (a norm's float32 output feeds the float32 residual Add unrounded), while a
   graph output's Cast always stays (outputs keep their float16 dtype and names).

The kernel tables below are data, derived from onnxruntime 1.31.1 by
``packages/onyxia-operators/tests/ort_float16_kernels.py`` (one-node float16 models at opset 21, the
saved optimized model shows whether Casts were inserted); `tests/test_match_onnxruntime_cpu_float16.py`
re-derives them to catch drift. Ops in no table (com.onyxia) are left alone. Not a default pass:
it makes Onyxia slower on purpose, to agree with one runtime; the LLM session opts in.

Stage INFERENCE: it must see the graph as onnxruntime does, before OPTIMIZATION rewrites change op types,
and ShapeInference (re-run while the stage settles) folds the Casts of constants it adds.
"""

from __future__ import annotations

import logging

from onyxia.core import DataType, GraphBuilder, InferenceCtx, IrGraph, IrNode, OperatorRegistry, Stage
from onyxia.operators.passes._onnx_function_bodies import FUNCTION_BODIES

__all__ = ["MatchOnnxruntimeCpuFloat16"]

log = logging.getLogger(__name__)

F16, F32 = DataType.FLOAT16, DataType.FLOAT
INSERTED = "InsertedPrecisionFreeCast_"  # onnxruntime's name prefix; such Casts count as precision free
MS = "com.microsoft"


def _ops(domain: str, names: str) -> frozenset[tuple[str, str]]:
    return frozenset((domain, name) for name in names.split())


# ops with a float16 CPU kernel in onnxruntime 1.31.1 (ops whose inputs are never float16 are omitted)
_FLOAT16_KERNELS = _ops(
    "",
    """Cast Clip Concat Expand Flatten Gather GatherElements GatherND Identity IsNaN LayerNormalization Max Min
    Mod RMSNormalization Reshape Round Scatter ScatterElements ScatterND Shape Sign SimplifiedLayerNormalization
    Slice Split Squeeze Transpose Unsqueeze""",
) | _ops(
    MS,
    """GatherBlockQuantized GroupQueryAttention MatMulNBits RotaryEmbedding SkipLayerNormalization
    SkipSimplifiedLayerNormalization""",
)
# ops onnxruntime 1.31.1 runs in float32 between inserted Casts
_FLOAT32_ONLY = _ops(
    "",
    """Abs Add ArgMax ArgMin AveragePool BatchNormalization Ceil Conv ConvTranspose Cos CumSum DepthToSpace Div
    Equal Erf Exp Floor GlobalAveragePool GlobalLpPool GlobalMaxPool Greater GreaterOrEqual LeakyRelu Less
    LessOrEqual Log LpPool MatMul MaxPool Mean Mul Neg OneHot Pad Pow Reciprocal ReduceL2 ReduceLogSumExp
    ReduceMax ReduceMean ReduceMin ReduceProd ReduceSum Relu Resize Sigmoid Sin Softplus SpaceToDepth Sqrt Sub
    Sum Tanh Tile Trilu Where""",
)
# function ops onnxruntime inlines (op -> first opset with a function body; older opsets run in float32):
# Gelu 20, Softmax/LogSoftmax 13, ReduceL1/ReduceLogSum/ReduceSumSquare 18, CastLike 15 (always -> Cast)
_VARIADIC = {"Concat", "Max", "Min", "Sum", "Mean"}  # only the first input of a variadic parameter is typed


class MatchOnnxruntimeCpuFloat16:
    name = "MatchOnnxruntimeCpuFloat16"
    stage = Stage.INFERENCE

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        if not any(t.dtype == F16 for t in graph.tensors):
            return False
        order = graph.nodes  # onnxruntime's node index order: the model's, then inlined, then inserted
        inlined = [n for node in order if _is_function(graph, node) for n in _inline(graph, node, registry)]
        alive = {n.id for n in graph.nodes}
        order = [n for n in order if n.id in alive] + [n for n in inlined if n.id in alive]
        wrapped = {n.id for n in order if _needs_float32(graph, n)}
        for node in order:  # ForceSingleNodeCPUFloat16ToFloat32: node order, seeing earlier decisions
            if _is_isolated(graph, node, wrapped):
                wrapped.add(node.id)
        up_casts: dict[int, int] = {}
        inserted = [c for node in graph.nodes if node.id in wrapped for c in _wrap(graph, node, up_casts)]
        alive = {n.id for n in graph.nodes}
        casts = [n for n in [*order, *inserted] if n.op_type == "Cast" and n.domain == "" and n.id in alive]
        removed = sum(_remove_round_trips(graph, c, alive) for c in casts)
        log.info(
            "%s: inlined %d nodes, wrapped %d, inserted %d casts, removed %d",
            self.name,
            len(inlined),
            len(wrapped),
            len(inserted),
            removed,
        )
        return bool(inlined or wrapped or removed)


def _dtype(graph: IrGraph, t: int | None) -> DataType | None:
    return None if t is None else graph.tensor(t).dtype


def _has_f16_input(graph: IrGraph, node: IrNode) -> bool:
    return any(_dtype(graph, t) == F16 for t in node.inputs)


def _is_function(graph: IrGraph, node: IrNode) -> bool:
    body = FUNCTION_BODIES.get(node.op_type) if node.domain == "" else None
    if body is None or node.opset < body.since:
        return False
    return _has_f16_input(graph, node) or any(_dtype(graph, t) == F16 for t in node.outputs)


def _inline(graph: IrGraph, node: IrNode, registry: OperatorRegistry) -> list[IrNode]:
    """Replace `node` by its function body, in the node's own dtype; returns the body's nodes."""
    before = {n.id for n in graph.nodes}
    builder = GraphBuilder(graph=graph)
    builder.before = node
    op_type, inputs, attributes = FUNCTION_BODIES[node.op_type].build(builder, graph, node)
    body = [n for n in graph.nodes if n.id not in before]
    for n in body:
        _infer(graph, n, registry)
    return [*body, graph.replace_node(node, op_type, inputs, attributes)]


def _infer(graph: IrGraph, node: IrNode, registry: OperatorRegistry) -> None:
    operator = registry.get(node.domain, node.op_type, node.opset)
    assert operator is not None, node.op_type
    for t, (dtype, shape) in zip(node.outputs, operator.infer_output_shapes(InferenceCtx(graph, node))):
        if t is not None:
            graph.tensor(t).dtype, graph.tensor(t).shape = dtype, shape


def _needs_float32(graph: IrGraph, node: IrNode) -> bool:
    if not _has_f16_input(graph, node):
        return False
    body = FUNCTION_BODIES.get(node.op_type) if node.domain == "" else None
    return (node.domain, node.op_type) in _FLOAT32_ONLY or (body is not None and node.opset < body.since)


def _edge_producer(graph: IrGraph, t: int) -> IrNode | None:
    """The node feeding `t`; onnxruntime loads Constant nodes as initializers, so they are no edge."""
    producer = graph.tensor_producer(t)
    return None if producer is None or (producer.op_type == "Constant" and producer.domain == "") else producer


def _is_isolated(graph: IrGraph, node: IrNode, wrapped: set[int]) -> bool:
    """A float16 kernel whose float16 inputs all come from, and outputs all go to, wrapped nodes."""
    if (node.domain, node.op_type) not in _FLOAT16_KERNELS or node.id in wrapped:
        return False
    if not any(t is not None and _edge_producer(graph, t) for t in node.inputs):
        return False
    if any(graph.is_graph_output(t) for t in node.outputs if t is not None):
        return False
    typed = node.inputs[:1] if node.op_type in _VARIADIC else node.inputs
    f16_inputs = [t for t in typed if _dtype(graph, t) == F16]
    f16_outputs = [t for t in node.outputs if _dtype(graph, t) == F16]
    if not f16_inputs or not f16_outputs:
        return False
    producers = [_edge_producer(graph, t) for t in f16_inputs if t is not None]
    consumers = [c for t in f16_outputs for c, _ in graph.tensor_consumers(t)]
    return all(p is None or p.id in wrapped for p in producers) and all(c.id in wrapped for c in consumers)


def _wrap(graph: IrGraph, node: IrNode, up_casts: dict[int, int]) -> list[IrNode]:
    """Run `node` in float32: Cast its float16 inputs up (one Cast per tensor, shared through `up_casts`)
    and its float16 outputs back down; returns the Casts it added."""
    casts = []
    for t in dict.fromkeys(t for t in node.inputs if t is not None and _dtype(graph, t) == F16):
        if t not in up_casts:
            up_casts[t] = _twin(graph, t)
            casts.append(_cast(graph, t, up_casts[t], before=node))
    inputs = [t if t is None else up_casts.get(t, t) for t in node.inputs]
    attributes = dict(node.attributes)
    if attributes.get("dtype") == F16:  # generators (RandomNormalLike, EyeLike) name their output type
        attributes["dtype"] = int(F32)
    twins = {t: _twin(graph, t) for t in node.outputs if t is not None and _dtype(graph, t) == F16}
    outputs = [t if t is None else twins.get(t, t) for t in node.outputs]
    opset = node.opset
    node = graph.replace_node(node, node.op_type, inputs, attributes, domain=node.domain, outputs=outputs)
    node.opset = opset
    after = _next_node(graph, node)
    return casts + [_cast(graph, twin, t, before=after) for t, twin in twins.items()]


def _twin(graph: IrGraph, t: int) -> int:
    """A float32 tensor shaped like float16 `t`, named as onnxruntime names the arg it inserts."""
    tensor = graph.tensor(t)
    return graph.add_tensor(INSERTED + tensor.name, F32, tensor.shape).id


def _cast(graph: IrGraph, source: int, target: int, *, before: IrNode | None) -> IrNode:
    """An inserted `Cast(source) -> target`, named after its float16 side (None `before`: at the end)."""
    to = graph.tensor(target).dtype
    name = INSERTED + graph.tensor(target if to == F16 else source).name
    return graph.add_node("Cast", [source], [target], {"to": int(to)}, name=name, before=before)


def _remove_round_trips(graph: IrGraph, cast: IrNode, alive: set[int]) -> int:
    """RemoveDuplicateCastTransformer on one Cast: drop the Casts after it that undo it, then itself when
    only Casts read it. Returns how many Casts were removed."""
    if cast.id not in alive:
        return 0
    source, out = cast.inputs[0], cast.outputs[0]
    assert source is not None and out is not None, (
        f"Cast '{cast.name}': expected an input and an output tensor, found {cast.inputs} -> {cast.outputs}"
    )
    src, dst = graph.tensor(source).dtype, graph.tensor(out).dtype
    uses = graph.tensor_consumers(out)
    children = [c for c, _ in uses if c.op_type == "Cast" and c.domain == ""]
    lossy = _unsafe_cast(src, dst, cast)
    if lossy and any(_unsafe_cast(graph.tensor(c.outputs[0]).dtype, dst, c) for c in children):
        return 0
    undo = [c for c in children if _dtype(graph, c.outputs[0]) == src and not graph.is_graph_output(c.outputs[0])]
    for c in undo:
        _bypass(graph, c, source, alive)
    if uses and len(children) == len(uses) and not graph.is_graph_output(out):
        _bypass(graph, cast, source, alive)
        return len(undo) + 1
    return len(undo)


def _bypass(graph: IrGraph, cast: IrNode, source: int, alive: set[int]) -> None:
    out = cast.outputs[0]
    graph.replace_all_uses(out, source)
    graph.remove_node(cast)
    graph.remove_tensor(out)
    alive.discard(cast.id)


def _unsafe_cast(src: DataType, dst: DataType, cast: IrNode) -> bool:
    """onnxruntime's UnsafeCast: would this Cast lose information? Inserted narrowing Casts do not."""
    src_group, dst_group = _GROUPS.get(src), _GROUPS.get(dst)
    if src_group is None or dst_group is None:
        return True
    if src_group in ("integer", "float") and dst_group == "unsigned":
        return True
    if src_group == "float" and dst_group != "float":
        return True
    src_bits, dst_bits = _bits(src), _bits(dst)
    if src_group == "unsigned" and dst_group == "integer":
        return dst_bits <= src_bits
    if src_group in ("integer", "unsigned") and dst_group == "float":
        return dst_bits <= src_bits
    if {src, dst} == {F16, DataType.BFLOAT16}:
        return True
    return src_bits > dst_bits and not cast.name.startswith(INSERTED)


_GROUPS = {
    DataType.BOOL: "bool",
    **{t: "integer" for t in (DataType.INT8, DataType.INT16, DataType.INT32, DataType.INT64)},
    **{t: "unsigned" for t in (DataType.UINT8, DataType.UINT16, DataType.UINT32, DataType.UINT64)},
    **{t: "float" for t in (F16, DataType.BFLOAT16, F32, DataType.DOUBLE)},
}


def _bits(dtype: DataType) -> int:
    return 1 if dtype == DataType.BOOL else 16 if dtype == DataType.BFLOAT16 else dtype.itemsize * 8


def _next_node(graph: IrGraph, node: IrNode) -> IrNode | None:
    nodes = graph.nodes
    index = next(i for i, n in enumerate(nodes) if n.id == node.id)
    return nodes[index + 1] if index + 1 < len(nodes) else None
