"""Fuzz: seeded mutants of small valid models and their feeds, each through onnxruntime and Onyxia.

Acceptance (issue 15): no crash (signal), no hang, no error that is not an `OnyxiaError`, and no
model that Onyxia accepts (loads and compiles) while onnxruntime refuses to create a session,
except the listed differences. Mutants run in batches, one subprocess each, two at a time; a batch
that dies or hangs is rerun one mutant per subprocess to name the culprit.
"""

from __future__ import annotations

import collections
import json
import os
import pickle
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

from fuzz.mutants import make_mutants

SEED, COUNT, BATCH = int(os.environ.get("FUZZ_SEED", "15")), 520, 40
BATCH_TIMEOUT_S, ONE_TIMEOUT_S = 240, 60
WORKER = Path(__file__).with_name("worker.py")

# Models Onyxia accepts although onnxruntime refuses them: label pattern -> reason (also in the README).
ACCEPTED_DIFFERENCES: dict[str, str] = {
    r": opset [1-6]$": "onnxruntime has no CPU kernel for some ops' oldest versions (LeakyRelu-1, Elu-1); "
    "the model is valid and Onyxia runs it with the op's semantics, which did not change",
}


def _run(mutants: list[dict], tmp: Path, name: str, timeout: float) -> tuple[list[dict], str | None]:
    """Results of the mutants that finished, and "crash"/"hang" if the subprocess did not."""
    batch, results = tmp / f"{name}.pkl", tmp / f"{name}.jsonl"
    batch.write_bytes(pickle.dumps(mutants))
    results.write_text("")
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    try:
        proc = subprocess.run(
            [sys.executable, str(WORKER), str(batch), str(results)], env=env, capture_output=True, timeout=timeout
        )
        failure = None if proc.returncode == 0 else ("crash" if proc.returncode < 0 else f"exit {proc.returncode}")
    except subprocess.TimeoutExpired:
        failure = "hang"
    return [json.loads(line) for line in results.read_text().splitlines()], failure


def _run_batch(mutants: list[dict], tmp: Path, index: int) -> list[dict]:
    done, failure = _run(mutants, tmp, f"batch{index}", BATCH_TIMEOUT_S)
    if failure is None:
        return done
    finished = {r["case"] for r in done}
    for mutant in (m for m in mutants if m["case"] not in finished):
        result, alone = _run([mutant], tmp, mutant["case"], ONE_TIMEOUT_S)
        done += result or [{"case": mutant["case"], "stage": alone, "failure": alone}]
    return done


def test_fuzz_models(tmp_path: Path) -> None:
    mutants = [asdict(m) for m in make_mutants(SEED, COUNT)]
    labels = {m["case"]: m["label"] for m in mutants}
    batches = [mutants[i : i + BATCH] for i in range(0, len(mutants), BATCH)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = [
            r for rs in pool.map(_run_batch, batches, [tmp_path] * len(batches), range(len(batches))) for r in rs
        ]
    assert len(results) == COUNT

    def listed(case: str) -> bool:
        return any(re.search(pattern, labels[case]) for pattern in ACCEPTED_DIFFERENCES)

    problems = collections.defaultdict(list)
    for r in results:
        where = f"{r['case']} ({labels[r['case']]})"
        if "failure" in r:
            problems[r["failure"]].append(where)
        elif "foreign" in r:
            problems["non-OnyxiaError"].append(f"{where}: at {r['stage']}: {r['foreign']} {r['where'][-1:]}")
        elif r["stage"] in ("run", "ok") and not r["ort"] and not listed(r["case"]):
            problems["accepted, onnxruntime rejects"].append(where)
    counts = collections.Counter(r.get("stage") for r in results)
    both = sum(1 for r in results if r.get("stage") in ("run", "ok") and r.get("ort"))
    ort_rejects = sum(1 for r in results if not r.get("ort", True))
    print(
        f"\nfuzz: {COUNT} mutants (seed {SEED}); onnxruntime rejected {ort_rejects}; Onyxia stopped them at "
        f"load {counts['load']}, compile {counts['compile']}, run {counts['run']}; ran {counts['ok']}; "
        f"both accepted {both}; crashes {len(problems['crash'])}, hangs {len(problems['hang'])}, "
        f"non-OnyxiaError {len(problems['non-OnyxiaError'])}, "
        f"accepted but onnxruntime rejects {len(problems['accepted, onnxruntime rejects'])}"
    )
    report = "\n".join(f"{kind}:\n  " + "\n  ".join(cases) for kind, cases in problems.items() if cases)
    assert not any(problems.values()), report
