"""Prints the real-model table: `python tests/real_models_report.py [--runs N] [--record docs/data/real_models.json]`.

Per passing file: nodes and op types (with the notable ones named), readbacks per run, compile
(parse + passes + plan) and load (buffers, weights, pipelines) time, Onyxia's median run after the
first, onnxruntime CPU's median run. `--record PATH` also writes each row into the docs' figures file,
from which the docs' table and plot are rendered.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures_record import record
from real_model_suite import DATA, NOTABLE_OPS, op_summary, ort_seconds, run_onyxia
from test_e2e_real_models import PASSING

from onyxia.runtime import Runtime

__all__ = ["main"]


def _ops(name: str) -> str:
    nodes, ops = op_summary(DATA / f"{name}.onnx")
    notable = ", ".join(f"{op}" + (f" x{ops[op]}" if ops[op] > 1 else "") for op in NOTABLE_OPS if op in ops)
    return f"{nodes} nodes, {len(ops)} op types" + (f" ({notable})" if notable else "")


def _size(name: str) -> str:
    return f"{((DATA / f'{name}.onnx').stat().st_size + (DATA / f'{name}.npz').stat().st_size) / 1e6:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--record", type=Path, help="write the rows into this docs figures file")
    args = parser.parse_args()
    rows = []
    runtime = Runtime()
    sources = {m["name"]: m for m in json.loads((DATA / "manifest.json").read_text())["models"]}
    print(
        "| model | exporter | ops | MB | readbacks / run | Onyxia compile / load / first run (s) "
        "| ORT CPU session (s) | Onyxia run (ms) | ORT CPU run (ms) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in PASSING:
        m = run_onyxia(runtime, name, runs=args.runs + 1)
        init, ort = ort_seconds(name, args.runs)
        print(
            f"| {name} | {sources[name]['exporter']} | {_ops(name)} | {_size(name)} | {m.readbacks_per_run:g} "
            f"| {m.compile_s:.2f} / {m.load_s:.2f} / {m.first_run_s:.2f} | {init:.2f} | {m.run_s * 1e3:.1f} "
            f"| {ort * 1e3:.2f} |"
        )
        rows.append(
            {
                "id": name,
                "exporter": sources[name]["exporter"],
                "ops": _ops(name),
                "mb": float(_size(name)),
                "readbacks_per_run": round(m.readbacks_per_run, 2)
                if m.readbacks_per_run % 1
                else int(m.readbacks_per_run),
                "onyxia_compile_s": round(m.compile_s, 2),
                "onyxia_load_s": round(m.load_s, 2),
                "onyxia_first_run_s": round(m.first_run_s, 2),
                "ort_cpu_session_s": round(init, 2),
                "onyxia_run_ms": round(m.run_s * 1e3, 1),
                "ort_cpu_run_ms": round(ort * 1e3, 2),
            }
        )
    if args.record:
        record(args.record, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
