"""What the weight products (MatMul by a weight, the groups, MatMulNBits) share when planning.

Column panels: a compile-time [K, N] weight is uploaded as panels of PANEL columns (`panel_columns`: 32 on
lavapipe, wider on GPUs, see `variants`), [ceil(N / PANEL), K, PANEL] with the columns past N zero. lavapipe runs a workgroup's invocations 8 at a time (one SIMD row, one
CPU thread), so with 4 columns per invocation a SIMD row reads 128 contiguous bytes per k and walks one panel
front to back, a linear stream. In the graph's [K, N] order it would stride N * 4 bytes per k: the same
decode-step GEMV measured 1.2-1.3x slower so. The panels replace the graph tensor on the GPU (it is not uploaded when no
step binds it), so only weights that every reader takes as panels are repacked.
"""

from __future__ import annotations

import numpy as np

from onyxia.core import BufferRef, PlanCtx, TensorValue, max_binding_bytes
from onyxia.operators.matmul.variants import panel_columns

__all__ = ["bind_panels", "panel_columns", "panels_fit"]

# ops that read a weight as panels (Gemm's B as [K, N], or [N, K] with transB, when `gemm.panel_gemm` holds)
_PANEL_READERS = frozenset({"MatMul", "MatMulGroup", "GatedMatMul", "Gemm"})


def panels_fit(ctx: PlanCtx, i: int, k: int, n: int) -> bool:
    """Whether input `i`, a [k, n] weight, can be bound as panels: its data is known at compile time, every
    node reading it takes it as a weight product's right operand (else the graph tensor would be uploaded as
    well), and the padded panels fit one storage binding."""
    tensor = ctx.input_tensor(i)
    source = tensor.initializer if tensor.initializer is not None else tensor.value
    if source is None or (isinstance(source, np.ndarray) and source.dtype == object) or k * n == 0:
        return False
    if ctx.graph.is_graph_output(tensor.id) or any(
        node.op_type not in _PANEL_READERS or index == 0 for node, index in ctx.graph.tensor_consumers(tensor.id)
    ):
        return False
    return k * _padded(n) * tensor.dtype.gpu_numpy.itemsize <= max_binding_bytes()


def bind_panels(ctx: PlanCtx, i: int, k: int, n: int, *, transposed: bool = False) -> BufferRef:
    """Input `i` (`panels_fit`) as a constant in panels, repacked lazily when the runtime uploads it;
    `transposed`: the tensor is [n, k] (Gemm's transB), panelled as its transpose."""
    tensor = ctx.input_tensor(i)
    source = tensor.initializer if tensor.initializer is not None else tensor.value
    panel = panel_columns("matmul_group")
    columns = _padded(n)

    def load() -> np.ndarray:
        data = source.numpy() if isinstance(source, TensorValue) else np.asarray(source)
        padded = np.zeros((k, columns), data.dtype)
        padded[:, :n] = data.reshape(n, k).T if transposed else data.reshape(k, n)
        if isinstance(source, TensorValue):
            source.release()  # only the panels go to the GPU; the source may be a mapped file
        return np.ascontiguousarray(padded.reshape(k, -1, panel).transpose(1, 0, 2)).reshape(-1)

    key = f"{tensor.name}:panels-{panel}" + ("-transposed" if transposed else "")
    return ctx.constant(key, TensorValue(tensor.dtype, (k * columns,), load, name=key))


def _padded(n: int) -> int:
    panel = panel_columns("matmul_group")
    return -(-n // panel) * panel
