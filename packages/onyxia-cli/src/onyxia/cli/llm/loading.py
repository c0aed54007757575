"""Building an `LlmSession`: resolve the directory, parse, rewrite, compile, upload.

Each phase reports through `progress` (the CLI shows it as a rich progress bar).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from onyxia.cli.llm.cache_memory import check_cache_memory
from onyxia.cli.llm.families import describe_architecture, family_of
from onyxia.cli.llm.generation_passes import ALLOWED_TOKENS, SAMPLING, generation_passes
from onyxia.cli.llm.lm_head_precision import check_lm_head
from onyxia.cli.llm.logprobs import LOGPROB_COUNT
from onyxia.cli.llm.logprobs import prepare as prepare_logprobs
from onyxia.cli.llm.model_dir import ModelDirectory, resolve_model_dir
from onyxia.cli.llm.resident_cache import ResidentKvCache, shared_buffer_dims
from onyxia.cli.llm.signature import LlmSignature, read_signature
from onyxia.cli.llm.tokenizer import TextTokenizer
from onyxia.cli.plan_cache import cached_build, plan_key, plans_dir
from onyxia.core import CompiledModel, DataType, IrGraph, ModelLoadError, SymbolicExpr, TensorKind
from onyxia.core.settings import settings

if TYPE_CHECKING:  # imported for real inside build_session: wgpu loads when a session is built
    from onyxia.cli.llm.session import LlmSession
    from onyxia.runtime import Runtime

    Session = TypeVar("Session", bound=LlmSession)

__all__ = ["LoadOptions", "build_session"]

log = logging.getLogger(__name__)

DEFAULT_MAX_LENGTH = 2048
# Longer prompts are prefilled in chunks of this many tokens: activations are sized for a chunk, not
# for max_length (at 2048 they would add a quarter of the 270m model's weights to GPU memory), and a
# 256-token chunk already keeps the matmuls' tiles full.
PREFILL_CHUNK = 256
_SOURCES = (TensorKind.INPUT, TensorKind.INITIALIZER)


@dataclass(frozen=True)
class LoadOptions:
    """What `LlmSession.from_pretrained` takes besides the directory (its docstring says what each does)."""

    precision: str | None = None
    max_length: int | None = None
    slots: int = 1
    prefill_chunk: int | None = None
    accuracy_level: int | None = None
    match_onnxruntime: bool = True
    lm_head: str = "exact"


def build_session(
    cls: type[Session],
    model_dir: str | Path,
    load: LoadOptions,
    runtime: Runtime | None,
    progress: Callable[[str], None],
) -> Session:
    """`cls(...)` (an `LlmSession` or a subclass) over `model_dir`, compiled, uploaded and warmed up."""
    from onyxia.runtime import Runtime, compiling_for

    precision, max_length, slots, lm_head = load.precision, load.max_length, load.slots, load.lm_head
    accuracy_level, match_onnxruntime = load.accuracy_level, load.match_onnxruntime

    runtime = runtime or Runtime()
    if check_lm_head(lm_head) == "fp16" and runtime.features and "shader-f16" not in runtime.features:
        raise ModelLoadError("lm_head fp16 needs the adapter feature shader-f16, which this adapter lacks")
    found = resolve_model_dir(model_dir, precision, runtime.features)
    slots = _fixed_batch_slots(found.model_path, slots)
    tokenizer = TextTokenizer(found.tokenizer_path, found.tokenizer_config, found.chat_template, found.root)
    if family_of(found.config) is None:
        log.warning("%s: %s; running it by the graph's conventions", found.root, describe_architecture(found.config))
    limit = _max_length(found.max_position_embeddings, max_length, found.model_path)
    if not isinstance(slots, int) or isinstance(slots, bool) or slots < 1:
        raise ModelLoadError(f"slots is {slots!r}; expected an integer >= 1 (sequences held at once)")
    options = {"accuracy_level": accuracy_level, "match_onnxruntime": match_onnxruntime, "lm_head": lm_head}
    options |= {"batched": slots > 1, "capacity": limit}  # slots beyond 1 change buffer sizes, not the plan
    # plan splits what this device cannot bind or hold, and picks the kernel variants that fit it
    with compiling_for(runtime):
        key = plan_key(
            found.model_path,
            {},
            settings(),
            passes=["llm-session"],
            extra={**options, "config": found.config},
            memo=plans_dir(settings()) / "digests",
        )
        compiled, built, hit = cached_build(
            key,
            lambda: _compile(found, progress, accuracy_level, match_onnxruntime, lm_head, limit, slots),
            data_dir=found.model_path.parent,
        )
    signature, static, aliased = built
    with compiling_for(runtime):
        kv_bytes = check_cache_memory(signature, static, slots, limit, str(found.root))
    log.info("KV caches: %d slots x %d tokens = %.1f MiB", slots, limit, kv_bytes / 2**20)
    if hit:
        progress("loaded the compiled plan from the cache")
    progress("uploading weights")
    max_dims = {name: limit for name in compiled.symbols}
    batch = signature.input_dims[signature.input_ids][0]
    if isinstance(batch, SymbolicExpr) and batch.is_name and str(batch) in max_dims:
        max_dims[str(batch)] = slots
    if LOGPROB_COUNT in max_dims:
        max_dims[LOGPROB_COUNT] = slots  # rows asking for log-probabilities: at most one per slot
    chunk = min(limit, load.prefill_chunk or PREFILL_CHUNK)
    sequence = signature.input_dims[signature.input_ids][1]
    if isinstance(sequence, SymbolicExpr) and sequence.is_name and str(sequence) in max_dims:
        max_dims[str(sequence)] = chunk
    executor = runtime.load_model(compiled, static, max_dims=max_dims)
    executor.carry({p.past: p.present for p in signature.kv if (p.past, p.present) not in aliased})
    executor.keep_resident([p.past for p in signature.kv])
    for pair in signature.kv:
        if pair.windowed and (pair.past, pair.present) not in aliased:
            dims = [static.get(str(d), 1) if not isinstance(d, int) else d for d in pair.past_dims]
            executor.write_input(pair.past, np.zeros(dims, pair.dtype.numpy))
    if SAMPLING in executor.input_names:
        executor.write_input(SAMPLING, np.zeros(3, np.float32))  # resident from here on; greedy until set
    if ALLOWED_TOKENS in executor.input_names:  # resident: every id allowed until a constrained row writes it
        words = executor.compiled.tensor_by_name(ALLOWED_TOKENS).dims[-1]
        assert isinstance(words, int), "AddNextToken adds the mask for a static vocabulary only"
        executor.write_input(ALLOWED_TOKENS, np.full((slots, words), -1, np.int32))
    prepare_logprobs(executor)  # no row asks for log-probabilities until a batch step does
    adapter = str(runtime.adapter_info.get("device") or runtime.adapter_info.get("description") or "unknown")
    session = cls(found, tokenizer, executor, signature, limit, aliased, adapter, prefill_chunk=chunk, slots=slots)
    progress("warming up")
    session.warm_up()
    return session


def _compile(
    found: ModelDirectory,
    progress: Callable[[str], None],
    accuracy_level: int | None,
    match_onnxruntime: bool,
    lm_head: str,
    capacity: int,
    slots: int,
) -> tuple[CompiledModel, tuple[LlmSignature, dict[str, int], list[tuple[str, str]]]]:
    """Parse and compile the session's graph; also what the session needs of the graph, stored with the plan."""
    from onyxia.compiler import CompilerPipeline
    from onyxia.onnx import load_and_parse_model
    from onyxia.operators import core_operator_registry
    from onyxia.operators.passes import MatchOnnxruntimeCpuFloat16

    progress("parsing")
    graph = load_and_parse_model(found.model_path)
    signature = read_signature(graph, f"{found.model_path} ({describe_architecture(found.config)})")
    registry = core_operator_registry()
    if accuracy_level is not None:
        for node in graph.nodes_of("MatMulNBits", "com.microsoft"):
            node.attributes["accuracy_level"] = accuracy_level
    static = _static_dims(graph, signature, found.config, slots) | shared_buffer_dims(graph, signature.kv, capacity)
    batch = signature.input_dims[signature.input_ids][0]
    generation = generation_passes(signature.logits, signature.kv, capacity, 1 if slots == 1 else batch, lm_head)
    progress("compiling")
    pipeline = CompilerPipeline(registry).add_pass_set(generation)
    if match_onnxruntime and any(t.dtype == DataType.FLOAT16 and t.kind in _SOURCES for t in graph.tensors):
        pipeline.add_pass(MatchOnnxruntimeCpuFloat16())  # float32 where onnxruntime's CPU EP has no f16 kernel
    compiled = pipeline.compile(graph, static)
    compiled.replanner = None  # the session's compiled dims never change, so its graph need not outlive the load
    aliased = next(p.resident for p in generation.passes if isinstance(p, ResidentKvCache))
    return compiled, (signature, static, list(aliased))


