"""Open-dims plan against static plan, in one process, runs alternating: `python tools/open_dims_bench.py`.

An `onyxia.ort` session compiles a model once with its symbolic dims open (one plan for every image size);
this tool checks that the open plan runs as fast as a plan compiled for the feed's exact shape. For each
packaged model named (default: PP-OCRv4 det and rec, ppocr_cls, ddddocr_ocr; tests/packaged_models, fed by its
package's own pre-processing) it compiles both plans on one runtime, checks that they agree, warms both, then
times ``--rounds`` rounds of one run each, alternating which goes first, and prints the medians and their ratio:

    .venv/bin/python tools/open_dims_bench.py [MODEL ...] [--rounds 7] [--profile 8]

``--profile N`` also prints the N kernels (by shader label) whose summed GPU time differs most between the plans.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import onyxia.compiler
import onyxia.onnx
import onyxia.operators
from onyxia.cli.commands.run import bind_dims
from onyxia.core.plan_steps import Dispatch
from onyxia.runtime import Runtime, compiling_for

REPO = Path(__file__).resolve().parents[1]
DEFAULT = ("ppocrv4_det", "ppocrv4_rec", "ppocr_cls", "ddddocr_ocr")


def _timed(executor: Any, inputs: dict[str, np.ndarray]) -> float:
    start = time.perf_counter()
    executor.run(dict(inputs))
    return time.perf_counter() - start


def _kernels(plan: Any, executor: Any, inputs: dict[str, np.ndarray]) -> dict[str, float]:
    """GPU ms per shader label, the least of 3 profiled runs (a node's dispatches under its first shader's label;
    the least, as other processes sharing the CPU rasteriser only ever add time)."""
    labels = {}
    for op in plan.operations:
        shaders = [plan.shaders[s.shader_index].label for s in op.steps if isinstance(s, Dispatch)]
        labels[op.name] = shaders[0] if shaders else op.op_type
    runs: list[dict[str, float]] = []
    for _ in range(3):
        totals: dict[str, float] = {}
        for d in executor.profile_run(dict(inputs)).dispatches:
            key = labels.get(d.node, d.op_type)
            totals[key] = totals.get(key, 0.0) + d.gpu_ns / 1e6
        runs.append(totals)
    return {k: min(r.get(k, 0.0) for r in runs) for k in runs[0]}


def _differences(plans: dict[str, Any], executors: dict[str, Any], inputs: dict[str, np.ndarray], top: int) -> str:
    kernels = {name: _kernels(plans[name], executors[name], inputs) for name in plans}
    keys = sorted(kernels["open"].keys() | kernels["static"].keys())
    rows = [(kernels["open"].get(k, 0.0), kernels["static"].get(k, 0.0), k) for k in keys]
    rows.sort(key=lambda r: -abs(r[0] - r[1]))
    return "\n".join(f"    {o:8.1f} ms open {s:8.1f} ms static  {k}" for o, s, k in rows[:top])


def bench(runtime: Runtime, model: Any, rounds: int, top: int = 0) -> str:
    """One model's line: both plans' median run (ms), open / static, and the open plan's symbolic dims."""
    inputs = model.inputs(model.path())
    graph = onyxia.onnx.load_and_parse_model(model.path())
    registry = onyxia.operators.core_operator_registry()
    with compiling_for(runtime):
        open_plan = onyxia.compiler.CompilerPipeline(registry).compile(graph, {})
        static_plan = onyxia.compiler.CompilerPipeline(registry).compile(graph, bind_dims(graph, inputs, {}))
    executors = {"open": runtime.load_model(open_plan), "static": runtime.load_model(static_plan)}
    results = {name: e.run(dict(inputs)) for name, e in executors.items()}
    for out, value in results["static"].items():
        np.testing.assert_allclose(results["open"][out], value, rtol=1e-4, atol=1e-4 * float(np.abs(value).max()))
    times: dict[str, list[float]] = {name: [] for name in executors}
    for i in range(rounds):
        order = list(executors) if i % 2 == 0 else list(reversed(executors))
        for name in order:
            times[name].append(_timed(executors[name], inputs))
    open_ms, static_ms = (statistics.median(times[n]) * 1e3 for n in ("open", "static"))
    shapes = {k: list(v.shape) for k, v in inputs.items()}
    plans = {"open": open_plan, "static": static_plan}
    detail = "\n" + _differences(plans, executors, inputs, top) if top else ""
    return f"{model.name:14} {shapes}  open {open_ms:8.1f} ms  static {static_ms:8.1f} ms  ratio {open_ms / static_ms:.2f}{detail}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(DEFAULT))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="the N kernels differing most")
    args = parser.parse_args()
    sys.path[:0] = [str(REPO / "tests" / "packaged_models"), str(REPO / "tests")]
    from packaged_table import PASSING  # type: ignore[import-not-found]  # tests/packaged_models

    table = {m.name: m for m in PASSING}
    runtime = Runtime(profiling=args.profile > 0)
    for name in args.models:
        print(bench(runtime, table[name], args.rounds, args.profile), flush=True)


if __name__ == "__main__":
    main()
