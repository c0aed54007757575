"""Prints the packaged-model table: `python tests/packaged_models/report.py [--runs N] [--record PATH] [names...]`.

Per passing model: the package and its installed version, nodes and op types (notable ones named),
the largest difference from onnxruntime relative to the output's largest magnitude, Onyxia's
compile + load seconds, its first run (where lavapipe compiles the shaders), its median later run,
onnxruntime CPU's median run, and the ratio of the two medians. `--record docs/data/packaged_models.json`
also writes the rows into the docs' figures file (the docs' table and plot are rendered from it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # tests/real_model_suite.py

from figures_record import record
from harness import NOTABLE_OPS, assert_matches, op_summary, ort_run, ort_timed, run_onyxia, version
from packaged_table import PASSING

from onyxia.runtime import Runtime

__all__ = ["main"]


def _ops(path: Path) -> str:
    nodes, ops = op_summary(path)
    notable = ", ".join(op + (f" x{ops[op]}" if ops[op] > 1 else "") for op in NOTABLE_OPS if op in ops)
    return f"{nodes} nodes, {len(ops)} types" + (f" ({notable})" if notable else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3, help="Onyxia runs after the first, and ORT runs")
    parser.add_argument("--record", type=Path, help="write the rows into this docs figures file")
    parser.add_argument("names", nargs="*", help="only these models")
    args = parser.parse_args()
    rows = []
    runtime = Runtime()
    print(
        "| model | domain | package | ops | max diff vs ORT | Onyxia compile + load (s) | Onyxia first run (s) "
        "| Onyxia run (ms) | ORT CPU run (ms) | Onyxia / ORT |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for model in PASSING:
        if args.names and model.name not in args.names:
            continue
        path = model.path()
        inputs = model.inputs(path)
        m = run_onyxia(runtime, path, inputs, runs=args.runs + 1)
        diff = assert_matches(model.name, m.outputs, ort_run(path, inputs), model.tol)
        _, ort = ort_timed(path, inputs, args.runs)
        print(
            f"| {model.name} | {model.domain} | {model.distribution} {version(model.distribution)} | {_ops(path)} "
            f"| {diff:.1e} | {m.compile_s + m.load_s:.2f} | {m.first_run_s:.1f} | {m.run_s * 1e3:.1f} "
            f"| {ort * 1e3:.2f} | {m.run_s / ort:.0f}x |",
            flush=True,
        )
        rows.append(
            {
                "id": model.name,
                "domain": model.domain,
                "package": f"{model.distribution} {version(model.distribution)}",
                "ops": _ops(path),
                "max_diff": float(f"{diff:.1e}"),
                "onyxia_compile_load_s": round(m.compile_s + m.load_s, 2),
                "onyxia_first_run_s": round(m.first_run_s, 1),
                "onyxia_run_ms": round(m.run_s * 1e3, 1),
                "ort_cpu_run_ms": round(ort * 1e3, 2),
            }
        )
    if args.record:
        record(args.record, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
