"""Run the selected ONNX node cases through Onyxia: a per-op table, the failures, both pass rates.

    python packages/onyxia-operators/tests/conformance/report.py [--op OPNAME] [--json out.json]
                                                                 [--record docs/data/conformance.json]

The table and the failure list are the baked mode's (inputs Onyxia needs at compile time frozen into
initializers); the unbaked mode (every graph input fed at run time, as `onnx.backend.test` does) is
summarised after them, its failures grouped by cause: the op and the input it needs at compile time.

Informational: it exits 0 whatever the results; `test_conformance.py` is the gate. `--record PATH` (a full
run only) writes both pass counts and the per-op counts, dated and with this command, as the run
"node-cases" of the docs' figures file (the docs' conformance table is rendered from it).
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests dir: `oracle`, `conformance`

from conformance.expected import EXPECTED
from conformance.harness import (
    FAILED,
    PASSED,
    REJECTED,
    REJECTED_DTYPE,
    Case,
    Outcome,
    needs_constant,
    run_case,
    run_unbaked,
    selected_cases,
)

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", help="only the cases testing this op (e.g. Add)")
    parser.add_argument("--json", type=Path, help="also write every case's outcome to this file")
    parser.add_argument("--record", type=Path, help="write the pass counts into the docs' figures file (full run)")
    args = parser.parse_args(argv)
    if args.record and args.op:
        parser.error("--record needs a full run: drop --op")

    start = time.perf_counter()
    cases = selected_cases(args.op)
    results: list[tuple[Case, Outcome, float]] = []
    unbaked: dict[str, Outcome] = {}
    for case in cases:
        t0 = time.perf_counter()
        outcome = run_case(case)
        results.append((case, outcome, time.perf_counter() - t0))
        unbaked[case.name] = run_unbaked(case, outcome)
    elapsed = time.perf_counter() - start

    _print_table(results)
    _print_problems(results)
    _print_unbaked(results, unbaked)
    print(f"\n{len(results)} cases in {elapsed:.1f} s (collection included)")
    rows = [
        {
            "case": c.name,
            "op": c.op,
            "storable": c.storable,
            "status": o.status,
            "detail": o.detail,
            "baked": list(o.baked),
            "expected": EXPECTED.get(c.name),
            "unbaked_status": unbaked[c.name].status,
            "unbaked_detail": unbaked[c.name].detail,
            "seconds": round(t, 3),
        }
        for c, o, t in results
    ]
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.record:
        record(args.record, rows, shlex.join(["python", "packages/onyxia-operators/tests/conformance/report.py"]))
    return 0


def record(path: Path, rows: list[dict[str, object]], command: str) -> None:
    """Replace the run "node-cases" in `path` (docs/data/conformance.json) with these rows' counts."""
    storable = [r for r in rows if r["storable"]]
    per_op: dict[str, dict[str, int]] = defaultdict(lambda: {"storable": 0, "baked_passed": 0, "unbaked_passed": 0})
    for r in storable:
        counts = per_op[str(r["op"])]
        counts["storable"] += 1
        counts["baked_passed"] += r["status"] == PASSED
        counts["unbaked_passed"] += r["unbaked_status"] == PASSED
    entry = {
        "id": "node-cases",
        "date": datetime.date.today().isoformat(),
        "command": command,
        "machine": "lavapipe",
        "storable": len(storable),
        "baked_passed": sum(c["baked_passed"] for c in per_op.values()),
        "unbaked_passed": sum(c["unbaked_passed"] for c in per_op.values()),
        "per_op": dict(sorted(per_op.items())),
    }
    doc = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"runs": []}
    runs = [entry if r["id"] == entry["id"] else r for r in doc["runs"]]
    doc["runs"] = runs if entry in runs else [*runs, entry]
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def _print_table(results: list[tuple[Case, Outcome, float]]) -> None:
    per_op: dict[str, Counter[str]] = defaultdict(Counter)
    for case, outcome, _ in results:
        per_op[case.op][outcome.status] += 1
        per_op[case.op]["baked"] += bool(outcome.baked)
    total: Counter[str] = sum(per_op.values(), Counter())
    width = max([len(op) for op in per_op] + [5])
    header = (
        f"{'op':<{width}}  {'cases':>5}  {'passed':>6}  {'failed':>6}  {'rejected':>8}  {'(dtype)':>7}  {'baked':>5}"
    )
    print(header)
    print("-" * len(header))
    for op, counts in [*sorted(per_op.items()), ("total", total)]:
        if op == "total":
            print("-" * len(header))
        rejected = counts[REJECTED] + counts[REJECTED_DTYPE]
        cases = sum(counts[s] for s in (PASSED, FAILED, REJECTED, REJECTED_DTYPE))
        print(
            f"{op:<{width}}  {cases:>5}  {counts[PASSED]:>6}  {counts[FAILED]:>6}  {rejected:>8}  "
            f"{counts[REJECTED_DTYPE]:>7}  {counts['baked']:>5}"
        )
    print("(dtype): rejected because an input/output has no WebGPU storage type; baked: inputs made initializers")


def _print_problems(results: list[tuple[Case, Outcome, float]]) -> None:
    failed = [(c, o) for c, o, _ in results if o.status in (FAILED, REJECTED)]
    if failed:
        print(f"\nfailures and rejections ({len(failed)}):")
    for case, outcome in failed:
        reason = EXPECTED.get(case.name)
        tag = f"expected: {reason}" if reason else "NOT IN EXPECTED"
        print(f"  {case.name} [{outcome.status}]: {outcome.detail}\n      ({tag})")
    stale = [c.name for c, o, _ in results if o.status == PASSED and c.name in EXPECTED]
    for name in stale:
        print(f"  {name}: passes now; remove it from EXPECTED")


def _print_unbaked(results: list[tuple[Case, Outcome, float]], unbaked: dict[str, Outcome]) -> None:
    storable = [c for c, _, _ in results if c.storable]
    baked = sum(o.status == PASSED for c, o, _ in results if c.storable)
    fed = sum(unbaked[c.name].status == PASSED for c in storable)
    print(f"\npass rates over the {len(storable)} cases whose dtypes WebGPU can store (int4/uint4 counted):")
    for mode, passed in (("baked", baked), ("unbaked", fed)):
        rate = 100.0 * passed / len(storable) if storable else 0.0
        print(f"  {mode:<8} {passed}/{len(storable)} = {rate:.1f}%")
    causes: dict[str, list[str]] = defaultdict(list)
    for case in storable:
        outcome = unbaked[case.name]
        if outcome.status != PASSED:
            cause = needs_constant(outcome)
            causes[f"needs at compile time: {cause}" if cause else f"{outcome.status}: {outcome.detail}"].append(
                case.name
            )
    if causes:
        print(f"\nunbaked failures by cause ({sum(map(len, causes.values()))}):")
    for cause, names in sorted(causes.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print(f"  {len(names):>3}  {cause}\n       {', '.join(names)}")


if __name__ == "__main__":
    sys.exit(main())
