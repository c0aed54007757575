"""The "generation" pass set: what the LLM session adds to the compiler pipeline, as ordinary passes.

They run in the RESOLUTION stage, before shape inference and before `MatchOnnxruntimeCpuFloat16`
(which must see the lm head's Cast chain with the Slice in front of it), and show in pass
statistics and ``onyxia compile --generation --dump-dir`` like every other pass:

- `SliceLogitsToLastPosition`: generation needs one row of logits, so the lm head (the largest matmul
  of the model: 262144 x 640 for Gemma 3 270m) runs on the last position only;
- `AddNextToken`: decoding reads back one token id, drawn on the GPU by com.onyxia SampleToken from the
  logits and the `SAMPLING` input (temperature, top_k, u; all 0 is ArgMax), so greedy and top-k sampling
  steps alike can feed the next step without the host; where the logits' width is static, SampleToken also
  reads `ALLOWED_TOKENS` (int32 [batch, ceil(V / 32)], resident, all ones until a grammar-constrained row
  writes its llguidance mask: `onyxia.cli.llm.constraints`);
- `AddTokenLogprobs` (`logprobs`): log-probabilities of the sampled token and the top entries, for the rows
  that ask (none by default: the dispatch is left out);
- `ResidentKvCache` (`resident_cache`): every cache is one resident buffer [slots, kv heads, capacity,
  head size] that present.N.* shares with past_key_values.N.*, so a step writes only its new rows, for
  every family, and one run's rows may belong to any slots (`resident` lists the pairs after the compile);
- `ReduceLmHeadPrecision` (only with ``lm_head`` fp16 or int8, first): the head reads a reduced-precision
  copy of its f32 weight (`lm_head_precision`).

Each is idempotent: a second run (the stage repeats until nothing changes) finds its work done.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from onyxia.cli.llm.lm_head_precision import ReduceLmHeadPrecision, check_lm_head
from onyxia.cli.llm.logprobs import AddTokenLogprobs
from onyxia.cli.llm.resident_cache import ResidentKvCache
from onyxia.cli.llm.signature import KvPair
from onyxia.core import (
    Absent,
    DataType,
    IrGraph,
    IrNode,
    OperatorRegistry,
    PassSet,
    Stage,
    TensorKind,
    TensorValue,
    shape_of,
)
from onyxia.core.symbolic import SymbolicDim
from onyxia.operators.family import ONYXIA_DOMAIN

__all__ = [
    "LAST_ROWS",
    "NEXT_TOKEN",
    "SAMPLING",
    "ALLOWED_TOKENS",
    "AddNextToken",
    "ResidentKvCache",
    "SliceLogitsToLastPosition",
    "generation_passes",
    "lm_head_node",
]

log = logging.getLogger(__name__)

NEXT_TOKEN = "next_token"
SAMPLING = "onyxia/sampling"  # float [3]: temperature (0: greedy), top_k (0: off), u in [0, 1)
ALLOWED_TOKENS = "onyxia/allowed_tokens"  # int32 [batch, ceil(V / 32)]: bit j % 32 of word j / 32 allows id j
_LAST_POSITION = "onyxia/last_position"
LAST_ROWS = "onyxia/last_rows"  # int64 [batch, 1]: each batch row's last position, as a row of [batch * sequence]
_HEAD_OPS = {("", "MatMul"), ("com.microsoft", "MatMulNBits"), ("", "Gemm"), ("com.microsoft", "DynamicQuantizeMatMul")}
_PASS_THROUGH = {"Cast", "Div", "Mul", "Tanh", "Add", "Identity"}  # softcapping and dtype casts after the head


class SliceLogitsToLastPosition:
    """The lm head computes the last position's logits only, not every prompt position's.

    With `batch` other than 1 the rows of one run may end at different positions (prompts of several
    lengths prefilled together, right-padded): the head's input is then gathered at `LAST_ROWS`, one flat
    row index per batch row (b * sequence + its last position), fed by the session."""

    name = "SliceLogitsToLastPosition"
    stage = Stage.RESOLUTION

    def __init__(self, logits: str, batch: SymbolicDim = 1) -> None:
        self.logits = logits
        self.batch = batch

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        """Slice the lm head's input to its last position; False when done already or no head is found."""
        if any(n.name == _LAST_POSITION for n in graph.nodes):
            return False
        logits = graph.tensor_by_name(self.logits)
        head = lm_head_node(graph, logits.id) if logits is not None else None
        if head is None or head.inputs[0] is None:
            log.warning("no lm head found before '%s'; logits are computed for every position", self.logits)
            return False
        head = _first_cast(graph, head)
        hidden = graph.tensor(head.inputs[0])
        last = graph.add_tensor(f"{hidden.name}/last_position", hidden.dtype, Absent())
        if self.batch == 1:
            starts, ends, axes = (_constant(graph, f"{_LAST_POSITION}/{k}", v) for k, v in _SLICE.items())
            graph.add_node("Slice", [hidden.id, starts, ends, axes], [last], name=_LAST_POSITION, before=head)
        else:
            rows = graph.add_tensor(f"{hidden.name}/rows", hidden.dtype, Absent())
            graph.add_node("Flatten", [hidden.id], [rows], {"axis": 2}, name=f"{_LAST_POSITION}/rows", before=head)
            index = graph.add_tensor(LAST_ROWS, DataType.INT64, shape_of((self.batch, 1)), TensorKind.INPUT)
            graph.add_node("Gather", [rows.id, index.id], [last], {"axis": 0}, name=_LAST_POSITION, before=head)
        graph.set_input(head, 0, last)
        return True


