"""Prints the README's pipeline table: `python tests/packaged_models/pipelines_report.py [--runs N] [names...]`.

Per row of `pipelines.PIPELINES`: the package and its installed version, the public call, whether the
result on Onyxia (the package imported after `sys.modules["onnxruntime"] = onyxia.ort`) equals the
result on onnxruntime CPU (strings and ints exactly, floats within the row's bound: the largest float
difference is printed beside it, which is what each bound in pipelines.py was set from), and the
warm time of the pipeline call on each engine: the median of `--runs` calls after the first, each
engine in its own fresh process. A row that fails on Onyxia prints the error's last line instead.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pipeline_runner import run_in_subprocess
from pipelines import PIPELINES, Pipeline, compare_fields


def _row(pipeline: Pipeline, runs: int) -> str:
    package = f"{pipeline.distribution} {importlib.metadata.version(pipeline.distribution)}"
    head = f"| {pipeline.name} | {package} | `{pipeline.call}` |"
    expected = run_in_subprocess("onnxruntime", pipeline.name, runs)
    ort_ms = statistics.median(expected.runs_s) * 1e3
    try:
        got = run_in_subprocess("onyxia", pipeline.name, runs)
    except RuntimeError as error:
        last = str(error).strip().splitlines()[-1].replace("|", "/")
        return f"{head} fails: {last[:160]} | | | {ort_ms:.1f} | |"
    problems, worst = compare_fields(pipeline, got.result, expected.result)
    if got.ort_modules:
        problems.append(f"onnxruntime was loaded: {got.ort_modules}")
    equal = "yes" if not problems else f"no: {problems[0][:120]}".replace("|", "/")
    bounds = ", ".join(f"{k} {v:g}" for k, v in pipeline.tols.items()) or "exact"
    onyxia_ms = statistics.median(got.runs_s) * 1e3
    return (
        f"{head} {equal} | {worst:.2g} ({bounds}) | {got.setup_s:.1f} + {got.first_s:.1f} "
        f"| {onyxia_ms:.1f} | {ort_ms:.1f} | {onyxia_ms / ort_ms:.1f}x |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3, help="warm calls per engine (after the first)")
    parser.add_argument("names", nargs="*", help="only these pipelines")
    args = parser.parse_args()
    print(
        "| pipeline | package | call | result equal | largest float diff (bound) "
        "| Onyxia set-up + first call (s) | Onyxia warm (ms) | ORT CPU warm (ms) | Onyxia / ORT |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for pipeline in PIPELINES:
        if not args.names or pipeline.name in args.names:
            print(_row(pipeline, max(args.runs, 1)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
