"""onyxia.runtime — executes a `CompiledModel` on any WebGPU adapter through wgpu-py.

Top layer of load -> IR -> passes -> plan -> executor: it reads only the plan data of
`onyxia.core.plan` (tensors, WGSL, steps, dim expressions) and must not import onnx,
onyxia.onnx, onyxia.operators or onyxia.compiler, so a deployment can ship precompiled plans
without the compiler stack.

    runtime = Runtime()                      # ONYXIA_BACKEND=vulkan|metal|dx12|gl to pin a backend
    with compiling_for(runtime):             # this device's limits and kernel variants
        compiled = CompilerPipeline(registry).compile(graph, dims)
    executor = runtime.load_model(compiled)  # pipelines built, weights uploaded
    outputs = executor.run({"x": x})         # symbolic dims bound from input shapes

Several `Runtime`s may coexist in one process: each opens its own device (and pays its start-up), and a
plan loads on any of them, but buffers do not move between devices, so code that passes values from one
model to another (`onyxia.ort`, LLM sessions) shares one. `compiling_for(runtime)` is what ties a compile
to a device: inside it the compiler reads that device's limits (binding and buffer sizes, by which weights
are split) and its `AdapterFacts` (subgroups, f16, ...), from which the matmul and conv variant tables
pick kernels; a plan compiled outside it targets a portable default and runs anywhere, more slowly.

Shader contract: a dispatch of (x, 1, 1) workgroups above the adapter's per-dimension limit is
issued as (ceil(x / y), y, 1), so shaders compute their linear workgroup index as
``wid.x + wid.y * nwg.x`` (``nwg`` from ``@builtin(num_workgroups)``) and bounds-check it. Whole
bindings span the buffer's allocation, which can exceed the tensor after growth: shaders size
loops from dims, never from ``arrayLength``.
"""

from onyxia.runtime._version import __version__ as __version__
from onyxia.runtime.adapter import BACKENDS, Runtime, select_adapter
from onyxia.runtime.compile_target import adapter_facts_of, compiling_for, device_limits
from onyxia.runtime.device import DeviceContext, ExecutorStats
from onyxia.runtime.executor import PlanExecutor

__all__ = [
    "BACKENDS",
    "DeviceContext",
    "ExecutorStats",
    "PlanExecutor",
    "Runtime",
    "adapter_facts_of",
    "compiling_for",
    "device_limits",
    "select_adapter",
]
