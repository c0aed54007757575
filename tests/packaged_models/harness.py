"""Run one packaged model in Onyxia and in onnxruntime on the same inputs, and compare them.

Shared by `test_packaged_models.py` (correctness) and `report.py` (the docs' table, docs/models/packaged.md). The model
file is located inside the installed package (see `locate`); nothing is downloaded.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from real_model_suite import (  # tests/: shared with the exporter-made suite (conftest puts it on the path)
    op_summary,
    ort_timed,
)

import onyxia.compiler
import onyxia.onnx
import onyxia.operators
from onyxia.cli.commands.run import bind_dims
from onyxia.runtime import compiling_for

__all__ = [
    "Measured",
    "assert_matches",
    "compile_and_load",
    "locate",
    "op_summary",
    "ort_run",
    "ort_timed",
    "run_onyxia",
]

# Ops the docs' table names: control flow, recurrent, resampling, data-dependent and quantized ones.
NOTABLE_OPS = (
    *("If", "Loop", "LSTM", "GRU", "Resize", "ConvTranspose", "NonZero", "TopK", "STFT", "Einsum"),
    *("ConvInteger", "DynamicQuantizeLSTM", "DynamicQuantizeLinear"),
)


def locate(package: str, resource: str) -> Path:
    """`resource` inside the installed `package`, found through its import spec.

    The spec is resolved without executing the package's `__init__` (silero-vad's and
    invisible-watermark's import torch, g2p-id's calls nltk.download), so only the file that pip
    installed is read; a missing package or file fails here, naming both.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package '{package}' is not installed (tests/packaged_models/requirements.txt)")
    path = Path(next(iter(spec.submodule_search_locations))) / resource
    if not path.is_file():
        raise FileNotFoundError(f"package '{package}' has no '{resource}' at {path}")
    return path


def version(distribution: str) -> str:
    return importlib.metadata.version(distribution)


@dataclass(frozen=True)
class Measured:
    outputs: dict[str, np.ndarray]
    compile_s: float  # load_and_parse_model + CompilerPipeline.compile
    load_s: float  # Runtime.load_model: buffers, weight uploads
    first_run_s: float  # creates the pipelines (lavapipe compiles each shader here)
    run_s: float  # median of the later runs


def compile_and_load(runtime: Any, path: Path, inputs: Mapping[str, np.ndarray]) -> tuple[Any, float, float]:
    """Onyxia's executor for `path` at the inputs' dims, with compile and load seconds."""
    t0 = time.perf_counter()
    graph = onyxia.onnx.load_and_parse_model(path)
    dims = bind_dims(graph, dict(inputs), {})
    with compiling_for(runtime):  # the kernels `onyxia run` picks for this device
        model = onyxia.compiler.CompilerPipeline(onyxia.operators.core_operator_registry()).compile(graph, dims)
    t1 = time.perf_counter()
    executor = runtime.load_model(model)
    return executor, t1 - t0, time.perf_counter() - t1


def run_onyxia(runtime: Any, path: Path, inputs: Mapping[str, np.ndarray], runs: int = 2) -> Measured:
    executor, compile_s, load_s = compile_and_load(runtime, path, inputs)
    times: list[float] = []
    outputs: dict[str, np.ndarray] = {}
    for _ in range(runs):
        start = time.perf_counter()
        outputs = executor.run(dict(inputs))
        times.append(time.perf_counter() - start)
    return Measured(outputs, compile_s, load_s, times[0], statistics.median(times[1:] or times))


def _session(path: Path) -> Any:
    import onnxruntime as ort

    ort.set_default_logger_severity(3)  # silero's op18 file warns about unused initializers on every load
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


@functools.lru_cache(maxsize=4)
def _cached_session(path: Path) -> Any:
    return _session(path)


def ort_run(path: Path, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """onnxruntime CPU's outputs by name (one session per file, kept for builders that loop)."""
    session = _cached_session(path)
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, dict(inputs)), strict=True))


def assert_matches(name: str, got: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray], tol: float) -> float:
    """Same names, shapes and dtypes; integers and bools exact; floats within `tol` of their output's
    largest magnitude (reductions sum in another order than onnxruntime's MLAS kernels, so the error
    scales with the output, not with each element).

    Returns the largest float error relative to its output's largest magnitude."""
    assert sorted(got) == sorted(expected), f"{name}: outputs {sorted(got)}, expected {sorted(expected)}"
    worst = 0.0
    for key, ref in expected.items():
        out = got[key]
        assert out.shape == ref.shape, f"{name}: output '{key}' has shape {out.shape}; onnxruntime's is {ref.shape}"
        assert out.dtype == ref.dtype, f"{name}: output '{key}' has dtype {out.dtype}; onnxruntime's is {ref.dtype}"
        if not np.issubdtype(ref.dtype, np.floating):
            np.testing.assert_array_equal(out, ref, err_msg=f"{name}: output '{key}'")
            continue
        if not ref.size:
            continue
        scale = max(float(np.abs(ref).max()), 1e-30)
        error = float(np.abs(out.astype(np.float64) - ref).max()) / scale
        assert error <= tol, f"{name}: output '{key}' differs by {error:.3g} of its largest magnitude (bound {tol:g})"
        worst = max(worst, error)
    return worst