_SLICE = {"starts": [-1], "ends": [2**31 - 1], "axes": [-2]}


class AddNextToken:
    """A SampleToken node after the logits, so a decode step reads back one token id, not the logits."""

    name = "AddNextToken"
    stage = Stage.RESOLUTION

    def __init__(self, logits: str, batch: SymbolicDim = 1) -> None:
        self.logits = logits
        self.batch = batch  # rows of SAMPLING: 1 is one triple for the run ([3])

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        """A `next_token` output: the id SampleToken draws from the (last-position) logits under the
        `SAMPLING` input, which the session keeps resident (zeros, greedy, until it samples)."""
        logits = graph.tensor_by_name(self.logits)
        if logits is None or graph.tensor_by_name(NEXT_TOKEN) is not None:
            return False
        shape = shape_of((3,)) if self.batch == 1 else shape_of((self.batch, 3))
        params = graph.add_tensor(SAMPLING, DataType.FLOAT, shape, TensorKind.INPUT)
        token = graph.add_tensor(NEXT_TOKEN, DataType.INT64, Absent())
        inputs = [logits.id, params.id]
        vocab = logits.shape.dims[-1] if not isinstance(logits.shape, Absent) and logits.shape.dims else None
        if isinstance(vocab, int):  # the mask's width is fixed at compile time: a static vocabulary only
            words = (vocab + 31) // 32
            mask = graph.add_tensor(ALLOWED_TOKENS, DataType.INT32, shape_of((self.batch, words)), TensorKind.INPUT)
            inputs.append(mask.id)
        graph.add_node("SampleToken", inputs, [token], domain=ONYXIA_DOMAIN, name="onyxia/next_token")
        graph.mark_output(token)
        return True


def generation_passes(
    logits: str,
    kv_pairs: Sequence[KvPair],
    capacity: int,
    batch: SymbolicDim = 1,
    lm_head: str = "exact",
) -> PassSet:
    """The set `LlmSession` adds: last-position logits, the sampled token (SampleToken's params one triple, or a
    triple per row when `batch` is not 1), resident KV caches of `capacity` rows per slot, and with `lm_head`
    other than "exact" a reduced-precision head."""
    reduced = () if check_lm_head(lm_head) == "exact" else (ReduceLmHeadPrecision(logits, lm_head, lm_head_node),)
    return PassSet(
        "generation",
        (
            *reduced,
            SliceLogitsToLastPosition(logits, batch),
            AddNextToken(logits, batch),
            AddTokenLogprobs(logits, NEXT_TOKEN),
            ResidentKvCache(kv_pairs, capacity, batch),
        ),
    )


def _constant(graph: IrGraph, name: str, values: list[int]) -> int:
    array = np.array(values, np.int64)
    tensor = graph.add_tensor(
        name, DataType.INT64, shape_of(array.shape), TensorKind.INITIALIZER, initializer=TensorValue.from_numpy(array)
    )
    return tensor.id


def lm_head_node(graph: IrGraph, logits: int) -> IrNode | None:
    """The matmul that makes `logits`, through soft-capping and casts; None when there is none."""
    node = graph.tensor_producer(logits)
    while node is not None and (node.domain, node.op_type) not in _HEAD_OPS:
        if node.op_type not in _PASS_THROUGH:
            return None
        produced = [t for t in node.inputs if t is not None and not _constant_value(graph, t)]
        if len(produced) != 1:
            return None
        node = graph.tensor_producer(produced[0])
    return node


def _constant_value(graph: IrGraph, t: int) -> bool:
    """A weight or a Constant's output: the soft-cap's 30 in ``Div(logits, 30)``, not the logits."""
    producer, tensor = graph.tensor_producer(t), graph.tensor(t)
    known = tensor.value is not None or tensor.initializer is not None
    return known or (producer is not None and producer.op_type == "Constant")


def _first_cast(graph: IrGraph, head: IrNode) -> IrNode:
    """The first of the Casts feeding `head` alone (exports round the final norm to f16 before it).

    Slicing before them keeps the norm -> f32-to-f16 Cast -> head chain that MatchOnnxruntimeCpuFloat16
    shortens as onnxruntime does (the head reads the unrounded f32 norm); a Slice in between would stop it."""
    node = head
    while (t := node.inputs[0]) is not None and len(graph.tensor_consumers(t)) == 1:
        producer = graph.tensor_producer(t)
        if producer is None or producer.op_type != "Cast" or producer.inputs[0] is None:
            break
        node = producer
    return node
