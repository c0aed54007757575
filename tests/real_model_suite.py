"""One file of the real-model suite (tests/data/real_models/), run in Onyxia and measured.

The files and their `.npz` records come from `tools/real_models` (torchvision, optimum and a torch
TTS upsampler, seeded random weights, onnxruntime 1.32's outputs on fixed inputs). Shared by
`test_e2e_real_models.py` (correctness, readbacks) and `real_models_report.py` (docs/models/real-models.md).
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

import onyxia.compiler
import onyxia.onnx
import onyxia.operators
from onyxia.cli.commands.run import bind_dims
from onyxia.runtime import compiling_for

__all__ = [
    "DATA",
    "NOTABLE_OPS",
    "Measured",
    "assert_matches",
    "assert_same_detections",
    "error_line",
    "op_summary",
    "ort_seconds",
    "ort_timed",
    "read_record",
    "run_onyxia",
]

DATA = Path(__file__).resolve().parent / "data" / "real_models"

# Ops the docs' table names: the ones that shape data-dependent plans or control flow.
NOTABLE_OPS = ("If", "Loop", "NonZero", "NonMaxSuppression", "TopK", "Range", "Resize", "CumSum", "Attention")

# float32 outputs: |onyxia - ort| <= RTOL * |ort| + ATOL_SCALE * max|ort| per output. Measured on
# lavapipe (2026-11-25), the largest error over the suite is 4.5e-7 of its output's largest
# magnitude (whisper_decoder's logits; ResNet-18 1.0e-7, BERT 2.7e-7), while elementwise relative
# errors reach 2e-3 on values near zero: reductions (conv, matmul, softmax, layer norm) sum in
# another order than onnxruntime's MLAS kernels, so the error scales with the output, not with each
# element. The bound is 20x the largest measured; integer and bool outputs must be equal.
RTOL = 1e-5
ATOL_SCALE = 1e-5

# Detectors whose outputs are (boxes, scores, labels) in score order. Seeded random weights leave most
# scores near-equal (SSDlite: 754 distinct among 840), and float reductions in another order swap
# near-ties, so onnxruntime's own record differs from what it computes on this machine in the order of
# such ties: scores and labels compare in order, boxes as the same detections within each run of scores
# closer than SCORE_TOL.
DETECTIONS: dict[str, tuple[str, str, str]] = {"ssdlite_mobilenet_v3": ("boxes", "scores", "labels")}
SCORE_TOL = 1e-6  # scores: |onyxia - ort| within this, and runs of ties are cut at this gap
BOX_TOL = 1e-3  # box coordinates are pixels (0..160): decoded in another order of float operations


@dataclass(frozen=True)
class Measured:
    outputs: dict[str, np.ndarray]
    compile_s: float  # load_and_parse_model + CompilerPipeline.compile
    load_s: float  # Runtime.load_model: buffers, weight uploads, pipelines
    first_run_s: float  # creates the pipelines (lavapipe compiles each shader to machine code here)
    run_s: float  # median of the later runs
    readbacks_per_run: float  # staging-buffer maps (GPU -> host trips) per run
    bytes_per_run: float


def read_record(name: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The recorded inputs and onnxruntime's outputs of `<name>.npz`."""
    with np.load(DATA / f"{name}.npz") as npz:
        inputs = {k.removeprefix("input."): npz[k] for k in npz.files if k.startswith("input.")}
        outputs = {k.removeprefix("output."): npz[k] for k in npz.files if k.startswith("output.")}
    return inputs, outputs


def run_onyxia(runtime: Any, name: str, runs: int = 2) -> Measured:
    """Compile `<name>.onnx` for the recorded inputs' dims and run it `runs` times."""
    inputs, _ = read_record(name)
    t0 = time.perf_counter()
    graph = onyxia.onnx.load_and_parse_model(DATA / f"{name}.onnx")
    dims = bind_dims(graph, inputs, {})
    with compiling_for(runtime):  # the kernels `onyxia run` picks for this device
        model = onyxia.compiler.CompilerPipeline(onyxia.operators.core_operator_registry()).compile(graph, dims)
    t1 = time.perf_counter()
    executor = runtime.load_model(model)
    t2 = time.perf_counter()
    stats = executor.stats
    maps, read, done = stats.staging_maps, stats.bytes_read_back, stats.runs
    times = []
    outputs: dict[str, np.ndarray] = {}
    for _ in range(runs):
        start = time.perf_counter()
        outputs = executor.run(inputs)
        times.append(time.perf_counter() - start)
    count = stats.runs - done
    return Measured(
        outputs=outputs,
        compile_s=t1 - t0,
        load_s=t2 - t1,
        first_run_s=times[0],
        run_s=statistics.median(times[1:] or times),
        readbacks_per_run=(stats.staging_maps - maps) / count,
        bytes_per_run=(stats.bytes_read_back - read) / count,
    )


