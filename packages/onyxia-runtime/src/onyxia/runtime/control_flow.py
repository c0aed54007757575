"""Running `RunSubplan` steps (If, Loop): subplans on the same device, fed from the outer buffers.

Each subplan gets a child `PlanExecutor` (made on first use, kept for later runs). Its inputs are
copied from the outer plan's buffers (or the previous iteration's results) on the GPU before its
program runs; only an `If` condition, a `Loop`'s trip count and condition, and inputs the subplan
needs on the host (a Reshape target it reads as dims) are read back, each counted in the outer
executor's `ExecutorStats.value_readbacks`. Results are copied into driver-owned buffers (a child
reuses its own on the next run), then into the outer outputs once the dims they bind are committed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import wgpu

from onyxia.core.errors import DeviceError, InputError
from onyxia.core.plan import BufferRef, CompiledModel, PlanTensor, RunSubplan
from onyxia.core.symbolic import SymbolicDim, evaluate_dim
from onyxia.runtime.buffers import BufferPool
from onyxia.runtime.convert import from_gpu
from onyxia.runtime.device import DeviceContext, ExecutorStats, wgpu_boundary
from onyxia.runtime.inputs import InputBinder

__all__ = ["ChildExecutor", "DeviceTensor", "OuterExecutor", "Subplans", "feed_and_run", "run_subplan"]

_COUNTED = ("value_readbacks", "value_bytes_read_back", "staging_maps")  # a child's, added to its outer run's
_STORAGE = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST


@dataclass(frozen=True)
class DeviceTensor:
    """A tensor on the GPU: `nbytes` of `buffer` from offset 0, in the plan's GPU form (no buffer: empty)."""

    buffer: wgpu.GPUBuffer | None
    shape: tuple[int, ...]
    nbytes: int


class ChildExecutor(Protocol):
    """What the driver needs of the `PlanExecutor` that runs one subplan."""

    compiled: CompiledModel
    ctx: DeviceContext
    stats: ExecutorStats
    _pool: BufferPool
    _inputs: InputBinder
    _dims: dict[str, int]
    _symbols: set[str]

    def update_dimensions(self, dims: Mapping[str, int]) -> None: ...

    def _prepare(
        self, inputs: Mapping[str, np.ndarray], outputs: Collection[str] | None, caller: str, fed: Collection[str] = ()
    ) -> set[str]: ...

    def _execute(self, wanted: set[str]) -> dict[str, np.ndarray]: ...


class Subplans:
    """An executor's child executors, by (flat step index, plan index), each made on first use."""

    def __init__(self, make: Callable[[CompiledModel], ChildExecutor], stats: ExecutorStats) -> None:
        self._make, self._stats = make, stats
        self._children: dict[tuple[int, int], ChildExecutor] = {}

    def get(self, key: tuple[int, int], plan: CompiledModel) -> ChildExecutor:
        if key not in self._children:
            self._children[key] = self._make(plan)
        self._stats.subplan_runs += 1
        return self._children[key]


class OuterExecutor(Protocol):
    ctx: DeviceContext
    stats: ExecutorStats
    _pool: BufferPool
    _dims: dict[str, int]
    _children: Subplans


def run_subplan(outer: OuterExecutor, index: int, step: RunSubplan, bind: Callable[[dict[str, int]], None]) -> None:
    """Run `step` (flat step `index`) after the outer steps before it were submitted; `bind` commits
    the dims its results decide (keeping the outer buffers' contents)."""
    driver = _Driver(outer, index, step)
    results = driver.run_if() if step.kind == "If" else driver.run_loop()
    bound: dict[str, int] = {}
    for dims, result in zip(step.output_dims, results):
        for dim, size in zip(dims, result.shape if result is not None else ()):
            if str(dim) in step.symbols:
                bound[str(dim)] = size
    if bound:
        bind(bound)
    with wgpu_boundary(DeviceError, f"run(): copying the results of node '{step.node}' ({step.kind})"):
        encoder = outer.ctx.device.create_command_encoder()
        for ref, result in zip(step.outputs, results):
            if ref is not None and result is not None and result.nbytes:
                target = outer._pool.get(ref)
                encoder.copy_buffer_to_buffer(result.buffer, 0, target, 0, _copy_size(result.nbytes, target))
        outer.ctx.queue.submit([encoder.finish()])


