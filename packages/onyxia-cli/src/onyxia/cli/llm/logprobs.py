"""Log-probabilities of sampled tokens: the `AddTokenLogprobs` generation pass and the host side of its output.

What a row gets: for each sampled token, log_softmax(logits)[token] and the `k` (<= 20) best entries of that
row, as `TokenLogprob`. The logits are the model's raw ones, before temperature, top-k or top-p (vLLM's default
`raw_logprobs`; numpy's log_softmax of onnxruntime's logits gives the same numbers), so they do not depend on
how the token was drawn.

Cost: the plan has one com.onyxia TokenLogprobs node (k = `MAX_K`, one shader) reading the last-position
logits and SampleToken's ids, over the rows listed in the resident `LOGPROB_ROWS` input, whose length is the
dim `LOGPROB_COUNT`. The session keeps that dim at 0, so a step where no row asks leaves the dispatch out
and reads nothing more; a batch step sets it to the asking rows (`select_rows`) and reads `LOGPROBS`, 1 + 2k
floats per asking row. A row sampled on the host (top-p, repetition penalty) already has its logits row on
the host: its log-probabilities are computed there (`from_logits`), with the same semantics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

import numpy as np

from onyxia.cli.llm.sampling import on_gpu
from onyxia.core import Absent, DataType, IrGraph, OperatorRegistry, Stage, TensorKind, shape_of
from onyxia.core.symbolic import SymbolicExpr
from onyxia.operators.family import ONYXIA_DOMAIN
from onyxia.operators.reduction.token_logprobs import MAX_K

if TYPE_CHECKING:
    from onyxia.cli.llm.batch_stream import Stream
    from onyxia.runtime import PlanExecutor

__all__ = [
    "LOGPROBS",
    "LOGPROB_COUNT",
    "LOGPROB_ROWS",
    "MAX_K",
    "AddTokenLogprobs",
    "TokenLogprob",
    "asking_rows",
    "check_logprobs",
    "from_gpu",
    "from_logits",
    "prepare",
    "row_logprobs",
    "select_rows",
]

LOGPROBS = "onyxia/logprobs"  # float [LOGPROB_COUNT, 1 + 2 * MAX_K]: token's, top MAX_K values, top MAX_K ids
LOGPROB_ROWS = "onyxia/logprob_rows"  # int64 [LOGPROB_COUNT]: the batch rows that asked
LOGPROB_COUNT = "onyxia_logprob_rows"


@dataclass(frozen=True)
class TokenLogprob:
    """One sampled token's log-probability and its row's `k` best (id, log-probability), best first (ties:
    lower id first); `top` is empty for k = 0."""

    token_id: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


class AddTokenLogprobs:
    """The TokenLogprobs node and its `LOGPROB_ROWS` input (see the module docstring); after `AddNextToken`."""

    name = "AddTokenLogprobs"
    stage = Stage.RESOLUTION

    def __init__(self, logits: str, token: str) -> None:
        self.logits, self.token = logits, token  # the last-position logits and SampleToken's ids

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        logits, token = graph.tensor_by_name(self.logits), graph.tensor_by_name(self.token)
        if logits is None or token is None or graph.tensor_by_name(LOGPROBS) is not None:
            return False
        count = SymbolicExpr.name(LOGPROB_COUNT)
        rows = graph.add_tensor(LOGPROB_ROWS, DataType.INT64, shape_of((count,)), TensorKind.INPUT)
        out = graph.add_tensor(LOGPROBS, DataType.FLOAT, Absent())
        graph.add_node(
            "TokenLogprobs",
            [logits.id, token.id, rows.id],
            [out],
            {"k": MAX_K},
            domain=ONYXIA_DOMAIN,
            name="onyxia/logprobs",
        )
        graph.mark_output(out)
        return True


def check_logprobs(value: object, where: str = "logprobs") -> int | None:
    """`value` as a stream's logprobs request (None: off; k >= 0: the token's and the k best), or `InputError`."""
    from onyxia.core import InputError

    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_K:
        raise InputError(f"{where} is {value!r}; expected None (off) or an integer 0 to {MAX_K} (top entries)")
    return value


def prepare(executor: PlanExecutor) -> None:
    """Bind `LOGPROB_COUNT` to 0 at load: until a batch step asks, no run computes log-probabilities."""
    if LOGPROB_ROWS in executor.input_names:
        executor.keep_resident([LOGPROB_ROWS])
        executor.update_dimensions({LOGPROB_COUNT: 0})


_selected: WeakKeyDictionary[PlanExecutor, list[int]] = WeakKeyDictionary()  # the rows last written, per plan


def select_rows(executor: PlanExecutor, rows: list[int]) -> bool:
    """Make the next runs compute log-probabilities for these batch rows (written only when they change);
    whether any row asks (then `LOGPROBS` is worth reading)."""
    if LOGPROB_ROWS not in executor.input_names or _selected.get(executor, []) == rows:
        return bool(rows)
    if rows:
        executor.write_input(LOGPROB_ROWS, np.array(rows, np.int64))
    if executor.dims.get(LOGPROB_COUNT) != len(rows):
        executor.update_dimensions({LOGPROB_COUNT: len(rows)})
    _selected[executor] = list(rows)
    return bool(rows)


def asking_rows(streams: Sequence[Stream]) -> list[int]:
    """The rows of a sampling run whose log-probabilities the GPU computes: those that asked and sample there
    (a host-sampled row has its logits row read back anyway: `row_logprobs` computes its values from it)."""
    return [b for b, s in enumerate(streams) if s.logprobs is not None and on_gpu(s.params)]


def row_logprobs(
    streams: Sequence[Stream], tokens: Sequence[int], result: Mapping[str, np.ndarray], logits: np.ndarray | None
) -> list[TokenLogprob | None]:
    """Each row's `TokenLogprob` (None where its stream did not ask): from `LOGPROBS` for rows the GPU sampled,
    from the row's logits where the host did (`logits`: the run's rows, when read back)."""
    gpu = result.get(LOGPROBS)
    found: list[TokenLogprob | None] = []
    asked = 0
    for b, (stream, token) in enumerate(zip(streams, tokens)):
        k = stream.logprobs
        if k is None:
            found.append(None)
            continue
        if not on_gpu(stream.params):
            assert logits is not None, "a host-sampled row's run reads the logits"
            found.append(from_logits(logits[b], token, k))
            continue
        assert gpu is not None, "a row asked, so the run read LOGPROBS"
        found.append(from_gpu(gpu[asked], token, k))
        asked += 1
    return found


def from_gpu(values: np.ndarray, token: int, k: int) -> TokenLogprob:
    """One row of `LOGPROBS` as the `k` a stream asked for (the plan computes `MAX_K`)."""
    ids = values[1 + MAX_K : 1 + MAX_K + k].astype(np.int64)
    top = tuple((int(i), float(v)) for i, v in zip(ids, values[1 : 1 + k]) if i >= 0)
    return TokenLogprob(token, float(values[0]), top)


def from_logits(row: np.ndarray, token: int, k: int) -> TokenLogprob:
    """The same from a logits row on the host (float64 log_softmax; ties: lower id first)."""
    x = row.astype(np.float64).reshape(-1)
    top_x = x.max()
    lse = top_x + np.log(np.exp(x - top_x).sum())
    order = np.lexsort((np.arange(x.size), -x))[:k]
    return TokenLogprob(token, float(x[token] - lse), tuple((int(i), float(x[i] - lse)) for i in order))
