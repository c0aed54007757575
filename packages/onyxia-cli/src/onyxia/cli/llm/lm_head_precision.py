"""`ReduceLmHeadPrecision`: the lm head reads a reduced-precision copy of its f32 weight (opt-in, never the default).

A decode step reads every weight once, and a tied f32 head is most of those bytes: 67% of a q4 Gemma 3
step (the 262144 x 640 embedding is 671 MB; the q4 layers are a third of that). ``--lm-head fp16|int8``
trades exact logits for a half- or quarter-size head:

- ``fp16``: ``Cast(MatMul(Cast(h, f16), W16), f32)``. W16 is W rounded to nearest (saturated at f16's
  65504); matmul_rows.wgsl / the panel kernel sum in f32, so the error is the rounding of W, of h and of
  each logit (about 2^-11 relative each). Needs the adapter feature ``shader-f16``.
- ``int8``: com.microsoft ``DynamicQuantizeMatMul(h, Wq, scale)``, an existing one-dispatch kernel:
  Wq [K, N] int8 holds each vocabulary row symmetric per row (scale amax / 127, round half to even, no
  zero point), and the kernel quantizes h to uint8 per tensor as onnxruntime's quantize_dynamic does.

Only the head changes: the embedding Gather keeps reading the exact f32 table (a tied model keeps both
on the GPU; the copy is the price of the smaller read per step). The copies are lazy `TensorValue`s made
from the f32 initializer when the runtime uploads them, so nothing is stored twice on disk.

The head is the one `SliceLogitsToLastPosition` finds (`lm_head`): a MatMul or Gemm whose weight is a
2-D f32 initializer, read as stored ([K, N]: a genai head) or through ``Transpose(perm=[1, 0])`` / Gemm
``transB=1`` ([N, K]: optimum Gemma's tied embedding). A quantized head (MatMulNBits) or an f16 one is
already small: the pass logs why it declines and changes nothing. Idempotent: the rewritten head's weight
is no longer f32 (fp16) or the head is a DynamicQuantizeMatMul (int8), which the pass does not take.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from onyxia.core import (
    Absent,
    DataType,
    InputError,
    IrGraph,
    IrNode,
    ModelLoadError,
    OperatorRegistry,
    Stage,
    TensorKind,
    TensorValue,
    max_binding_bytes,
    shape_of,
)

__all__ = ["LM_HEAD_PRECISIONS", "ReduceLmHeadPrecision", "check_lm_head"]

log = logging.getLogger(__name__)

_MS = "com.microsoft"
_F16_MAX = float(np.finfo(np.float16).max)


@dataclass(frozen=True)
class _Weight:
    """The head's f32 weight: its tensor, its stored array's loader, and whether it is stored [N, K]."""

    tensor: int
    name: str
    load: Callable[[], np.ndarray]
    transposed: bool
    k: int
    n: int

    def rows(self) -> np.ndarray:
        """The weight as [N, K]: one row per vocabulary entry (the int8 copy's scale axis)."""
        data = np.asarray(self.load(), np.float32).reshape((self.n, self.k) if self.transposed else (self.k, self.n))
        return data if self.transposed else data.T


def _fp16_head(graph: IrGraph, head: IrNode, w: _Weight) -> None:
    """``Cast(MatMul(Cast(h, f16), W16), f32)`` in the head's place; W16 keeps W's layout (the Transpose too)."""

    def load() -> np.ndarray:
        return np.clip(np.asarray(w.load(), np.float32), -_F16_MAX, _F16_MAX).astype(np.float16)

    dims = (w.n, w.k) if w.transposed else (w.k, w.n)
    weight = _initializer(graph, f"{w.name}/fp16", DataType.FLOAT16, dims, load)
    x = graph.tensor(_required(head.inputs[0]))
    x16 = graph.add_tensor(f"{x.name}/fp16", DataType.FLOAT16, Absent())
    graph.add_node("Cast", [x.id], [x16], {"to": int(DataType.FLOAT16)}, name=f"{head.name}/fp16/Cast", before=head)
    b = weight
    if w.transposed:
        b = graph.add_tensor(f"{w.name}/fp16/transposed", DataType.FLOAT16, Absent()).id
        graph.add_node("Transpose", [weight], [b], {"perm": [1, 0]}, name=f"{head.name}/fp16/Transpose", before=head)
    y16 = graph.add_tensor(f"{head.name}/fp16/logits", DataType.FLOAT16, Absent())
    graph.add_node("MatMul", [x16, b], [y16], name=f"{head.name}/fp16", before=head)
    graph.replace_node(head, "Cast", [y16], {"to": int(DataType.FLOAT)})


def _int8_head(graph: IrGraph, head: IrNode, w: _Weight) -> None:
    """com.microsoft DynamicQuantizeMatMul(h, Wq [K, N] int8, scale [N]) in the head's place.

    Its kernel binds Wq whole (it does not split a weight in ranges as MatMul does), so a copy over the
    device's storage-binding limit is an error, not a silent exact head: Gemma 3 270m's is 168 MB, over
    lavapipe's 128 MiB."""
    limit = max_binding_bytes()
    if w.k * w.n > limit:
        raise ModelLoadError(
            f"lm_head int8: the int8 copy of '{w.name}' ({w.k} x {w.n}, {w.k * w.n} bytes) is over this device's "
            f"storage-binding limit of {limit} bytes (DynamicQuantizeMatMul binds its weight whole); "
            "use lm_head fp16, or exact"
        )

    def scales() -> np.ndarray:
        amax = np.abs(w.rows()).max(axis=1)
        return np.where(amax > 0, amax / np.float32(127), np.float32(1)).astype(np.float32)

    def quantized() -> np.ndarray:
        rows = w.rows()
        q = np.rint(rows / scales()[:, None]).clip(-127, 127).astype(np.int8)
        return np.ascontiguousarray(q.T)

    weight = _initializer(graph, f"{w.name}/int8", DataType.INT8, (w.k, w.n), quantized)
    scale = _initializer(graph, f"{w.name}/int8/scale", DataType.FLOAT, (w.n,), scales)
    graph.opset_imports.setdefault(_MS, 1)
    graph.replace_node(head, "DynamicQuantizeMatMul", [head.inputs[0], weight, scale], domain=_MS)


# The rule table: how each reduced precision rewrites the head. "exact" rewrites nothing.
LM_HEAD_PRECISIONS: dict[str, Callable[[IrGraph, IrNode, _Weight], None] | None] = {
    "exact": None,
    "fp16": _fp16_head,
    "int8": _int8_head,
}


def check_lm_head(precision: str) -> str:
    """`precision` if it names a row of `LM_HEAD_PRECISIONS`, else an error listing the choices."""
    if precision not in LM_HEAD_PRECISIONS:
        raise InputError(f"lm_head {precision!r} is not one of {', '.join(LM_HEAD_PRECISIONS)} (default: exact)")
    return precision


class ReduceLmHeadPrecision:
    """Swap the lm head for one reading a reduced-precision copy of its f32 weight (`LM_HEAD_PRECISIONS`)."""

    name = "ReduceLmHeadPrecision"
    stage = Stage.RESOLUTION

    def __init__(self, logits: str, precision: str, find_head: Callable[[IrGraph, int], IrNode | None]) -> None:
        self.logits = logits
        self.precision = check_lm_head(precision)
        self.find_head = find_head
        self.rewritten: list[str] = []  # the heads changed, by node name

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        rewrite = LM_HEAD_PRECISIONS[self.precision]
        logits = graph.tensor_by_name(self.logits)
        head = self.find_head(graph, logits.id) if rewrite is not None and logits is not None else None
        if rewrite is None or head is None:
            return False
        weight = _head_weight(graph, head)
        if isinstance(weight, str):
            log.debug("ReduceLmHeadPrecision(%s): '%s' kept: %s", self.precision, head.name, weight)
            return False
        stale = graph.tensor_producer(_required(head.inputs[1]))
        rewrite(graph, head, weight)
        if stale is not None and not any(
            graph.tensor_consumers(t) or graph.is_graph_output(t) for t in stale.outputs if t is not None
        ):
            graph.remove_node(stale)  # the f32 Transpose only the head read
        self.rewritten.append(head.name)
        log.info(
            "ReduceLmHeadPrecision: '%s' reads a %s copy of '%s' [%d x %d]",
            head.name,
            self.precision,
            weight.name,
            weight.k,
            weight.n,
        )
        return True


def _head_weight(graph: IrGraph, head: IrNode) -> _Weight | str:
    """The head's f32 weight, or why the head is not one this pass rewrites."""
    if head.domain != "" or head.op_type not in ("MatMul", "Gemm") or len(head.inputs) < 2 or head.inputs[1] is None:
        return f"{head.domain or 'ai.onnx'}.{head.op_type} is not a float MatMul/Gemm"
    transposed = False
    if head.op_type == "Gemm":
        attrs = head.attributes
        if len(head.inputs) > 2 and head.inputs[2] is not None:
            return "Gemm with a bias C"
        if attrs.get("transA", 0) or float(attrs.get("alpha", 1.0)) != 1.0:
            return f"Gemm with transA={attrs.get('transA', 0)}, alpha={attrs.get('alpha', 1.0)}"
        transposed = bool(attrs.get("transB", 0))
    b = head.inputs[1]
    producer = graph.tensor_producer(b)
    if producer is not None and producer.op_type == "Transpose" and producer.domain == "" and not transposed:
        perm = producer.attributes.get("perm")
        if perm is not None and [int(p) for p in perm] != [1, 0]:
            return f"its weight's Transpose has perm {list(perm)}"
        b, transposed = _required(producer.inputs[0]), True
    elif producer is not None:
        return f"its weight is computed by {producer.op_type}, not stored"
    tensor = graph.tensor(b)
    source = tensor.initializer if tensor.initializer is not None else tensor.value
    if source is None or tensor.dtype != DataType.FLOAT:
        return f"its weight '{tensor.name}' is {tensor.dtype.name.lower()}, not an f32 initializer"
    dims = source.dims if isinstance(source, TensorValue) else source.shape
    if len(dims) != 2:
        return f"its weight '{tensor.name}' has dims {list(dims)}, not 2-D"
    load = source.numpy if isinstance(source, TensorValue) else (lambda: np.asarray(source))
    n, k = dims if transposed else dims[::-1]
    return _Weight(tensor.id, tensor.name, load, transposed, int(k), int(n))


def _initializer(
    graph: IrGraph, name: str, dtype: DataType, dims: tuple[int, ...], load: Callable[[], np.ndarray]
) -> int:
    value = TensorValue(dtype, dims, load, name=name)
    return graph.add_tensor(name, dtype, shape_of(dims), TensorKind.INITIALIZER, initializer=value).id


def _required(t: int | None) -> int:
    assert t is not None, "checked by _head_weight"
    return t
