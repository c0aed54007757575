"""One bench run: synthesize (or reuse) the model, measure copy bandwidth, run every engine per precision.

Engines run one after another, each in its own child process (so host peak RSS is the engine's own), on
the same model file and the same prompt ids; the document this returns is what `--json` writes. With
`batches` (`--batch`), Onyxia's batched decode is measured at each N (`batched.py`): N=1 in the onyxia
engine's own process, each larger N in one more process; the onnxruntime engines stay single-stream.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from onyxia.cli.bench.archs import arch_config
from onyxia.cli.bench.batched import stream_prompts
from onyxia.cli.bench.bound import Bandwidth, copy_bandwidth, decode_step_bytes
from onyxia.cli.bench.config import DecoderConfig
from onyxia.cli.bench.hf_files import BOS
from onyxia.cli.bench.report import ONYXIA, bound_figures, memory_figures, ratios
from onyxia.cli.bench.runners import ENGINES, run_engine
from onyxia.cli.bench.synth import default_cache_dir, synthesize
from onyxia.core import OnyxiaError

__all__ = ["BenchOptions", "prompt_ids", "run_bench"]

REPORT_VERSION = 1
_FIRST_ORDINARY_ID = 7  # after Gemma's special tokens 0-6


@dataclass(frozen=True)
class BenchOptions:
    arch: str = "gemma3"
    size: str = "full"  # "full" (the family's real shape; "270m" for gemma3 too) or "tiny"
    layout: str | None = None  # None: the family's published layout; "dynamo": torch.onnx's (`layouts.py`)
    precisions: tuple[str, ...] = ("fp32", "q4")
    engines: tuple[str, ...] = ENGINES
    prompt_tokens: int = 32
    decode_tokens: int = 64
    prefill_tokens: int = 128
    profile: bool = False
    profile_steps: int = 4
    lm_head: str = "exact"  # Onyxia's lm head precision (`onyxia.cli.llm.lm_head_precision`)
    batches: tuple[int, ...] = (1,)  # streams decoding together in Onyxia's batched runs (1 is always measured)
    timeout_s: float = 3600.0

    def config(self) -> DecoderConfig:
        return arch_config(self.arch, self.size, self.layout)


def prompt_ids(count: int, vocab_size: int) -> list[int]:
    """<bos> then a fixed spread of ordinary ids: the same prompt for every engine and every run."""
    span = vocab_size - _FIRST_ORDINARY_ID
    return [BOS] + [_FIRST_ORDINARY_ID + (7919 * i) % span for i in range(1, count)]


def run_bench(options: BenchOptions, say: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    config = options.config()
    started = time.perf_counter()
    model = synthesize(config, precisions=options.precisions)
    say(f"model: {model.directory} ({'written: ' + ', '.join(model.written) if model.written else 'cached'})")
    bandwidth, adapter = _bandwidth(say)
    if bandwidth is not None:
        say(f"copy bandwidth: {bandwidth.gbps:.2f} GB/s (read + write) on {adapter}")
    doc: dict[str, Any] = {
        "version": REPORT_VERSION,
        "settings": {k: v for k, v in asdict(options).items() if k != "timeout_s"},
        "model": {"directory": str(model.directory), "config": config.to_dict()},
        "system": _system(adapter),
        "bandwidth": None if bandwidth is None else {**asdict(bandwidth), "adapter": adapter},
        "precisions": {},
    }
    for precision in options.precisions:
        directory = model.model_dir(precision)
        doc["precisions"][precision] = _run_precision(
            options, (model.models[precision], directory), precision, bandwidth, say
        )
    doc["wall_s"] = time.perf_counter() - started
    return doc


def _run_precision(
    options: BenchOptions,
    paths: tuple[Path, Path],
    precision: str,
    bandwidth: Bandwidth | None,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """`paths`: the model file and the directory a session loads it from."""
    config, (model_path, model_dir) = options.config(), paths
    spec = {
        "model_path": str(model_path),
        "model_dir": str(model_dir),
        "head_dim": config.head_dim,  # genai graphs name the cache's last dim (kv_cache_dim)
        "precision": precision,
        "prompt_ids": prompt_ids(options.prompt_tokens, config.vocab_size),
        "prefill_ids": prompt_ids(options.prefill_tokens, config.vocab_size),
        "decode_tokens": options.decode_tokens,
        "profile": options.profile,
        "profile_steps": options.profile_steps,
        "lm_head": options.lm_head,
    }
    cache = default_cache_dir(config).parent
    batches = sorted({1, *options.batches})
    prompts = stream_prompts(
        [prompt_ids(options.prompt_tokens + i, config.vocab_size) for i in range(batches[-1])], config.vocab_size
    )
    engines: dict[str, dict[str, Any]] = {}
    for engine in options.engines:
        say(f"{precision}: running {engine}")
        engine_spec = {**spec, "stream_prompts": prompts[:1]} if engine == ONYXIA else spec
        engines[engine] = run_engine(engine, engine_spec, cache, options.timeout_s)
        say(f"{precision}: {engine} {engines[engine].get('status')}")
    part: dict[str, Any] = {"model_file": str(model_path), "engines": engines, "ratios": ratios(engines)}
    if ONYXIA in engines:
        part["batched"] = _run_batches(
            engines[ONYXIA], batches, {**spec, "stream_prompts": prompts}, cache, options, say
        )
    part["memory"] = memory_figures(engines.get(ONYXIA))
    if bandwidth is not None:
        position = options.prompt_tokens + options.decode_tokens // 2  # the decode steps' mean cache length
        step = decode_step_bytes(model_path, position, config.head_dim)
        part["bound"] = bound_figures(step, bandwidth, engines.get(ONYXIA))
    return part


def _run_batches(
    single: dict[str, Any],
    batches: list[int],
    spec: dict[str, Any],
    cache: Path,
    options: BenchOptions,
    say: Callable[[str], None],
) -> list[dict[str, Any]]:
    """One entry per N: N=1 from the onyxia engine's run (`single`), every other N from a worker of its own
    (`spec["stream_prompts"]` holds the largest N's prompts); `vs_single` is the aggregate over N=1's."""
    if single.get("status") != "ok":
        reason = f"the onyxia engine {single.get('status')}"
        return [{"streams": n, "status": "failed", "reason": reason} for n in batches]
    shared = ("ready_s", "gpu_bytes", "kv_capacity_bytes", "peak_rss_bytes")  # what a worker of its own reports
    rows = [{"status": "ok", **single.pop("batched"), **{k: single[k] for k in shared if k in single}}]
    for n in batches[1:]:
        say(f"{spec['precision']}: running onyxia with {n} streams")
        result = run_engine(
            ONYXIA, {**spec, "streams": n, "stream_prompts": spec["stream_prompts"][:n]}, cache, options.timeout_s
        )
        rows.append({k: v for k, v in result.items() if k not in ("engine", "precision")} | {"streams": n})
        say(f"{spec['precision']}: onyxia with {n} streams {result.get('status')}")
    base = rows[0]["aggregate_decode_tok_s"]
    for row in rows:
        if row.get("status") == "ok":
            row["vs_single"] = row["aggregate_decode_tok_s"] / base
    return rows


def _bandwidth(say: Callable[[str], None]) -> tuple[Bandwidth | None, str | None]:
    """Copy bandwidth on this process's adapter (released before the engines start), or None and why."""
    try:
        from onyxia.runtime import Runtime

        runtime = Runtime()
        measured = copy_bandwidth(runtime)
    except OnyxiaError as e:  # no adapter: the bound is left out, the engines still run
        say(f"copy bandwidth not measured: {type(e).__name__}: {e}")
        return None, None
    adapter = str(runtime.adapter_info.get("device") or runtime.adapter_info.get("description"))
    del runtime
    return measured, adapter


def _system(adapter: str | None) -> dict[str, Any]:
    return {
        "adapter": adapter,
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
    }
