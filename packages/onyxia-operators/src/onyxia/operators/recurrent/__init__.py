"""Recurrent family: ops whose output at one step feeds the next step of the same node.

Membership: an op belongs here when it carries a state along a sequence axis inside one node, so
its GPU plan is a time loop (LSTM, GRU, RNN; `recurrent`, recurrent_io.wgsl and recurrent.wgsl). A scan over a sequence
without a carried state belongs to `reduction` (CumSum); a Loop or Scan with a subgraph body is
`control`. Imports onyxia.core and onyxia.operators helpers only (no onnx, wgpu or onyxia.runtime).
"""

from onyxia.operators.recurrent.recurrent import RECURRENT, RecurrentOp

__all__ = ["RECURRENT", "RecurrentOp"]
