"""Runs one packaged pipeline on one engine in a fresh process, as a user's program would.

`python pipeline_runner.py onnxruntime|onyxia NAME OUT.json [--runs N]`: for `onyxia`, the first
thing the process does is what the README tells a user to do before importing the package,

    import sys, onyxia.ort
    sys.modules["onnxruntime"] = onyxia.ort

so every `import onnxruntime` / `from onnxruntime import ...` inside the package gets Onyxia's
facade; the real onnxruntime is never loaded in that process (checked and reported). For
`onnxruntime` nothing of Onyxia is imported. A fresh process per pipeline and engine keeps the
packages' module-level state (speechmos' cached DNSMOS, RivaWatermark's class sessions) from leaking
between engines.

The result file holds the normalised result, the seconds of set-up (the package's constructor, where
its sessions load), of the first call and of `--runs` later calls, the number of live
InferenceSession objects of the engine's class after the calls, and the onnxruntime modules the
process loaded. `run_in_subprocess` is what the test and the report call.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ENGINES = ("onnxruntime", "onyxia")


def use_onyxia() -> None:
    """The one-line switch: Onyxia's facade answers every later `import onnxruntime`."""
    import onyxia.ort

    sys.modules["onnxruntime"] = onyxia.ort


@dataclass(frozen=True)
class Outcome:
    engine: str
    result: dict[str, Any]  # the pipeline's normalised fields
    setup_s: float
    first_s: float
    runs_s: list[float]
    sessions: int  # live InferenceSession objects of the engine's class
    ort_modules: list[str]  # real onnxruntime modules loaded (must be empty on onyxia)


def _count_sessions() -> int:
    cls = sys.modules["onnxruntime"].InferenceSession
    gc.collect()
    return sum(1 for obj in gc.get_objects() if issubclass(type(obj), cls))  # type(): weak proxies


def _real_ort_modules() -> list[str]:
    return sorted(
        name
        for name, module in sys.modules.items()
        if (name == "onnxruntime" or name.startswith("onnxruntime."))
        and "site-packages/onnxruntime" in str(getattr(module, "__file__", "") or "").replace(os.sep, "/")
    )


def run_here(engine: str, name: str, runs: int) -> Outcome:
    """The pipeline in this process; the engine must be chosen before anything imports the package."""
    if engine == "onyxia":
        use_onyxia()
    from pipelines import BY_NAME  # imports samples and the call table, not the packages

    pipeline = BY_NAME[name]
    start = time.perf_counter()
    call = pipeline.prepare()
    setup = time.perf_counter() - start
    start = time.perf_counter()
    result = call()
    first = time.perf_counter() - start
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return Outcome(
        engine, dict(pipeline.normalise(result)), setup, first, times, _count_sessions(), _real_ort_modules()
    )


def run_in_subprocess(engine: str, name: str, runs: int = 0, timeout: float = 1800.0) -> Outcome:
    """`run_here` in a fresh interpreter; its stderr is in the error when it fails."""
    with tempfile.TemporaryDirectory(prefix="pipeline_") as folder:
        out = Path(folder) / "outcome.json"
        command = [sys.executable, str(HERE / "pipeline_runner.py"), engine, name, str(out), "--runs", str(runs)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=folder, check=False)
        if done.returncode != 0 or not out.is_file():
            tail = "\n".join(done.stderr.strip().splitlines()[-25:])
            raise RuntimeError(f"{name} on {engine} exited with {done.returncode}:\n{tail}")
        return Outcome(**json.loads(out.read_text(encoding="utf-8")))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("engine", choices=ENGINES)
    parser.add_argument("name")
    parser.add_argument("out", type=Path)
    parser.add_argument("--runs", type=int, default=0, help="timed calls after the first")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))  # samples, pipelines, pipeline_calls
    outcome = run_here(args.engine, args.name, args.runs)
    args.out.write_text(json.dumps(outcome.__dict__), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
