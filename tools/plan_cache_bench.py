"""Cold against warm compiled-plan cache, each load in a fresh process: parse + compile vs. reading the plan.

    .venv/bin/python tools/plan_cache_bench.py [--models gemma3_270m_q4 ddddocr_ocr ...] [--repeats 2]

Cases: the 270m Gemma 3 q4 model (synthesized with `onyxia.cli.bench.synthesize`, real shapes, seeded
weights; loaded as an `LlmSession`, warm-up included) and the three largest models of the packaged suite
(tests/packaged_models: `compile_cached` at the inputs' dims, `load_model`, one run). For each, one process
with an empty plan cache (cold: parse + compile, then the entry is written) and `--repeats` processes with
the entry there (warm). Each child reports the seconds spent getting the plan (parse + compile, or the cache
lookup and read), the upload (`load_model`), the first run (LLM: the session's warm-up) and its wall time
from before the interpreter started to the first result. The driver's shader cache is whatever it is on
this machine (the cold process warms it for the rest); only the plan cache is emptied.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
PACKAGED = ("ddddocr_ocr", "ddddocr_det", "ddddocr_ocr_old")  # the three largest files of the suite

# Other work in a shared checkout edits Onyxia's code between the cold and the warm process, which changes the
# key (as it must). The children compute the code fingerprint as always (its time counts) but key on a pinned
# value, so the warm process measures a hit.
_PIN = """
from onyxia.cli.plan_cache import key as _key
_fingerprint = _key.code_fingerprint
_key.code_fingerprint = lambda: (_fingerprint(), "pinned by tools/plan_cache_bench.py")[1]
"""

_LLM_CHILD = (
    """
import json, sys, time
start = time.perf_counter()
"""
    + _PIN
    + """
from onyxia.cli.llm import loading
from onyxia.cli.llm.session import LlmSession
from onyxia.cli.plan_cache import STATS
marks, spent = {}, {"plan": 0.0}
def timed(function):
    def call(*args, **kwargs):
        t = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent["plan"] += time.perf_counter() - t
    return call
loading.plan_key, loading.cached_build = timed(loading.plan_key), timed(loading.cached_build)  # key + build
session = LlmSession.from_pretrained(sys.argv[1], "q4", 512, progress=lambda p: marks.setdefault(p, time.perf_counter()))
end = time.perf_counter()
print(json.dumps({"plan": spent["plan"], "load": marks["warming up"] - marks["uploading weights"],
                  "first": end - marks["warming up"], "hit": STATS.hits == 1, "imports": 0}))
"""
)

_MODEL_CHILD = (
    """
import json, sys, time
import numpy as np
start = time.perf_counter()
"""
    + _PIN
    + """
from pathlib import Path
from onyxia.cli.plan_cache import STATS, compile_cached
from onyxia.runtime import Runtime
runtime = Runtime()
t0 = time.perf_counter()
plan = compile_cached(Path(sys.argv[1]), json.loads(sys.argv[2]), runtime)
t1 = time.perf_counter()
executor = runtime.load_model(plan)
t2 = time.perf_counter()
inputs = dict(np.load(sys.argv[3]))
executor.run(inputs)
t3 = time.perf_counter()
print(json.dumps({"plan": t1 - t0, "load": t2 - t1, "first": t3 - t2, "hit": STATS.hits == 1, "imports": t0 - start}))
"""
)


def child(code: str, argv: list[str], cache: Path) -> dict[str, float]:
    env = {**os.environ, "ONYXIA_CACHE_DIR": str(cache), "ONYXIA_PLAN_CACHE": "1"}
    started = time.time()
    proc = subprocess.run([sys.executable, "-c", code, *argv], env=env, capture_output=True, text=True)
    wall = time.time() - started
    if proc.returncode != 0:
        raise SystemExit(f"child failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return {**result, "wall": wall}


def _key_change(cache: Path) -> str:
    notes = [json.loads(p.read_text())["key"] for p in sorted((cache / "plans").glob("*.json"))]
    if len(notes) < 2:
        return f"{len(notes)} entries"
    return ", ".join(k for k in notes[0] if notes[0][k] != notes[1].get(k)) or "no key part differs"


def packaged_case(name: str, work: Path) -> tuple[str, list[str]]:
    sys.path[:0] = [str(ROOT / "tests" / "packaged_models"), str(ROOT / "tests")]
    import packaged_table

    from onyxia.cli.commands.run import bind_dims
    from onyxia.onnx import load_and_parse_model

    models = {
        m.name: m
        for v in vars(packaged_table).values()
        if isinstance(v, (list, tuple))
        for m in v
        if isinstance(m, packaged_table.PackagedModel)
    }
    model = models[name]
    path = model.path()
    inputs = model.inputs(path)
    dims = bind_dims(load_and_parse_model(path), inputs, {})
    feed = work / f"{name}.npz"
    np.savez(feed, **inputs)
    print(f"{name}: {path} ({path.stat().st_size / 1e6:.1f} MB), dims {dims}", flush=True)
    return _MODEL_CHILD, [str(path), json.dumps(dims), str(feed)]


def gemma_case(directory: Path | None) -> tuple[str, list[str]]:
    from onyxia.cli.bench import synthesize

    found = synthesize(out_dir=directory, precisions=("q4",))
    model = found.models["q4"]
    data = sum(p.stat().st_size for p in model.parent.iterdir() if p.name.startswith(model.name))
    print(f"gemma3_270m_q4: {model} ({data / 1e6:.0f} MB with its data)", flush=True)
    return _LLM_CHILD, [str(found.model_dir("q4"))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["gemma3_270m_q4", *PACKAGED])
    parser.add_argument(
        "--gemma-dir", type=Path, default=None, help="where the synthesized 270m model is (made if missing)"
    )
    parser.add_argument("--repeats", type=int, default=2, help="warm processes per model (the median is shown)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="plan_cache_bench_"))
    rows = []
    try:
        for name in args.models:
            code, argv = gemma_case(args.gemma_dir) if name == "gemma3_270m_q4" else packaged_case(name, work)
            cache = work / f"cache-{name}"
            for _attempt in range(3):  # a warm miss: the code changed between the processes (a shared checkout)
                shutil.rmtree(cache, ignore_errors=True)
                cold = child(code, argv, cache)
                warm = [child(code, argv, cache) for _ in range(args.repeats)]
                if not cold["hit"] and all(w["hit"] for w in warm):
                    break
                print(f"  {name}: a warm process missed ({_key_change(cache)}); again", flush=True)
            else:
                raise SystemExit(f"{name}: expected a cold miss then warm hits, got {cold} / {warm}")
            entry = sum(p.stat().st_size for p in (cache / "plans").glob("*.plan"))
            med = {k: statistics.median(w[k] for w in warm) for k in ("plan", "load", "first", "wall")}
            rows.append((name, cold, med, entry))
            print(f"  cold {cold}\n  warm {med}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        "\n| model | parse+compile cold | plan from cache warm | ratio | upload cold / warm | first result "
        "cold / warm | process wall cold / warm | entry |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, cold, warm, entry in rows:
        print(
            f"| {name} | {cold['plan']:.2f} s | {warm['plan']:.3f} s | {cold['plan'] / warm['plan']:.0f}x | "
            f"{cold['load']:.2f} / {warm['load']:.2f} s | {cold['first']:.2f} / {warm['first']:.2f} s | "
            f"{cold['wall']:.1f} / {warm['wall']:.1f} s | {entry / 1e6:.1f} MB |"
        )


if __name__ == "__main__":
    main()