def _fixed_batch_slots(model: Path, slots: int) -> int:
    """`slots`, or 1 for a graph exported with a fixed batch of 1 (its caches hold one sequence; its shape
    constants may bake the 1 in, so the batch dim cannot be opened)."""
    import onnx

    if slots == 1:
        return 1
    graph = onnx.load(str(model), load_external_data=False).graph
    ids = next((i for i in graph.input if i.name == "input_ids"), None)
    dims = ids.type.tensor_type.shape.dim if ids is not None else []
    if dims and dims[0].HasField("dim_value") and dims[0].dim_value == 1:
        log.warning("%s was exported with a fixed batch of 1: one sequence at a time, not %d", model, slots)
        return 1
    return slots


def _max_length(model_limit: int | None, requested: int | None, where: Path) -> int:
    if requested is not None and requested <= 0:
        raise ModelLoadError(f"max_length must be positive, got {requested}")
    if requested is not None and model_limit is not None and requested > model_limit:
        raise ModelLoadError(
            f"max_length {requested} exceeds the model's limit of {model_limit} positions ({where.parent})"
        )
    return requested or min(model_limit or DEFAULT_MAX_LENGTH, DEFAULT_MAX_LENGTH)


def _static_dims(graph: IrGraph, signature: LlmSignature, config: dict[str, Any], slots: int) -> dict[str, int]:
    """Dims fixed for the whole session: batch 1 for a one-slot session (batched ones bind it per run), the head
    size, a windowed cache's capacity."""
    static: dict[str, int] = {}
    genai = config.get("genai", {}).get("model", {}).get("decoder", {})
    for dims in signature.input_dims.values():
        if slots == 1 and dims and isinstance(dims[0], SymbolicExpr) and dims[0].is_name:
            static[str(dims[0])] = 1
    for pair in signature.kv:
        head = pair.past_dims[3]
        if isinstance(head, SymbolicExpr) and head.is_name and genai.get("head_size"):
            static[str(head)] = int(genai["head_size"])
        if pair.windowed:
            window = config.get("sliding_window")
            for d in (pair.past_dims[2], pair.present_dims[2]):
                if isinstance(d, SymbolicExpr) and d.is_name and window:
                    static[str(d)] = int(window)
    return static
