"""Prints the pipeline table: `python tests/packaged_models/pipelines_report.py [--runs N] [--record PATH] [names...]`.

Per row of `pipelines.PIPELINES`: the package and its installed version, the public call, whether the
result on Onyxia (the package imported after `sys.modules["onnxruntime"] = onyxia.ort`) equals the
result on onnxruntime CPU (strings and ints exactly, floats within the row's bound: the largest float
difference is printed beside it, which is what each bound in pipelines.py was set from), and the
warm time of the pipeline call on each engine: the median of `--runs` calls after the first, each
engine in its own fresh process. A row that fails on Onyxia prints the error's last line instead.
`--record docs/data/pipelines.json` also writes the rows into the docs' figures file.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # tests/figures_record.py

from figures_record import record
from pipeline_runner import run_in_subprocess
from pipelines import PIPELINES, Pipeline, compare_fields


def _measure(pipeline: Pipeline, runs: int) -> dict[str, Any]:
    """The row's figures, as the docs' figures file keeps them (`error` instead of timings when Onyxia fails)."""
    row: dict[str, Any] = {
        "id": pipeline.name,
        "package": f"{pipeline.distribution} {importlib.metadata.version(pipeline.distribution)}",
        "call": pipeline.call,
    }
    expected = run_in_subprocess("onnxruntime", pipeline.name, runs)
    row["ort_cpu_warm_ms"] = round(statistics.median(expected.runs_s) * 1e3, 1)
    try:
        got = run_in_subprocess("onyxia", pipeline.name, runs)
    except RuntimeError as error:
        return {**row, "equal": False, "error": str(error).strip().splitlines()[-1][:160]}
    problems, worst = compare_fields(pipeline, got.result, expected.result)
    if got.ort_modules:
        problems.append(f"onnxruntime was loaded: {got.ort_modules}")
    bounds = ", ".join(f"{k} {v:g}" for k, v in pipeline.tols.items()) or "exact"
    row.update(equal=not problems, largest_float_diff=f"{worst:.2g} ({bounds})")
    if problems:
        row["problem"] = problems[0][:120]
    row.update(onyxia_setup_s=round(got.setup_s, 1), onyxia_first_call_s=round(got.first_s, 1))
    row["onyxia_warm_ms"] = round(statistics.median(got.runs_s) * 1e3, 1)
    return row


def _line(row: dict[str, Any]) -> str:
    head = f"| {row['id']} | {row['package']} | `{row['call']}` |"
    if "error" in row:
        return f"{head} fails: {row['error'].replace('|', '/')} | | | {row['ort_cpu_warm_ms']} | |"
    equal = "yes" if row["equal"] else f"no: {row['problem']}".replace("|", "/")
    return (
        f"{head} {equal} | {row['largest_float_diff']} | {row['onyxia_setup_s']} + {row['onyxia_first_call_s']} "
        f"| {row['onyxia_warm_ms']} | {row['ort_cpu_warm_ms']} | {row['onyxia_warm_ms'] / row['ort_cpu_warm_ms']:.1f}x |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3, help="warm calls per engine (after the first)")
    parser.add_argument("--record", type=Path, help="write the rows into this docs figures file")
    parser.add_argument("names", nargs="*", help="only these pipelines")
    args = parser.parse_args()
    rows = []
    print(
        "| pipeline | package | call | result equal | largest float diff (bound) "
        "| Onyxia set-up + first call (s) | Onyxia warm (ms) | ORT CPU warm (ms) | Onyxia / ORT |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for pipeline in PIPELINES:
        if not args.names or pipeline.name in args.names:
            rows.append(_measure(pipeline, max(args.runs, 1)))
            print(_line(rows[-1]), flush=True)
    if args.record:
        record(args.record, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
