"""What a decoder graph takes and returns, read from its inputs and outputs by naming convention.

No per-model hard-coding beyond the exporters' names: `input_ids`, optional `attention_mask` and
`position_ids`, `past_key_values.N.key/value` (or `past_key_values.N.decoder.key`-free variants),
`logits`, `present.N.key/value`. The onnxruntime-genai builder, optimum and PyTorch's own exporter
(`torch.onnx.export(dynamo=True)` with these names passed as `input_names`/`output_names`, the names
onnxruntime users feed) all write them. Anything else is an error that lists what was found; so is a
graph with no cache at all (a `use_cache=False` export): a session appends each step to a resident
cache, and without past inputs a decode step would see only its own token.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from onyxia.core import DataType, IrGraph, ModelLoadError, SymbolicDim

__all__ = ["KvPair", "LlmSignature", "read_signature"]

_PAST = re.compile(r"^past_key_values\.(\d+)\.(key|value)$")
_PRESENT = re.compile(r"^present\.(\d+)\.(key|value)$")


@dataclass(frozen=True)
class KvPair:
    """One cache tensor: the past input and the present output that continues it."""

    layer: int
    kind: str  # "key" | "value"
    past: str
    present: str
    dtype: DataType
    past_dims: tuple[SymbolicDim, ...]
    present_dims: tuple[SymbolicDim, ...]

    @property
    def windowed(self) -> bool:
        """A fixed-capacity sliding buffer (onnxruntime-genai): present keeps the past's length."""
        return self.past_dims[2] == self.present_dims[2] or "sliding" in str(self.past_dims[2])


@dataclass(frozen=True)
class LlmSignature:
    input_ids: str
    attention_mask: str | None
    position_ids: str | None
    logits: str
    kv: tuple[KvPair, ...]
    input_dims: dict[str, tuple[SymbolicDim, ...]]

    @property
    def num_layers(self) -> int:
        return len({p.layer for p in self.kv})


def read_signature(graph: IrGraph, where: str) -> LlmSignature:
    inputs = {graph.tensor(t).name: graph.tensor(t) for t in graph.inputs}
    outputs = {graph.tensor(t).name: graph.tensor(t) for t in graph.outputs}
    problems = []
    if "input_ids" not in inputs:
        problems.append("no 'input_ids' input")
    if "logits" not in outputs:
        problems.append("no 'logits' output")
    known = {"input_ids", "attention_mask", "position_ids"}
    strange = sorted(n for n in inputs if n not in known and not _PAST.match(n))
    if strange:
        problems.append(f"unexpected inputs {strange}")
    pairs = []
    for name, tensor in inputs.items():
        match = _PAST.match(name)
        if not match:
            continue
        layer, kind = int(match.group(1)), match.group(2)
        present = f"present.{layer}.{kind}"
        if present not in outputs:
            problems.append(f"input '{name}' has no matching output '{present}'")
            continue
        pairs.append(
            KvPair(layer, kind, name, present, tensor.dtype, _dims(tensor.shape), _dims(outputs[present].shape))
        )
    if not problems and not pairs:
        problems.append(
            "no KV cache: no past_key_values.N.key/value inputs and present.N.key/value outputs (an export "
            "without a cache, e.g. torch.onnx.export of a model called with use_cache=False; export it with "
            "its past key/values as inputs and the updated ones as outputs)"
        )
    if problems:
        raise ModelLoadError(
            f"{where}: not a decoder with the expected signature: {'; '.join(problems)}. Found inputs "
            f"{sorted(inputs)} and outputs {sorted(outputs)}; expected input_ids, [attention_mask], [position_ids], "
            "past_key_values.N.key/value -> logits, present.N.key/value"
        )
    return LlmSignature(
        "input_ids",
        "attention_mask" if "attention_mask" in inputs else None,
        "position_ids" if "position_ids" in inputs else None,
        "logits",
        tuple(sorted(pairs, key=lambda p: (p.layer, p.kind))),
        {name: _dims(t.shape) for name, t in inputs.items()},
    )


def _dims(shape: object) -> tuple[SymbolicDim, ...]:
    return tuple(getattr(shape, "dims", ()))
