"""Command line: build every op model into `--out` and record onnxruntime's outputs beside it.

Order: the torch exports (fp32 conv net, BERT, ViT, LSTM/GRU, STFT front end), then the quantized
and optimized files made from them, then each introduced op cut out on its own (`op_<Op>`).
Writes `<out>/<name>.onnx`, `<out>/<name>.npz` and `<out>/manifest.json` (seed, package versions,
and per file: the tool, the source, its op types, size in bytes). Pre-processed intermediates go
to `<out>/_work/` (not test data). Run from `tools/`: `python -m op_models --help`.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from real_models.oracle import ort_outputs, save_record

from .isolate import isolate, pick_nodes
from .nets import TORCH_CASES, build_case, export_torch
from .optimized import OPT_CASES, optimize
from .quantized import QUANT_CASES, quantize

__all__ = ["main"]

_PACKAGES = ["torch", "transformers", "onnx", "onnxruntime", "numpy"]


def _ops(path: Path) -> dict[str, int]:
    counts = Counter(f"{n.domain}::{n.op_type}" if n.domain else n.op_type for n in onnx.load(str(path)).graph.node)
    return dict(sorted(counts.items()))


def _record(path: Path, inputs: dict[str, np.ndarray]) -> None:
    save_record(path, inputs, ort_outputs(path, inputs))


def _build(out: Path, seed: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    base_inputs: dict[str, dict[str, np.ndarray]] = {}
    for name in TORCH_CASES:
        case = build_case(name, seed)
        export_torch(case, out / f"{name}.onnx")
        base_inputs[name] = {k: v.numpy() for k, v in case.inputs.items()}
        _record(out / f"{name}.onnx", base_inputs[name])
        rows.append({"name": name, "tool": case.exporter, "source": case.source})
    for name, quant in QUANT_CASES.items():
        quantize(quant, out / f"{quant.base}.onnx", out / f"{name}.onnx", base_inputs[quant.base], seed, out / "_work")
        base_inputs[name] = base_inputs[quant.base]
        _record(out / f"{name}.onnx", base_inputs[name])
        rows.append({"name": name, "tool": f"onnxruntime.quantization.{quant.tool}", "source": quant.base})
    for name, opt in OPT_CASES.items():
        optimize(opt, out / f"{opt.base}.onnx", out / f"{name}.onnx")
        base_inputs[name] = base_inputs[opt.base]
        _record(out / f"{name}.onnx", base_inputs[name])
        rows.append({"name": name, "tool": opt.tool, "source": opt.base})
    sources = {r["name"]: out / f"{r['name']}.onnx" for r in reversed(rows)}  # derived files first
    for name, (source, index) in pick_nodes(sources, base_inputs).items():
        feeds = isolate(sources[source], index, base_inputs[source], out / f"{name}.onnx")
        _record(out / f"{name}.onnx", feeds)
        node = onnx.load(str(sources[source])).graph.node[index].name
        rows.append({"name": name, "tool": "op_models.isolate", "source": f"{source}: node {node}"})
    return rows


def _versions() -> dict[str, str]:
    return {p: md.version(p) for p in _PACKAGES}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m op_models", description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    out: Path = args.out.resolve()
    (out / "_work").mkdir(parents=True, exist_ok=True)
    rows = _build(out, args.seed)
    for row in rows:
        path = out / f"{row['name']}.onnx"
        row["ops"] = _ops(path)
        row["bytes"] = path.stat().st_size + path.with_suffix(".npz").stat().st_size
        print(f"{row['name']:32} {row['bytes'] / 1e6:6.3f} MB  {row['tool']}")
    manifest = {"seed": args.seed, "versions": _versions(), "models": rows}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return 0