class _Driver:
    def __init__(self, outer: OuterExecutor, index: int, step: RunSubplan) -> None:
        self.outer, self.index, self.step = outer, index, step

    # ----- If ----------------------------------------------------------------------------------
    def run_if(self) -> list[DeviceTensor | None]:
        step = self.step
        condition = self._known(step.condition)
        if condition is None:
            condition = int(self._read_scalar(0, "its condition"))
        branch = 0 if condition else 1
        child = self.outer._children.get((self.index, branch), step.plans[branch])
        results = self._run_child(child, branch, {}, {})
        return [self._keep(results[name]) for name in step.results[branch]]

    # ----- Loop --------------------------------------------------------------------------------
    def run_loop(self) -> list[DeviceTensor | None]:
        step, roles = self.step, self.step.loop
        assert roles is not None
        trip = self._known(step.trip_count)
        if trip is None and step.inputs[0] is not None:
            trip = int(self._read_scalar(0, "its trip count"))
        going = self._known(step.condition)
        if going is None:
            going = int(self._read_scalar(1, "its condition"))
        child = self.outer._children.get((self.index, 0), step.plans[0])
        carried: dict[str, DeviceTensor] = {}
        for k, name in enumerate(roles.carried_in):
            if name is not None:
                carried[name] = self._outer_input(2 + k)
        finals: list[DeviceTensor | None] = [self._outer_input(2 + k) for k in range(len(roles.carried_out))]
        stacks: list[list[DeviceTensor]] = [[] for _ in roles.scanned]
        iteration = 0
        while going and (trip is None or iteration < trip):
            host = {}
            if roles.iteration is not None:
                host[roles.iteration] = np.array(iteration, dtype=np.int64)
            if roles.condition_in is not None:
                host[roles.condition_in] = np.array(True)
            results = self._run_child(child, 0, host, carried)
            finals = [self._keep(results[name]) for name in roles.carried_out]
            carried = {n: f for n, f in zip(roles.carried_in, finals) if n is not None and f is not None}
            for stack, name in zip(stacks, roles.scanned):
                stack.append(self._keep(results[name]))
            if not roles.condition_passthrough:
                going = int(self._read_result(results[roles.condition_out], "its condition"))
            iteration += 1
        self.outer.stats.loop_iterations += iteration
        return [*(self._copy_outer(2 + k) if f is None else f for k, f in enumerate(finals)), *map(self._stack, stacks)]

    # ----- helpers -----------------------------------------------------------------------------
    def _known(self, dim: SymbolicDim | None) -> int | None:
        return None if dim is None else evaluate_dim(dim, self.outer._dims)

    def _outer_input(self, i: int) -> DeviceTensor:
        ref = self.step.inputs[i]
        assert ref is not None, f"node input {i} is fed"
        shape = tuple(evaluate_dim(d, self.outer._dims) for d in self.step.input_dims[i])
        tensor = self._outer_tensor(ref)
        nbytes = evaluate_dim(tensor.nbytes, self.outer._dims) if tensor is not None else 0
        return DeviceTensor(self.outer._pool.get(ref), shape, nbytes)

    def _outer_tensor(self, ref: BufferRef) -> PlanTensor | None:
        plan = getattr(self.outer, "compiled", None)
        return None if plan is None or ref.tensor is None else plan.tensors.get(ref.tensor)

    def _copy_outer(self, i: int) -> DeviceTensor:
        return self._keep(self._outer_input(i))

    def _run_child(
        self, child: ChildExecutor, plan: int, host: dict[str, np.ndarray], fed: Mapping[str, DeviceTensor]
    ) -> dict[str, DeviceTensor]:
        feeds = dict(fed)
        for i, name in self.step.feeds[plan]:
            if name not in feeds:
                feeds[name] = self._outer_input(i)
        for name in child._inputs.values.host_inputs & feeds.keys():  # a value it reads as dims: the host needs it
            tensor = feeds.pop(name)
            spec = child.compiled.tensor_by_name(name)
            host[name] = from_gpu(spec.dtype, self._read(tensor.buffer, tensor.nbytes, name), 0, tensor.shape)
        shared = {k: v for k, v in self.outer._dims.items() if k in child._symbols}  # outer dims its inputs name
        before = [getattr(child.stats, k) for k in _COUNTED]
        results = feed_and_run(child, host, feeds, self.step.node, shared)
        for key, was in zip(_COUNTED, before):  # the child's reads are this run's reads
            setattr(self.outer.stats, key, getattr(self.outer.stats, key) + getattr(child.stats, key) - was)
        return results

    def _keep(self, tensor: DeviceTensor) -> DeviceTensor:
        """A copy the child cannot overwrite on its next run."""
        ctx = self.outer.ctx
        size = max(4, -(-tensor.nbytes // 4) * 4)
        with wgpu_boundary(DeviceError, f"run(): node '{self.step.node}' keeping a result"):
            buffer = ctx.device.create_buffer(size=size, usage=_STORAGE)
            if tensor.nbytes:
                encoder = ctx.device.create_command_encoder()
                encoder.copy_buffer_to_buffer(tensor.buffer, 0, buffer, 0, _copy_size(tensor.nbytes, tensor.buffer))
                ctx.queue.submit([encoder.finish()])
        return DeviceTensor(buffer, tensor.shape, tensor.nbytes)

    def _stack(self, slices: list[DeviceTensor]) -> DeviceTensor:
        """The slices one after the other: the stacked output (a new first axis; none: only that axis, 0)."""
        if not slices:
            return DeviceTensor(None, (0,), 0)
        total = sum(s.nbytes for s in slices)
        ctx = self.outer.ctx
        with wgpu_boundary(DeviceError, f"run(): node '{self.step.node}' stacking a scan output"):
            buffer = ctx.device.create_buffer(size=max(4, -(-total // 4) * 4), usage=_STORAGE)
            encoder = ctx.device.create_command_encoder()
            offset = 0
            for s in slices:
                if s.nbytes % 4 or offset % 4:
                    raise InputError(
                        f"node '{self.step.node}': a scan output slice of {s.nbytes} bytes is not 4-byte aligned"
                    )
                if s.nbytes:
                    encoder.copy_buffer_to_buffer(s.buffer, 0, buffer, offset, s.nbytes)
                offset += s.nbytes
            ctx.queue.submit([encoder.finish()])
        return DeviceTensor(buffer, (len(slices), *slices[0].shape), total)

    def _read_scalar(self, i: int, what: str) -> int:
        tensor = self._outer_input(i)
        return self._read_result(tensor, what)

    def _read_result(self, tensor: DeviceTensor, what: str) -> int:
        raw = self._read(tensor.buffer, 4, f"{what} of node '{self.step.node}'")
        return int(np.frombuffer(raw, dtype=np.int32)[0])

    def _read(self, buffer: wgpu.GPUBuffer, nbytes: int, what: str) -> bytes:
        pool = self.outer._pool
        size = max(4, -(-nbytes // 4) * 4)
        with wgpu_boundary(DeviceError, f"run(): reading back {what}"):
            staging = pool.ensure_staging(size)
            encoder = self.outer.ctx.device.create_command_encoder()
            encoder.copy_buffer_to_buffer(buffer, 0, staging, 0, size)
            self.outer.ctx.queue.submit([encoder.finish()])
        raw = bytes(pool.read_staging(size))
        self.outer.stats.value_readbacks += 1
        self.outer.stats.value_bytes_read_back += size
        return raw[:nbytes]


def feed_and_run(
    child: ChildExecutor,
    host: Mapping[str, np.ndarray],
    fed: Mapping[str, DeviceTensor],
    node: str,
    dims: Mapping[str, int],
) -> dict[str, DeviceTensor]:
    """One run of `child` with `host` arrays uploaded and `fed` tensors copied in on the GPU, under the
    outer `dims` its input dims name (a count the outer plan read back); its outputs stay in its
    buffers until its next run."""
    moved = {k: v for k, v in dims.items() if child._dims.get(k) != v}
    if moved:
        child.update_dimensions(moved)
    specs = {s.name: s for s in child._inputs.specs}
    stand_ins = {name: np.broadcast_to(np.zeros((), specs[name].dtype.numpy), t.shape) for name, t in fed.items()}
    child._prepare({**host, **stand_ins}, [], f"node '{node}': run() of a subplan", fed=set(fed))
    with wgpu_boundary(DeviceError, f"run(): node '{node}' feeding its subplan"):
        encoder = child.ctx.device.create_command_encoder()
        for name, tensor in fed.items():
            target = child._pool.get(specs[name].ref)
            if tensor.nbytes:
                encoder.copy_buffer_to_buffer(tensor.buffer, 0, target, 0, _copy_size(tensor.nbytes, target))
        child.ctx.queue.submit([encoder.finish()])
    child._execute(set())
    results = {}
    for tid in child.compiled.outputs:
        output = child.compiled.tensors[tid]
        shape = tuple(evaluate_dim(d, child._dims) for d in output.dims)
        nbytes = evaluate_dim(output.nbytes, child._dims)
        buffer = child._pool.get(BufferRef(tensor=tid)) if nbytes else None
        results[output.name] = DeviceTensor(buffer, shape, nbytes)
    return results


def _copy_size(nbytes: int, buffer: wgpu.GPUBuffer) -> int:
    """`nbytes` rounded up to the 4 bytes a copy moves (buffers are allocated padded)."""
    return min(-(-nbytes // 4) * 4, int(buffer.size))
