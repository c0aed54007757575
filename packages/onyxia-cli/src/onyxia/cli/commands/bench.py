"""`onyxia bench`: Onyxia against onnxruntime (CPU EP, WebGPU EP) on a synthetic real-shaped model of a family
(``--arch``: Gemma 3 270m, SmolLM2-360M, Qwen2.5-0.5B, Qwen3-0.6B, Phi-4-mini's width at 4 layers), laid
out as its published files (``--layout``: onnx-community for Gemma 3, the onnxruntime-genai builder's for
the others) or as ``torch.onnx.export(dynamo=True)`` writes it (``--layout dynamo``).

Same model file, same prompt, each engine in its own process: decode tok/s, prefill time, time to first
token, load+compile time, host peak RSS, GPU buffer bytes, and Onyxia / peer ratios; then the decode bound
(bytes read per step over the measured copy bandwidth) and, with ``--profile``, Onyxia's top ops by GPU
time. ``--batch N[,M...]`` also measures Onyxia's aggregate decode tok/s with N streams decoding together
(a session with N slots; onnxruntime stays single-stream). ``--json OUT`` writes everything; ``--record PATH``
puts the run into the docs' figures file (docs/data/bench.json), replacing the run of the same settings. Exit status 1 when an engine failed (an unavailable one is reported,
not a failure).
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from rich.console import Console

from onyxia.cli.arguments import positive_float, positive_int, writable_file
from onyxia.cli.console import plain, stderr_console
from onyxia.cli.files import atomic_output
from onyxia.core import InputError

__all__ = ["ENGINES", "add_parser", "run"]

NAME = "bench"
_PRECISIONS = {"fp32": ("fp32",), "q4": ("q4",), "both": ("fp32", "q4")}
ENGINES = ("onyxia", "ort-cpu", "ort-webgpu")  # = bench.runners.ENGINES; literal so the parser imports no onnx
ARCHS = ("gemma3", "llama", "qwen2", "qwen3", "phi3")  # = bench.archs.ARCHS, for the same reason
LAYOUTS = ("onnx-community", "genai", "dynamo")  # = bench.archs.LAYOUT_NAMES, for the same reason
LM_HEADS = ("exact", "fp16", "int8")  # = llm.lm_head_precision.LM_HEAD_PRECISIONS, for the same reason


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(NAME, help="benchmark against onnxruntime on a synthetic real-shaped model")
    parser.add_argument("--arch", choices=ARCHS, default="gemma3", help="model family (default gemma3)")
    parser.add_argument(
        "--size",
        choices=("full", "270m", "tiny"),
        default="full",
        help="full: the family's real shape (gemma3: 270m); tiny: for tests",
    )
    parser.add_argument(
        "--layout",
        choices=LAYOUTS,
        default=None,
        help="the exporter whose graph is synthesized (default: the family's published one, onnx-community for "
        "gemma3 and genai for the others; dynamo: torch.onnx.export(dynamo=True, opset 23), not phi3)",
    )
    parser.add_argument("--precision", choices=sorted(_PRECISIONS), default="both")
    parser.add_argument("--engines", default=",".join(ENGINES), help=f"comma list from {', '.join(ENGINES)}")
    parser.add_argument("--json", type=writable_file, default=None, metavar="OUT", help="write every figure as JSON")
    parser.add_argument(
        "--record",
        type=writable_file,
        default=None,
        metavar="PATH",
        help="add the run to the docs' figures file (docs/data/bench.json), replacing one of the same settings",
    )
    parser.add_argument("--profile", action="store_true", help="also profile Onyxia's decode step per op")
    parser.add_argument(
        "--lm-head", choices=LM_HEADS, default="exact", help="Onyxia's lm head weight precision (default exact)"
    )
    parser.add_argument(
        "--prompt-tokens", type=positive_int, default=32, help="prompt before decoding (time to first token)"
    )
    parser.add_argument("--decode-tokens", type=positive_int, default=64, help="decode steps timed")
    parser.add_argument("--prefill-tokens", type=positive_int, default=128, help="tokens of the timed prefill")
    parser.add_argument(
        "--batch",
        default="1",
        metavar="N[,M...]",
        help="Onyxia's batched decode: streams decoding together, a comma list (default 1; N=1 is always measured)",
    )
    parser.add_argument("--timeout", type=positive_float, default=3600.0, help="seconds per engine and precision")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, console: Console) -> int:
    from onyxia.cli.bench.archs import arch_config
    from onyxia.cli.bench.report import print_report
    from onyxia.cli.bench.suite import BenchOptions, run_bench

    try:
        arch_config(args.arch, args.size, args.layout)  # --size 270m of another arch, a layout the arch lacks
    except ValueError as e:
        raise InputError(str(e)) from None
    options = BenchOptions(
        arch=args.arch,
        size=args.size,
        layout=args.layout,
        precisions=_PRECISIONS[args.precision],
        engines=_engines(args.engines),
        prompt_tokens=_positive("--prompt-tokens", args.prompt_tokens),
        decode_tokens=_positive("--decode-tokens", args.decode_tokens),
        prefill_tokens=_positive("--prefill-tokens", args.prefill_tokens),
        profile=args.profile,
        lm_head=args.lm_head,
        batches=_batches(args.batch),
        timeout_s=args.timeout,
    )
    errors = stderr_console()
    doc = run_bench(options, say=lambda line: errors.print(plain(line, "dim")))
    print_report(doc, console)
    if args.json is not None:
        with atomic_output(args.json) as temporary:
            temporary.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        console.print(f"[dim]wrote {args.json}[/]")
    if args.record is not None:
        from onyxia.cli.bench.record import record_run, run_entry

        record_run(Path(args.record), run_entry(doc, shlex.join(["onyxia", *args.argv])))
        console.print(f"[dim]recorded in {args.record}[/]")
    failed = [e for part in doc["precisions"].values() for e in part["engines"].values() if e["status"] == "failed"]
    return 1 if failed else 0


def _engines(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in ENGINES]
    if unknown or not names:
        raise InputError(f"--engines: unknown {unknown or 'empty list'}; choose from {', '.join(ENGINES)}")
    return names


def _batches(text: str) -> tuple[int, ...]:
    parts = [n.strip() for n in text.split(",") if n.strip()]
    if not parts or not all(p.isdigit() and int(p) >= 1 for p in parts):
        raise InputError(f"--batch: {text!r}; expected a comma list of stream counts >= 1, e.g. 1,4,8")
    return tuple(sorted({int(p) for p in parts}))


def _positive(flag: str, value: int) -> int:
    if value < 1:
        raise InputError(f"{flag} must be at least 1, got {value}")
    return value
