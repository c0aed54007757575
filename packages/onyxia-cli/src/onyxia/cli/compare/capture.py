"""Onyxia's side: compile the model as ``onyxia run`` would, then read back the tensors that still exist.

Capture never changes the graph the compiler sees, so fusions are what they are for ``onyxia run``:
the graph is compiled unmodified (inside `compiling_for(runtime)`, with the registry's plugins), and
only afterwards is the plan asked for more. A rewrite hands the output it replaces its tensor id and
name (`onyxia.core.rewrite.rewriter`), so a name of the file that is still a plan tensor holds the
same value as the file's tensor of that name. Those tensors are added to the plan's outputs (plain
data: `CompiledModel.outputs`), which makes the executor read them back after the run like any other
output; nothing is recompiled and no dispatch changes. For that read to see each intermediate as
its producer left it, the one compile setting that differs from ``onyxia run`` is
``share_buffers=False``: liveness-based buffer sharing would let a later tensor overwrite an earlier
one's buffer, and it is decided after every rewrite (compiler/passes/planning.py), so it cannot
change a fusion. A buffer that a later node updates in place (a cache appended to) still shows its
last value, so its earlier tensors are skipped, with that reason.

A name of the file without a plan tensor gets Onyxia's value from the compiled graph when folding
computed it (a constant: compared too), and otherwise the reason it has none: the node that now
computes it is found by walking the file's graph forward from the name to the first tensor that
survives; the node producing that one in Onyxia's compiled graph is the one it was fused into.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from onyxia.cli.compare.reference import ModelNode, ReferenceRun
from onyxia.core import CompiledModel, IrGraph, OperatorRegistry, TensorDef
from onyxia.core.plan import HOST_STEPS, BufferRef, CopyBuffer, Dispatch, Step, TensorRole, WriteBuffer
from onyxia.core.settings import override

__all__ = ["Capture", "capture"]

_ON_GPU = (TensorRole.INTERMEDIATE, TensorRole.OUTPUT)


@dataclass
class Capture:
    values: dict[str, np.ndarray] = field(default_factory=dict)  # Onyxia's value of a file's tensor, by name
    folded: set[str] = field(default_factory=set)  # those computed at compile time (a folded constant)
    skipped: dict[str, str] = field(default_factory=dict)  # name -> why it has no value to compare
    plan: CompiledModel | None = None  # as compiled, without the extra outputs
    adapter: str = ""


def capture(
    graph: IrGraph,
    registry: OperatorRegistry,
    dims: Mapping[str, int],
    feeds: Mapping[str, np.ndarray],
    ref: ReferenceRun,
) -> Capture:
    from onyxia.compiler import CompilerPipeline
    from onyxia.runtime import Runtime, compiling_for

    runtime = Runtime()
    final: list[IrGraph] = []  # the graph as the last pass left it: what the plan was made from

    def keep(_run: object, work: IrGraph) -> None:
        final[:] = [work]

    pipeline = CompilerPipeline(registry).observe(keep)  # replans at run time go through it too
    with override(share_buffers=False), compiling_for(runtime):
        plan = pipeline.compile(graph, dims)
    names = _node_outputs(ref.nodes)
    result = Capture(plan=plan, adapter=_adapter_name(runtime.adapter_info))
    for _attempt in range(2):
        compiled = final[0] if final and not plan.metadata.get("deferred") else None
        result.values, result.folded, result.skipped = {}, set(), {}
        wanted = _select(plan, compiled, names, result)
        loaded = dataclasses.replace(
            plan, outputs=[*plan.outputs, *(t for t in wanted.values() if t not in plan.outputs)]
        )
        executor = runtime.load_model(loaded)
        with compiling_for(runtime):  # a variant compiled at run time targets the same adapter (and the
            outputs = executor.run(dict(feeds))  # replanner restores share_buffers=False itself)
        if executor.compiled is loaded:
            break
        # a plan deferred to an input's value (compiler/deferred.py) switched to the variant compiled for
        # it (the observer saw that compile); that variant's tensors are read back from a second run
        plan = executor.compiled
    result.plan = plan
    for name in wanted:
        if name in outputs:
            result.values[name] = outputs[name]
        else:
            result.skipped[name] = "the plan is re-planned at run time for the inputs' values; not read back"
    consumers: dict[str, list[ModelNode]] = {}
    for node in ref.nodes:
        for i in node.inputs:
            consumers.setdefault(i, []).append(node)
    planned = {t.name for t in plan.tensors.values()}
    graph_tensors = {t.name: t for t in compiled.tensors} if compiled is not None else {}
    for name in names:
        if name not in result.values and name not in result.skipped:
            result.skipped[name] = _fate(name, consumers, result, planned, compiled, graph_tensors)
    return result


def _select(plan: CompiledModel, compiled: IrGraph | None, names: list[str], result: Capture) -> dict[str, int]:
    """The plan tensors to read back (name -> id); folded values and in-place skips go into `result`."""
    by_name = {t.name: t for t in plan.tensors.values()}
    graph_tensors = {t.name: t for t in compiled.tensors} if compiled is not None else {}
    overwritten = _overwritten(plan)
    wanted: dict[str, int] = {}
    for name in names:
        tensor = by_name.get(name)
        if tensor is not None and tensor.role in _ON_GPU:
            if tensor.id in overwritten:
                result.skipped[name] = f"its buffer is updated in place later by {overwritten[tensor.id]}"
            else:
                wanted[name] = tensor.id
            continue
        known = graph_tensors.get(name)
        if known is not None and isinstance(known.value, np.ndarray) and known.value.dtype != object:
            result.values[name] = known.value
            result.folded.add(name)
    return wanted


def _node_outputs(nodes: list[ModelNode]) -> list[str]:
    """The names both engines compute (a Constant's output is the file's data)."""
    return [name for node in nodes if not node.is_constant for name in node.outputs if name]


def _fate(
    name: str,
    consumers: Mapping[str, list[ModelNode]],
    result: Capture,
    planned: set[str],
    compiled: IrGraph | None,
    graph_tensors: Mapping[str, TensorDef],
) -> str:
    """Why `name` has no value: the first surviving tensor downstream says where its computation went."""
    seen, frontier, found = {name}, [name], []
    while frontier:
        current = frontier.pop()
        for node in consumers.get(current, []):
            for out in node.outputs:
                if not out or out in seen:
                    continue
                seen.add(out)
                if out in result.values or out in planned:
                    found.append((node.index, out))
                else:
                    frontier.append(out)
    if not found:
        return "removed by the compiler: nothing computed on the GPU depends on it"
    _, survivor = min(found)
    if survivor in result.folded:
        return f"folded at compile time (into the constant '{survivor}')"
    tensor = graph_tensors.get(survivor)
    producer = compiled.tensor_producer(tensor) if compiled is not None and tensor is not None else None
    if producer is None:
        return f"fused (its work now lives in the computation of '{survivor}')"
    op = f"{producer.domain}::{producer.op_type}" if producer.domain else producer.op_type
    return f"fused into '{producer.name}' ({op})"


def _overwritten(plan: CompiledModel) -> dict[int, str]:
    """Plan tensors whose buffer a later node writes again (in-place updates) -> that node, as text."""
    owners = plan.storage_owners(groups=False)
    writers: dict[BufferRef, list[int]] = {}  # storage root -> ops writing it, in order
    direct: dict[int, int] = {}  # tensor id -> last op writing that tensor's own ref
    for index, op in enumerate(plan.operations):
        for ref in _writes(op.steps):
            if ref.tensor is None:
                continue
            root = owners.get(ref, ref)
            if index not in writers.setdefault(root, []):
                writers[root].append(index)
            direct[ref.tensor] = index
    out: dict[int, str] = {}
    for tid in plan.tensors:
        ref = BufferRef(tensor=tid)
        ops = writers.get(owners.get(ref, ref), [])
        if len(ops) > 1 and direct.get(tid, -1) != ops[-1]:
            later = plan.operations[ops[-1]]
            out[tid] = f"'{later.name}' ({later.op_type})"
    return out


def _writes(steps: list[Step]) -> list[BufferRef]:
    refs: list[BufferRef] = []
    for step in steps:
        if isinstance(step, Dispatch):
            refs += [b.buffer for b in step.bindings if not b.read_only]
        elif isinstance(step, CopyBuffer | WriteBuffer):
            refs.append(step.dst)
        elif isinstance(step, HOST_STEPS):
            refs += list(step.writes())
    return refs


def _adapter_name(info: object) -> str:
    if isinstance(info, Mapping):
        parts = [str(info[k]) for k in ("device", "backend_type") if info.get(k)]
        return " / ".join(parts) or "WebGPU adapter"
    return "WebGPU adapter"
