"""Command line: export every real model into `--out` and record onnxruntime's outputs beside it.

Writes `<out>/<name>.onnx` and `<out>/<name>.npz` per model file, and `<out>/manifest.json` (seed,
package versions, and per file: the exporter, the source, size in bytes). Checkpoints and exporter
logs go to `<out>/_work/` (not test data). Run from `tools/`: `python -m real_models --help`.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from .hf_models import HF_CASES, build_checkpoint, export_optimum
from .oracle import make_inputs, ort_outputs, save_record
from .torch_models import TORCH_CASES, export_torch, torch_cases

__all__ = ["main"]

_PACKAGES = ["torch", "torchvision", "transformers", "optimum", "optimum-onnx", "onnx", "onnxscript", "onnxruntime"]
# optimum's file -> the suite's file name, in the order the decoder chain needs them
_WHISPER_FILES = {
    "encoder_model.onnx": "whisper_encoder",
    "decoder_model.onnx": "whisper_decoder",
    "decoder_with_past_model.onnx": "whisper_decoder_with_past",
    "decoder_model_merged.onnx": "whisper_decoder_merged",
}


def _torch(names: list[str], seed: int, out: Path) -> list[dict[str, Any]]:
    cases = torch_cases(seed)
    rows = []
    for name in names:
        case = cases[name]
        path = out / f"{name}.onnx"
        export_torch(case, path)
        inputs = {k: v.numpy() for k, v in case.inputs.items()}
        save_record(path, inputs, ort_outputs(path, inputs))
        exporter = (
            "torch.onnx.export (dynamo)" if case.dynamo else f"torch.onnx.export (TorchScript, opset {case.opset})"
        )
        rows.append({"name": name, "exporter": exporter, "source": type(case.module).__name__})
    return rows


def _hf_simple(name: str, path: Path, seed: int) -> dict[str, Any]:
    inputs = make_inputs(path, seed)
    save_record(path, inputs, ort_outputs(path, inputs))
    return {"name": name, "exporter": "optimum-cli export onnx", "source": HF_CASES[name].model_class}


def _whisper(exported: Path, seed: int, out: Path) -> list[dict[str, Any]]:
    """Encoder, then the decoder's first step (4 tokens), then one step with its past, both ways."""
    for src, dst in _WHISPER_FILES.items():
        if (exported / src).exists():
            shutil.copy(exported / src, out / f"{dst}.onnx")
    enc_path = out / "whisper_encoder.onnx"
    enc_in = make_inputs(enc_path, seed, overrides={"batch_size": 1})
    enc_out = ort_outputs(enc_path, enc_in)
    save_record(enc_path, enc_in, enc_out)
    hidden = {"encoder_hidden_states": enc_out["last_hidden_state"]}
    dec_path = out / "whisper_decoder.onnx"
    dec_in = make_inputs(dec_path, seed + 1, hidden, overrides={"batch_size": 1})
    dec_out = ort_outputs(dec_path, dec_in)
    save_record(dec_path, dec_in, dec_out)
    past = {k.replace("present", "past_key_values"): v for k, v in dec_out.items() if k.startswith("present")}
    step = {"input_ids": np.array([[int(dec_out["logits"][0, -1].argmax())]], dtype=np.int64)}
    rows = []
    for name, extra in (("whisper_decoder_with_past", {}), ("whisper_decoder_merged", {"use_cache_branch": True})):
        path = out / f"{name}.onnx"
        if not path.exists():
            continue
        given = hidden | past | step | {k: np.array([v]) for k, v in extra.items()}
        inputs = make_inputs(path, seed + 2, given, overrides={"batch_size": 1})
        save_record(path, inputs, ort_outputs(path, inputs))
        rows.append(name)
    rows = ["whisper_encoder", "whisper_decoder", *rows]
    return [{"name": n, "exporter": "optimum-cli export onnx", "source": HF_CASES["whisper"].model_class} for n in rows]


def _hf(names: list[str], seed: int, out: Path, work: Path) -> list[dict[str, Any]]:
    rows = []
    for name in names:
        case = HF_CASES[name]
        checkpoint = build_checkpoint(case, seed, work / name / "hf")
        exported = work / name / "onnx"
        export_optimum(case, checkpoint, exported, work / name / "optimum.log")
        if name == "whisper":
            rows += _whisper(exported, seed, out)
        else:
            shutil.copy(exported / "model.onnx", out / f"{name}.onnx")
            rows.append(_hf_simple(name, out / f"{name}.onnx", seed))
    return rows


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for p in _PACKAGES:
        try:
            out[p] = md.version(p)
        except md.PackageNotFoundError:
            out[p] = None
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m real_models", description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--models", default=",".join([*TORCH_CASES, *HF_CASES]), help="comma-separated subset")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    names = args.models.split(",")
    unknown = sorted(set(names) - set(TORCH_CASES) - set(HF_CASES))
    if unknown:
        parser.error(f"unknown models {unknown}; known: {[*TORCH_CASES, *HF_CASES]}")
    out: Path = args.out
    work = out / "_work"
    work.mkdir(parents=True, exist_ok=True)
    rows = _torch([n for n in names if n in TORCH_CASES], args.seed, out)
    rows += _hf([n for n in names if n in HF_CASES], args.seed, out, work)
    for row in rows:
        row["bytes"] = (out / f"{row['name']}.onnx").stat().st_size + (out / f"{row['name']}.npz").stat().st_size
        print(f"{row['name']:28} {row['bytes'] / 1e6:6.2f} MB  {row['exporter']}")
    manifest = {"seed": args.seed, "versions": _versions(), "models": rows}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return 0
