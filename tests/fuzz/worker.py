"""One fuzz batch in its own process: `python worker.py BATCH.pkl RESULTS.jsonl`.

For each mutant: onnxruntime's session creation on the model bytes (accepted or not), then
Onyxia's load -> compile -> run on lavapipe. One JSON line per mutant is appended and flushed
before the next starts, so when a mutant kills the process the parent knows which ones finished.
"""

from __future__ import annotations

import json
import pickle
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

__all__ = ["run_batch"]


def _ort_accepts(model: bytes) -> bool:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4  # the rejections are expected; their log lines are noise
    try:
        ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    except Exception:
        return False
    return True


def _onyxia(model: bytes, feeds: dict[str, Any], runtime: Any, registry: Any) -> dict[str, Any]:
    """Where Onyxia stopped: "load"/"compile" rejected the model, "run" rejected the feeds, or "ok"."""
    from onyxia.compiler import CompilerPipeline
    from onyxia.core.errors import OnyxiaError
    from onyxia.onnx import load_and_parse_model

    stage = "load"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp, "model.onnx")
            path.write_bytes(model)
            graph = load_and_parse_model(path)
        stage = "compile"
        compiled = CompilerPipeline(registry).compile(graph, {"n": 2})
        executor = runtime.load_model(compiled)
        stage = "run"
        executor.run(feeds)
    except OnyxiaError as e:
        return {"stage": stage, "error": type(e).__name__, "message": str(e)[:300]}
    except Exception as e:  # the fuzz test counts these: every error should be an OnyxiaError
        tail = traceback.format_exc().strip().splitlines()[-4:]
        return {"stage": stage, "foreign": f"{type(e).__name__}: {str(e)[:300]}", "where": tail}
    return {"stage": "ok"}


def run_batch(batch: Path, results: Path) -> None:
    from onyxia.operators import core_operator_registry
    from onyxia.runtime import Runtime

    mutants = pickle.loads(batch.read_bytes())
    runtime, registry = Runtime(), core_operator_registry()
    with results.open("a") as out:
        for mutant in mutants:
            record = {"case": mutant["case"], "ort": _ort_accepts(mutant["model"])}
            record.update(_onyxia(mutant["model"], mutant["feeds"], runtime, registry))
            out.write(json.dumps(record) + "\n")
            out.flush()


if __name__ == "__main__":
    run_batch(Path(sys.argv[1]), Path(sys.argv[2]))
