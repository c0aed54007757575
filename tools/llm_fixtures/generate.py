"""Command line: regenerate the family fixtures into an output directory.

Per family: train the tokenizer, build the seeded checkpoint (under ``<out>/_work/<family>/hf``), run
the exporters into ``<out>/<family>-tiny-genai/{fp32,int4}/`` and ``<out>/<family>-tiny-optimum/``,
then record onnxruntime's greedy outputs in each directory's ``expected.json``. Versions of both
environments go to ``<out>/_work/versions.json``. Run from ``tools/``: ``python -m llm_fixtures --help``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .checkpoint import build_checkpoint
from .expected import make_prompts, write_expected
from .exporters import export_dynamo, export_genai, export_optimum
from .families import FAMILIES, Family
from .references import HfReference
from .tokenizer import save_tokenizer, train_tokenizer

__all__ = ["main"]

_MAIN_PACKAGES = ["torch", "transformers", "tokenizers", "onnxruntime", "onnxruntime-genai", "onnx", "onnx-ir"]
_OPTIMUM_PACKAGES = ["torch", "transformers", "tokenizers", "optimum", "optimum-onnx", "onnx", "onnxruntime"]
_DYNAMO_PACKAGES = ["torch", "transformers", "tokenizers", "onnxscript", "onnx-ir", "onnx", "onnxruntime"]
_EXPORTERS = ("genai", "optimum", "dynamo")


def _versions(python: str, packages: list[str]) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json, sys\n"
        "out = {}\n"
        "for p in sys.argv[1:]:\n"
        "    try: out[p] = m.version(p)\n"
        "    except m.PackageNotFoundError: out[p] = None\n"
        "print(json.dumps(out))"
    )
    res = subprocess.run([python, "-c", code, *packages], capture_output=True, text=True, check=True)
    return dict(json.loads(res.stdout))


def _check_optimum_rope(family: Family, hf_config: dict[str, Any], out: Path) -> None:
    """optimum re-saves config.json with transformers 4.57: its rope must still be the family's."""
    got = json.loads((out / "config.json").read_text())
    for key in ("rope_theta", "rope_scaling"):
        if key in hf_config and got.get(key) is not None and hf_config[key] is not None:
            want = hf_config[key]
            if key == "rope_scaling":
                got_t = got[key].get("rope_type") or got[key].get("type")
                want_t = want.get("rope_type") or want.get("type")
                if got_t != want_t:
                    raise RuntimeError(f"{out}/config.json: rope_scaling type {got_t}, expected {want_t}")
            elif float(got[key]) != float(want):
                raise RuntimeError(f"{out}/config.json: {key} {got[key]}, expected {want}")


def _family(args: argparse.Namespace, family: Family) -> list[str]:
    """Build one family end to end; returns one log line per written expected file."""
    work = args.out / "_work" / family.name
    hf_dir = work / "hf"
    hf_dir.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer(family)
    save_tokenizer(family, tok, hf_dir)
    config = build_checkpoint(family, tok, hf_dir, args.seed)
    prompts = make_prompts(family, hf_dir)
    hf = None if args.no_hf else HfReference(hf_dir)
    done = []
    if "genai" in args.exporters:
        for precision in args.precisions:
            t0 = time.time()
            out = export_genai(args.genai_python, hf_dir, args.out / f"{family.name}-tiny-genai" / precision,
                               precision, work / "cache", work / f"genai-{precision}.log")  # fmt: skip
            paths = [write_expected(family, config, out, prompts, hf, genai=not args.no_genai_reference)]
            if precision == "int4":
                paths.append(write_expected(family, config, out, prompts, hf, genai=False, accuracy_level=0))
            done += [f"{p.relative_to(args.out)} ({time.time() - t0:.0f}s)" for p in paths]
    if "optimum" in args.exporters:
        t0 = time.time()
        out = export_optimum(args.optimum_python, hf_dir, args.out / f"{family.name}-tiny-optimum",
                             work / "optimum.log")  # fmt: skip
        _check_optimum_rope(family, config, out)
        path = write_expected(family, config, out, prompts, hf, genai=False)
        done.append(f"{path.relative_to(args.out)} ({time.time() - t0:.0f}s)")
    if "dynamo" in args.exporters:
        t0 = time.time()
        out = export_dynamo(args.dynamo_python, hf_dir, args.out / f"{family.name}-tiny-dynamo", work / "dynamo.log")
        paths = [write_expected(family, config, out, prompts, hf, genai=False)]
        paths.append(write_expected(family, config, out, prompts, hf, genai=False, model_file="model_no_cache.onnx",
                                    name="expected_no_cache.json"))  # fmt: skip
        done += [f"{p.relative_to(args.out)} ({time.time() - t0:.0f}s)" for p in paths]
    return done


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="llm_fixtures", description=__doc__)
    p.add_argument("--out", type=Path, required=True, help="output directory (created)")
    p.add_argument("--families", default=",".join(FAMILIES), help=f"comma list of {', '.join(FAMILIES)}")
    p.add_argument("--exporters", default="genai,optimum", help=f"comma list of {', '.join(_EXPORTERS)}")
    p.add_argument("--precisions", default="fp32,int4", help="genai builder precisions (-p)")
    p.add_argument("--genai-python", default=sys.executable, help="python of the requirements.txt venv")
    p.add_argument("--optimum-python", help="python of the requirements-optimum.txt venv (needed for optimum)")
    p.add_argument("--dynamo-python", default=sys.executable, help="python of the requirements-dynamo.txt venv")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-hf", action="store_true", help="skip the transformers comparison")
    p.add_argument("--no-genai-reference", action="store_true", help="skip onnxruntime-genai's Generator")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    args.exporters = [e for e in args.exporters.split(",") if e]
    args.precisions = [p for p in args.precisions.split(",") if p]
    families = [f for f in args.families.split(",") if f]
    unknown = [f for f in families if f not in FAMILIES] + [e for e in args.exporters if e not in _EXPORTERS]
    if unknown:
        raise SystemExit(f"unknown families/exporters {unknown}; families: {list(FAMILIES)}, exporters: {_EXPORTERS}")
    if "optimum" in args.exporters and not args.optimum_python:
        raise SystemExit("--optimum-python is required for the optimum exporter (a venv from requirements-optimum.txt)")
    (args.out / "_work").mkdir(parents=True, exist_ok=True)
    versions = {"main": _versions(args.genai_python, _MAIN_PACKAGES), "python": sys.version.split()[0]}
    if "dynamo" in args.exporters:
        versions["dynamo"] = _versions(args.dynamo_python, _DYNAMO_PACKAGES)
    if args.optimum_python:
        versions["optimum"] = _versions(args.optimum_python, _OPTIMUM_PACKAGES)
    (args.out / "_work" / "versions.json").write_text(json.dumps(versions, indent=2) + "\n")
    start = time.time()
    for name in families:
        t0 = time.time()
        for line in _family(args, FAMILIES[name]):
            print(f"  {line}", flush=True)
        print(f"{name}: done in {time.time() - t0:.0f}s", flush=True)
    print(f"all done in {time.time() - start:.0f}s; versions in {args.out / '_work' / 'versions.json'}")
    return 0
