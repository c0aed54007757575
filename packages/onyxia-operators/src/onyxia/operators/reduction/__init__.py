"""Reductions: ops that combine the elements along axes.

Membership: an op belongs here when each output element combines a line (or set of lines) of input
elements: the Reduce* family (one shader, one row per op), Softmax / LogSoftmax / Hardmax, ArgMax / ArgMin (a
reduction to the winner's index, `arg_reduce`), TopK (the k best of each line and their indices,
`top_k`) and CumSum (running sums along an axis, `scan`); com.onyxia SampleToken (the next token id drawn
from a row of logits: ArgMax, or top-k / temperature sampling at a given uniform draw) and TokenLogprobs (the
log-softmax at the sampled token and the top k entries of the rows that ask).

Keys carry opset ranges where ONNX changed the op: Reduce* take `axes` as an input from opset 13
(ReduceSum) or 18 (the rest), and Softmax stopped coercing to 2-D at opset 13.
"""

from onyxia.operators.reduction.arg_reduce import ARG_REDUCE, ArgReduceOp
from onyxia.operators.reduction.reduce import REDUCTION_OPS, ReductionOp
from onyxia.operators.reduction.sample_token import SAMPLE_TOKEN, SampleTokenOp
from onyxia.operators.reduction.scan import CUMSUM, CumSumOp
from onyxia.operators.reduction.softmax import SOFTMAX_OPS, SoftmaxOp
from onyxia.operators.reduction.token_logprobs import TOKEN_LOGPROBS, TokenLogprobsOp
from onyxia.operators.reduction.top_k import TOP_K, TopKOp

__all__ = [
    "ARG_REDUCE",
    "CUMSUM",
    "REDUCTION",
    "REDUCTION_ONYXIA",
    "ArgReduceOp",
    "CumSumOp",
    "ReductionOp",
    "SampleTokenOp",
    "SoftmaxOp",
    "TOP_K",
    "TokenLogprobsOp",
    "TopKOp",
]

ReductionRow = ReductionOp | SoftmaxOp | ArgReduceOp | CumSumOp | TopKOp

REDUCTION: dict[str | tuple[str, int, int | None], ReductionRow] = {
    key: row for table in (REDUCTION_OPS, SOFTMAX_OPS, ARG_REDUCE, CUMSUM, TOP_K) for key, row in table.items()
}

REDUCTION_ONYXIA: dict[str, SampleTokenOp | TokenLogprobsOp] = {**SAMPLE_TOKEN, **TOKEN_LOGPROBS}  # com.onyxia
