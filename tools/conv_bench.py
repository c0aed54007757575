"""Conv-heavy models, Onyxia (lavapipe) against onnxruntime's CPU EP in one process: `python tools/conv_bench.py`.

Three graphs built with onnx.helper from seeded random weights (nothing is downloaded), each shaped like a
model family whose convolutions dominate its run time:

- ``yolov8n_320``: YOLOv8n's backbone at 320 x 320: a 3 x 3 stride-2 stem, stride-2 downsamples, C2f blocks
  (1 x 1 convs, Split, 3 x 3 bottlenecks with residual Adds, Concat) and SPPF (three 5 x 5 MaxPools), every
  conv followed by SiLU as the exporter writes it (``x * Sigmoid(x)``).
- ``mobilenet_224``: MobileNetV3-like inverted residuals at 224 x 224: 1 x 1 expand, 3 x 3 depthwise (some
  stride 2), 1 x 1 project, HardSwish / Relu, residual Adds.
- ``bytecnn_1d``: a byte-level text CNN: 1-D convs over [1, C, L] (kernels 7 and 3), Relu, MaxPool, a global
  average and a Gemm classifier.

Prints per model: Onyxia's and onnxruntime's median run (after warm-up) and their ratio, plus the largest
output difference relative to onnxruntime's largest magnitude. Onyxia compiles with the built-in registry, whose
FuseConvEpilogue folds activations and residual Adds into the conv kernels (com.onyxia FusedConv); ``--unfused``
leaves them as their own ops, and ``--variant direct`` forces the first conv kernel (one invocation per output).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

import onyxia.compiler
import onyxia.onnx
import onyxia.operators
from onyxia.cli.commands.run import bind_dims
from onyxia.core import OperatorRegistry
from onyxia.core.adapter_facts import force_variants, target_adapter
from onyxia.runtime import Runtime, adapter_facts_of


class _Builder:
    """A graph under construction: nodes, initializers and fresh names."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def const(self, array: np.ndarray, stem: str = "c") -> str:
        name = self.name(stem)
        self.inits.append(onnx.numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def node(self, op: str, inputs: list[str], outputs: int = 1, **attrs: Any) -> list[str]:
        names = [self.name(op.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, names, **attrs))
        return names

    def conv(self, x: str, c_in: int, c_out: int, k: int, stride: int = 1, group: int = 1, act: str = "silu") -> str:
        fan = c_in // group * k * k
        w = self.const(self.rng.standard_normal((c_out, c_in // group, k, k)) * np.sqrt(2.0 / fan), "w")
        b = self.const(self.rng.standard_normal(c_out) * 0.1, "b")
        pad = k // 2
        (y,) = self.node("Conv", [x, w, b], kernel_shape=[k, k], strides=[stride] * 2, pads=[pad] * 4, group=group)
        return self.act(y, act)

    def act(self, y: str, act: str) -> str:
        if act == "silu":
            (s,) = self.node("Sigmoid", [y])
            return self.node("Mul", [y, s])[0]
        if act == "hardswish":
            return self.node("HardSwish", [y])[0]
        if act == "relu":
            return self.node("Relu", [y])[0]
        return y

    def model(self, x: str, shape: list[int], y: str) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes,
            "bench",
            [helper.make_tensor_value_info(x, TensorProto.FLOAT, shape)],
            [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)],
            self.inits,
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _c2f(b: _Builder, x: str, c_in: int, c_out: int, n: int) -> str:
    hidden = c_out // 2
    y = b.conv(x, c_in, 2 * hidden, 1)
    split = b.name("split")
    b.inits.append(onnx.numpy_helper.from_array(np.array([hidden, hidden], np.int64), split))
    parts = b.node("Split", [y, split], outputs=2, axis=1)
    last = parts[1]
    for _ in range(n):
        inner = b.conv(b.conv(last, hidden, hidden, 3), hidden, hidden, 3)
        last = b.node("Add", [last, inner])[0]
        parts.append(last)
    (cat,) = b.node("Concat", parts, axis=1)
    return b.conv(cat, (2 + n) * hidden, c_out, 1)


def _sppf(b: _Builder, x: str, c: int) -> str:
    y = b.conv(x, c, c // 2, 1)
    pools = [y]
    for _ in range(3):
        pools.append(b.node("MaxPool", [pools[-1]], kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2])[0])
    (cat,) = b.node("Concat", pools, axis=1)
    return b.conv(cat, 2 * c, c, 1)


def yolov8n(size: int = 320) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    b = _Builder(0)
    x = b.conv("images", 3, 16, 3, 2)
    x = b.conv(x, 16, 32, 3, 2)
    x = _c2f(b, x, 32, 32, 1)
    x = b.conv(x, 32, 64, 3, 2)
    x = _c2f(b, x, 64, 64, 2)
    x = b.conv(x, 64, 128, 3, 2)
    x = _c2f(b, x, 128, 128, 2)
    x = b.conv(x, 128, 256, 3, 2)
    x = _c2f(b, x, 256, 256, 1)
    x = _sppf(b, x, 256)
    shape = [1, 3, size, size]
    return b.model("images", shape, x), {"images": b.rng.random(shape, np.float32)}


def mobilenet(size: int = 224) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    b = _Builder(1)
    x = b.conv("input", 3, 16, 3, 2, act="hardswish")
    c = 16
    # (expand, out, kernel, stride, activation) as MobileNetV3-small's blocks
    for expand, out, k, stride, act in [
        (16, 16, 3, 2, "relu"),
        (72, 24, 3, 2, "relu"),
        (88, 24, 3, 1, "relu"),
        (96, 40, 5, 2, "hardswish"),
        (240, 40, 5, 1, "hardswish"),
        (120, 48, 5, 1, "hardswish"),
        (288, 96, 5, 2, "hardswish"),
        (576, 96, 5, 1, "hardswish"),
    ]:
        y = b.conv(x, c, expand, 1, act=act) if expand != c else x
        y = b.conv(y, expand, expand, k, stride, group=expand, act=act)
        y = b.conv(y, expand, out, 1, act="none")
        x = b.node("Add", [x, y])[0] if stride == 1 and out == c else y
        c = out
    x = b.conv(x, c, 576, 1, act="hardswish")
    shape = [1, 3, size, size]
    return b.model("input", shape, x), {"input": b.rng.random(shape, np.float32)}


def bytecnn(length: int = 1024) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    b = _Builder(2)
    x, c = "bytes", 64
    for out, k, pool in [(128, 7, 3), (128, 7, 3), (256, 3, 1), (256, 3, 1), (256, 3, 3)]:
        w = b.const(b.rng.standard_normal((out, c, k)) * np.sqrt(2.0 / (c * k)), "w")
        bias = b.const(b.rng.standard_normal(out) * 0.1, "b")
        (y,) = b.node("Conv", [x, w, bias], kernel_shape=[k], pads=[k // 2, k // 2])
        x = b.node("Relu", [y])[0]
        if pool > 1:
            x = b.node("MaxPool", [x], kernel_shape=[pool], strides=[pool])[0]
        c = out
    (g,) = b.node("GlobalAveragePool", [x])
    (f,) = b.node("Flatten", [g])
    w = b.const(b.rng.standard_normal((c, 4)) * 0.1, "fc")
    (logits,) = b.node("Gemm", [f, w])
    shape = [1, 64, length]
    return b.model("bytes", shape, logits), {"bytes": b.rng.standard_normal(shape).astype(np.float32)}


MODELS: dict[str, Callable[[], tuple[onnx.ModelProto, dict[str, np.ndarray]]]] = {
    "yolov8n_320": yolov8n,
    "mobilenet_224": mobilenet,
    "bytecnn_1d": bytecnn,
}


def _median(run: Callable[[], object], runs: int) -> tuple[float, float, object]:
    """Median wall and process CPU seconds of `runs` runs after one warm-up, and the last result. CPU time
    (every thread of this process: lavapipe's and onnxruntime's workers) is steadier than wall time on a
    machine other processes share."""
    result = run()  # warm-up (pipelines, caches)
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        result = run()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), result


def _registry(unfused: bool) -> OperatorRegistry:
    registry = onyxia.operators.core_operator_registry()
    if unfused:  # the built-in registry fuses activations and residual Adds into the conv kernels
        registry.passes = [p for p in registry.passes if p.name != "FuseConvEpilogue"]
    return registry


def bench(name: str, runs: int, runtime: Runtime, directory: Path, unfused: bool, variant: str | None) -> str:
    import onnxruntime as ort

    model, inputs = MODELS[name]()
    path = directory / f"{name}.onnx"
    onnx.save(model, path)
    graph = onyxia.onnx.load_and_parse_model(path)
    forced = force_variants({"conv": variant} if variant else {})
    with target_adapter(adapter_facts_of(runtime)), forced:  # this device's variants, as the LLM loader compiles
        compiled = onyxia.compiler.CompilerPipeline(_registry(unfused)).compile(graph, bind_dims(graph, inputs, {}))
    executor = runtime.load_model(compiled)
    ours, ours_cpu, outputs = _median(lambda: executor.run(inputs), runs)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    theirs, theirs_cpu, expected = _median(lambda: session.run(None, inputs), runs)
    got = np.asarray(next(iter(outputs.values())))  # type: ignore[attr-defined]
    want = np.asarray(expected[0])  # type: ignore[index]
    error = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
    return (
        f"| {name} | {ours * 1e3:.1f} | {theirs * 1e3:.2f} | {ours / theirs:.1f}x | {ours_cpu * 1e3:.1f} "
        f"| {theirs_cpu * 1e3:.1f} | {ours_cpu / theirs_cpu:.1f}x | {error:.1e} | {len(model.graph.node)} nodes |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", help=f"some of {list(MODELS)} (default: all)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--unfused", action="store_true", help="without FuseConvEpilogue (activations as their own ops)"
    )
    parser.add_argument("--variant", help="force a conv variant (vision/conv_variants.py): 'direct' is the old kernel")
    args = parser.parse_args()
    runtime = Runtime()
    print(
        "| model | Onyxia run (ms) | ORT CPU run (ms) | ratio | Onyxia CPU time (ms) | ORT CPU time (ms) "
        "| CPU-time ratio | max rel. error | size |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as directory:
        for name in args.models or list(MODELS):
            print(bench(name, args.runs, runtime, Path(directory), args.unfused, args.variant), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
