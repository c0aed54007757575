"""Int8 against fp32: the MiniLM-shaped BERT and its `quantize_dynamic` file, on Onyxia and on
onnxruntime's CPU EP, in one process on the same inputs (tests/data/op_models/).

Run from the repository root with the project's venv (no torch needed):
`.venv/bin/python tools/op_models/int8_speed.py [--runs 20] [--models bert,bert_dynamic_int8]`.
Prints a markdown table of median run times (after one warm-up run each, which for Onyxia also
creates the pipelines) and the int8/fp32 ratio per engine. onnxruntime keeps its default graph
optimizations, so its int8 run is its fused DynamicQuantizeMatMul / MatMulIntegerToFloat kernels, as a
user gets it.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime as ort

import onyxia.compiler
import onyxia.onnx
import onyxia.operators
from onyxia.cli.commands.run import bind_dims
from onyxia.runtime import Runtime

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "op_models"


_SHAPE: tuple[int, int] | None = None  # --shape: (batch, sequence) instead of the records' 2x16


def _inputs(name: str) -> dict[str, np.ndarray]:
    """The recorded inputs, or with --shape seeded token ids (below the vocabulary of 512), a full
    attention mask and segment 0 (the model's position table holds 64)."""
    with np.load(DATA / f"{name}.npz") as npz:
        recorded = {k.removeprefix("input."): npz[k] for k in npz.files if k.startswith("input.")}
    if _SHAPE is None:
        return recorded
    ids = np.random.default_rng(0).integers(3, 512, size=_SHAPE).astype(np.int64)
    return {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}


def _median(run: Callable[[], object], runs: int) -> float:
    run()  # warm-up: Onyxia creates its pipelines here, onnxruntime its arenas
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def onyxia_seconds(runtime: Runtime, name: str, runs: int) -> float:
    inputs = _inputs(name)
    graph = onyxia.onnx.load_and_parse_model(DATA / f"{name}.onnx")
    model = onyxia.compiler.CompilerPipeline(onyxia.operators.core_operator_registry()).compile(
        graph, bind_dims(graph, inputs, {})
    )
    executor = runtime.load_model(model)
    return _median(lambda: executor.run(inputs), runs)


def ort_seconds(name: str, runs: int) -> float:
    inputs = _inputs(name)
    session = ort.InferenceSession(str(DATA / f"{name}.onnx"), providers=["CPUExecutionProvider"])
    return _median(lambda: session.run(None, inputs), runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--models", default="bert,bert_dynamic_int8", help="fp32 file, then the int8 file")
    parser.add_argument("--shape", help="batch,sequence (sequence <= 64) instead of the recorded 2,16")
    args = parser.parse_args(argv)
    global _SHAPE
    if args.shape:
        batch, seq = (int(v) for v in args.shape.split(","))
        _SHAPE = (batch, seq)
    fp32, int8 = args.models.split(",")
    runtime = Runtime()
    rows = {
        "Onyxia": (onyxia_seconds(runtime, fp32, args.runs), onyxia_seconds(runtime, int8, args.runs)),
        "onnxruntime CPU": (ort_seconds(fp32, args.runs), ort_seconds(int8, args.runs)),
    }
    inputs = _inputs(fp32)
    shape = "x".join(str(d) for d in inputs["input_ids"].shape) if "input_ids" in inputs else "?"
    print(f"median of {args.runs} runs, input_ids {shape}, {ort.get_device()} onnxruntime {ort.__version__}\n")
    print(f"| engine | {fp32} (fp32) ms | {int8} (int8) ms | int8 / fp32 |")
    print("|---|---|---|---|")
    for engine, (a, b) in rows.items():
        print(f"| {engine} | {a * 1e3:.2f} | {b * 1e3:.2f} | {b / a:.2f} |")
    print(
        f"\nOnyxia / onnxruntime: fp32 {rows['Onyxia'][0] / rows['onnxruntime CPU'][0]:.1f}x, "
        f"int8 {rows['Onyxia'][1] / rows['onnxruntime CPU'][1]:.1f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
