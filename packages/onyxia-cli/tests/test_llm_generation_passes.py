"""The generation PassSet runs inside the pipeline: its passes appear in the pass record, each changes
the graph once (a second run finds its work done), and the compiled plan has the last-position Slice,
the next_token ArgMax output, the log-probabilities output and its rows input, and the resident KV cache (aliases and the layout record)."""

from __future__ import annotations

from llm_cases import DATA

from onyxia.cli.llm.generation_passes import NEXT_TOKEN, generation_passes
from onyxia.cli.llm.logprobs import LOGPROB_ROWS, LOGPROBS
from onyxia.cli.llm.resident_cache import KV_ROWS, ResidentKvCache, shared_buffer_dims
from onyxia.cli.llm.signature import read_signature
from onyxia.compiler import CompilerPipeline
from onyxia.onnx import load_and_parse_model
from onyxia.operators import core_operator_registry

MODEL = DATA / "gemma3-tiny" / "onnx" / "model.onnx"


def test_generation_passes_run_in_the_pipeline_once_each() -> None:
    graph = load_and_parse_model(MODEL)
    signature = read_signature(graph, str(MODEL))
    pairs = [(p.past, p.present) for p in signature.kv]
    generation = generation_passes(signature.logits, signature.kv, 64)
    pipeline = CompilerPipeline(core_operator_registry()).add_pass_set(generation)
    dims = {"batch_size": 1, **shared_buffer_dims(graph, signature.kv, 64)}
    assert dims == {"batch_size": 1, "past_sequence_length": 64}  # GroupQueryAttention's shared-buffer convention
    compiled = pipeline.compile(graph, dims)

    assert pipeline.pass_sets == ["generation"]
    changed = {r.name: r.changed for r in pipeline.runs if r.name in {p.name for p in generation.passes}}
    assert changed == dict.fromkeys(
        ("SliceLogitsToLastPosition", "AddNextToken", "AddTokenLogprobs", "ResidentKvCache"), False
    )
    first_runs = [r for r in pipeline.runs if r.name in changed][:4]
    assert [(r.name, r.changed) for r in first_runs] == [
        ("SliceLogitsToLastPosition", True),
        ("AddNextToken", True),
        ("AddTokenLogprobs", True),
        ("ResidentKvCache", True),
    ]
    resident = next(p for p in generation.passes if isinstance(p, ResidentKvCache))
    assert sorted(resident.resident) == sorted(pairs)  # every cache: GroupQueryAttention writes in place
    assert KV_ROWS in [compiled.tensors[t].name for t in compiled.inputs]
    assert {NEXT_TOKEN, LOGPROBS} <= {compiled.tensors[t].name for t in compiled.outputs}
    assert LOGPROB_ROWS in [compiled.tensors[t].name for t in compiled.inputs]
    names = {compiled.tensors[t].name: t for t in compiled.tensors}
    assert {(names[present], names[past]) for past, present in pairs} <= set(compiled.aliases.items())
    assert graph.tensor_by_name(NEXT_TOKEN) is None  # the caller's graph is left as it was
