"""The plan cache across processes: a second process loads the plan the first one saved without parsing or
compiling (it never imports onnx), and two processes writing the same entry at once both succeed and leave
one valid entry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from conftest import save_model
from onnx import TensorProto, helper, numpy_helper

# Compiles the model without a GPU (no runtime: the default CPU-rasteriser target) and reports what the cache
# did, how long compile_cached took, and whether the onnx package (the parser) was ever imported.
_CHILD = """
import json, os, sys, time
from pathlib import Path
go = os.environ.get("PLAN_CACHE_TEST_GO")
while go and not Path(go).exists():
    time.sleep(0.005)
start = time.perf_counter()
from onyxia.cli.plan_cache import STATS, compile_cached
plan = compile_cached(Path(sys.argv[1]), {"N": 3})
elapsed = time.perf_counter() - start
print(json.dumps({"hits": STATS.hits, "misses": STATS.misses, "writes": STATS.writes, "rejected": STATS.rejected,
                  "seconds": elapsed, "parsed": "onnx" in sys.modules, "steps": plan.dispatch_count}))
"""


def _model(path: Path) -> Path:
    weight = numpy_helper.from_array(np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16), "w")
    nodes = [helper.make_node("Mul", ["x", "w"], ["t"]), helper.make_node("Relu", ["t"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])]
    return save_model(path, nodes, inputs, outputs, [weight], {"": 17})


def _env(cache: Path, go: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "ONYXIA_CACHE_DIR": str(cache), "ONYXIA_PLAN_CACHE": "1"}
    env.pop("ONYXIA_CHECK", None)
    env.pop("ONYXIA_DUMP_IR", None)
    if go is not None:
        env["PLAN_CACHE_TEST_GO"] = str(go)
    return env


def _child(model: Path, cache: Path) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(model)], env=_env(cache), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_a_second_process_skips_parse_and_compile(tmp_path: Path) -> None:
    model, cache = _model(tmp_path / "mul_relu.onnx"), tmp_path / "cache"
    first = _child(model, cache)
    second = _child(model, cache)
    assert (first["misses"], first["writes"], first["parsed"]) == (1, 1, True)
    assert (second["hits"], second["misses"], second["writes"], second["parsed"]) == (1, 0, 0, False)
    assert second["steps"] == first["steps"]
    print(f"compile_cached: first process {first['seconds']:.3f} s, second {second['seconds']:.3f} s")


def test_two_processes_writing_the_same_entry_at_once(tmp_path: Path) -> None:
    model, cache, go = _model(tmp_path / "mul_relu.onnx"), tmp_path / "cache", tmp_path / "go"
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(model)],
            env=_env(cache, go),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    time.sleep(1.0)  # both are waiting on the go file with onyxia not yet imported
    go.touch()
    results = []
    for child in children:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert [(r["misses"], r["writes"], r["rejected"]) for r in results] == [(1, 1, 0), (1, 1, 0)]
    entries = sorted(p.suffix for p in (cache / "plans").iterdir() if p.is_file())
    assert entries == [".json", ".plan"]  # one entry and its note, no temporary file left
    assert not list((cache / "plans").rglob("*.tmp"))
    third = _child(model, cache)
    assert (third["hits"], third["rejected"], third["parsed"]) == (1, 0, False)