def ort_timed(path: Path, inputs: Mapping[str, np.ndarray], runs: int = 5) -> tuple[float, float]:
    """onnxruntime's CPU EP on `inputs`: session creation seconds, and the median run after one warm-up
    (also the packaged-model suite's timing)."""
    import onnxruntime as ort

    start = time.perf_counter()
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    init = time.perf_counter() - start
    session.run(None, dict(inputs))
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, dict(inputs))
        times.append(time.perf_counter() - start)
    return init, statistics.median(times)


def ort_seconds(name: str, runs: int = 5) -> tuple[float, float]:
    """`ort_timed` on a suite file and its recorded inputs."""
    inputs, _ = read_record(name)
    return ort_timed(DATA / f"{name}.onnx", inputs, runs)


def op_summary(path: Path) -> tuple[int, Counter[str]]:
    """Node count and op histogram of an ONNX file, subgraphs (If branches, Loop bodies) included."""
    ops: Counter[str] = Counter()

    def walk(graph: onnx.GraphProto) -> None:
        for node in graph.node:
            ops[node.op_type] += 1
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    walk(attr.g)

    walk(onnx.load(str(path), load_external_data=False).graph)
    return sum(ops.values()), ops


def assert_matches(name: str, got: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> float:
    """Same names, shapes and dtypes; integers and bools exact, floats within the bounds above
    (a detector's outputs as `DETECTIONS` says).

    Returns the largest float error relative to its output's largest magnitude (for the record)."""
    assert sorted(got) == sorted(expected), f"{name}: outputs {sorted(got)}, expected {sorted(expected)}"
    if name in DETECTIONS:
        assert_same_detections(got, expected, DETECTIONS[name])
        return float(np.abs(got[DETECTIONS[name][1]] - expected[DETECTIONS[name][1]]).max(initial=0.0))
    worst = 0.0
    for key, ref in expected.items():
        out = got[key]
        assert out.shape == ref.shape, f"{name}: output '{key}' has shape {out.shape}; onnxruntime's is {ref.shape}"
        assert out.dtype == ref.dtype, f"{name}: output '{key}' has dtype {out.dtype}; onnxruntime's is {ref.dtype}"
        if not np.issubdtype(ref.dtype, np.floating):
            np.testing.assert_array_equal(out, ref, err_msg=f"{name}: output '{key}'")
            continue
        scale = float(np.abs(ref).max()) if ref.size else 1.0
        np.testing.assert_allclose(out, ref, rtol=RTOL, atol=ATOL_SCALE * scale, err_msg=f"{name}: output '{key}'")
        if ref.size:
            worst = max(worst, float(np.abs(out.astype(np.float64) - ref).max()) / max(scale, 1e-30))
    return worst


def assert_same_detections(
    got: Mapping[str, np.ndarray], ref: Mapping[str, np.ndarray], names: tuple[str, str, str]
) -> None:
    """Scores within SCORE_TOL in order, labels equal, and within each run of scores closer than
    SCORE_TOL, the same (label, box) detections in some order."""
    boxes, scores, labels = names
    assert got[boxes].shape == ref[boxes].shape, f"{boxes}: {got[boxes].shape} != {ref[boxes].shape}"
    np.testing.assert_allclose(got[scores], ref[scores], rtol=0, atol=SCORE_TOL, err_msg=scores)
    ref_scores = ref[scores]
    gaps = np.flatnonzero(np.abs(np.diff(ref_scores)) > SCORE_TOL) + 1
    for start, stop in zip([0, *gaps], [*gaps, len(ref_scores)]):
        free = list(range(start, stop))
        for i in range(start, stop):
            match = [
                j
                for j in free
                if got[labels][i] == ref[labels][j] and np.allclose(got[boxes][i], ref[boxes][j], rtol=0, atol=BOX_TOL)
            ]
            assert match, (
                f"detection {i} (label {got[labels][i]}, box {got[boxes][i]}) is not in onnxruntime's run {start}:{stop}"
            )
            free.remove(match[0])


def error_line(error: Exception) -> str:
    """The first line of an error, with this checkout's data folder dropped from file paths."""
    return str(error).splitlines()[0].replace(f"{DATA}/", "")
