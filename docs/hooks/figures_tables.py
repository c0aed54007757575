"""The measured figures in docs/data/*.json, rendered as Markdown: tables and single figures.

One source: each JSON file is written by the tool that measures it (`--record PATH`; the file's "about"
names the command) and holds one entry per run, each with its id, date, command and machine. The docs
hook (`figures.py`) and the README's table (`figures_readme.py`) render from here only, so a re-measurement changes every
page, plot and the README's table at once. A marker naming a missing run or figure raises `KeyError`, which
fails the strict docs build instead of printing a stale or empty cell.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["DATA", "figure", "load", "render_table", "run", "TABLES"]

DATA = Path(__file__).resolve().parent.parent / "data"
Data = dict[str, dict[str, Any]]
ENGINE_NAMES = {"onyxia": "Onyxia", "ort-cpu": "ORT CPU", "ort-webgpu": "ORT WebGPU"}
FAMILY_RUNS = (  # the bench runs the families table and plot show, newest measurement of each family's default layout
    "gemma3-270m-onnx-community-both-p32",
    "llama-full-genai-both-p32",
    "qwen2-full-genai-both-p32",
    "qwen3-full-genai-both-p32",
    "phi3-full-genai-both-p32",
)


def load(folder: Path = DATA) -> Data:
    """Every dataset by file stem: {"bench": {"about": ..., "runs": [...]}, ...}."""
    return {path.stem: json.loads(path.read_text(encoding="utf-8")) for path in sorted(folder.glob("*.json"))}


def run(data: Data, dataset: str, run_id: str) -> dict[str, Any]:
    for entry in data[dataset]["runs"]:
        if entry["id"] == run_id:
            return dict(entry)
    raise KeyError(f"docs/data/{dataset}.json has no run {run_id!r}")


def figure(data: Data, key: str) -> str:
    """`dataset/run-id/dotted.path` (a recorded value) or `summary/name` (derived from several runs)."""
    dataset, rest = key.split("/", 1)
    if dataset == "summary":
        return _fmt(SUMMARIES[rest](data))
    run_id, _, path = rest.partition("/")
    value: Any = run(data, dataset, run_id)
    for part in path.split("."):
        value = value[part]
    return _fmt(value)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.1f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else "-"


def _cell(engine: dict[str, Any], key: str) -> str:
    if engine.get("status") == "failed":
        return "failed"
    value = engine.get(key)
    return "-" if value is None else _fmt(value)


def _table(header: list[str], rows: list[list[str]], source: str) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + f"\n\n{source}\n"


def _source(entries: list[dict[str, Any]]) -> str:
    """The dates and commands of the runs a table shows, once each."""
    seen = dict.fromkeys((e["date"], e["command"], e.get("machine", "")) for e in entries)
    parts = [f"{date}, `{command}`" + (f" ({machine})" if machine else "") for date, command, machine in seen]
    return "Measured " + "; ".join(parts) + "."


def _bench_rows(entry: dict[str, Any], label: Callable[[str], str]) -> list[list[str]]:
    rows = []
    for precision, part in entry["precisions"].items():
        e = part["engines"]
        on, cpu, web = e.get("onyxia", {}), e.get("ort-cpu", {}), e.get("ort-webgpu", {})
        prefill = " / ".join(_cell(x, "prefill_s") for x in (on, cpu, web))
        bound = f"{part['percent_of_bound']}%" if "percent_of_bound" in part else "-"
        decode = [_cell(x, "decode_tok_s") for x in (on, cpu, web)]
        ratios = [_ratio(on.get("decode_tok_s"), peer.get("decode_tok_s")) for peer in (cpu, web)]
        dispatches, ids = str(part.get("dispatches_per_layer", "-")), part.get("greedy_ids_equal_ort_cpu", "-")
        extra = [f"{part['dispatches_per_step']} per step"] if "dispatches_per_step" in part else []
        extra += [part["dispatches_note"]] if "dispatches_note" in part else []
        dispatches += f" ({'; '.join(extra)})" if extra else ""
        rows.append([label(precision), *decode, *ratios, prefill, dispatches, bound, ids])
    return rows


_BENCH_HEADER = ["Onyxia decode tok/s", "ORT CPU", "ORT WebGPU", "Onyxia / CPU", "Onyxia / WebGPU"]
_BENCH_TAIL = [
    "prefill 128 (s) Onyxia / CPU / WebGPU",
    "dispatches per decode layer",
    "decode vs bound",
    "greedy ids = CPU",
]


def bench_run(data: Data, run_id: str) -> str:
    entry = run(data, "bench", run_id)
    notes = [f"{n}: {e['measured']['note']} (`{e['measured']['command']}`)" for n, e in _engines_measured(entry)]
    notes += [entry["note"]] if "note" in entry else []
    source = _source([entry]) + "".join(f" {note}." for note in dict.fromkeys(notes))
    return _table(["precision", *_BENCH_HEADER, *_BENCH_TAIL], _bench_rows(entry, str), source)


def _engines_measured(entry: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (ENGINE_NAMES[n], e) for p in entry["precisions"].values() for n, e in p["engines"].items() if "measured" in e
    ]


def bench_families(data: Data) -> str:
    entries = [run(data, "bench", i) for i in FAMILY_RUNS]
    rows = [row for e in entries for row in _bench_rows(e, f"{e['family']} {{}}".format)]
    return _table(["model", *_BENCH_HEADER, *_BENCH_TAIL], rows, _source(entries))


def bench_layouts(data: Data) -> str:
    """Onyxia's fp32 decode per family in the genai and the dynamo layout (runs `<arch>-full-<layout>-fp32-p32`)."""
    rows, entries = [], []
    for arch in dict.fromkeys(e["arch"] for e in data["bench"]["runs"] if e["layout"] == "dynamo"):
        pair = [run(data, "bench", f"{arch}-full-{layout}-fp32-p32") for layout in ("genai", "dynamo")]
        entries += pair
        g, d = (e["precisions"]["fp32"] for e in pair)
        go, do = g["engines"]["onyxia"], d["engines"]["onyxia"]
        steps = " / ".join(f"{o['dispatches_per_step']} ({p['dispatches_per_layer']})" for o, p in ((go, g), (do, d)))
        gpu = [f"{e['gpu_ms_lm_head']} / {e['gpu_ms_layers']}" for e in (go, do)]
        rows.append(
            [
                pair[0]["family"],
                _fmt(go["decode_tok_s"]),
                _fmt(do["decode_tok_s"]),
                _ratio(do["decode_tok_s"], go["decode_tok_s"]),
                steps,
                *gpu,
            ]
        )
    header = ["fp32, Onyxia decode tok/s", "genai", "dynamo", "dynamo / genai"]
    header += ["dispatches per step (per layer) genai / dynamo"]
    return _table([*header, "GPU ms per step, lm head / layers: genai", "dynamo"], rows, _source(entries))


def gpu(data: Data) -> str:
    """Every run on a lent GPU (docs/data/gpu.json): decode alone and batched, prefill, first token, bound."""
    rows, entries = [], data["gpu"]["runs"]
    for e in entries:
        for precision, part in e["precisions"].items():
            on, cpu = part["engines"]["onyxia"], part["engines"]["ort-cpu"]
            batched, many = part.get("batched_decode_tok_s", {}), "-"
            if batched:
                top = max(batched, key=int)
                many = f"{_fmt(batched[top])} ({top} streams, {_ratio(batched[top], batched['1'])} of 1)"
            row = [f"{e['family']} {precision}", str(e["prompt_tokens"]), _cell(on, "decode_tok_s")]
            row += [_cell(cpu, "decode_tok_s"), _ratio(on["decode_tok_s"], cpu["decode_tok_s"]), many]
            row += [f"{_cell(on, k)} / {_cell(cpu, k)}" for k in ("prefill_s", "ttft_s")]
            rows.append([*row, f"{part['percent_of_bound']}%"])
    header = ["model", "prompt", "Onyxia decode tok/s", "ORT CPU", "Onyxia / CPU", "Onyxia batched, aggregate tok/s"]
    header += ["prefill 128 (s) Onyxia / CPU", "first token (s) Onyxia / CPU", "decode vs bound"]
    notes = "".join(f" {e['family']}: {e['note']}." for e in entries if "note" in e)
    return _table(header, rows, _source(entries) + notes)


def serving(data: Data) -> str:
    rows, entries = [], data["serving"]["runs"]
    for entry in entries:
        base = entry["rows"][0]
        for i, r in enumerate(entry["rows"]):
            rows.append(
                [entry["model"] if i == 0 else "", str(r["clients"]), _fmt(r["decode_tok_s"])]
                + [_ratio(r["decode_tok_s"], base["decode_tok_s"]), f"{r['ttft_p50_ms']:,}", f"{r['ttft_p95_ms']:,}"]
                + [_ratio(r["ttft_p95_ms"], base["ttft_p95_ms"])]
            )
    header = ["model", "clients", "aggregate decode tok/s", "vs 1 client", "TTFT p50 (ms)", "TTFT p95 (ms)"]
    return _table([*header, "p95 vs 1 client"], rows, _source(entries))


def real_models(data: Data) -> str:
    entries = data["real_models"]["runs"]
    rows = [
        [e["id"], e["exporter"], e["ops"], _fmt(e["mb"]), str(e["readbacks_per_run"])]
        + [" / ".join(_fmt(e[k]) for k in ("onyxia_compile_s", "onyxia_load_s", "onyxia_first_run_s"))]
        + [_fmt(e["ort_cpu_session_s"]), _fmt(e["onyxia_run_ms"]), _fmt(e["ort_cpu_run_ms"]), e["date"]]
        for e in entries
    ]
    header = ["model", "exporter", "ops", "MB", "readbacks / run", "Onyxia compile / load / first run (s)"]
    return _table(
        [*header, "ORT CPU session (s)", "Onyxia run (ms)", "ORT CPU run (ms)", "date"], rows, _source(entries)
    )


def packaged_models(data: Data) -> str:
    entries = data["packaged_models"]["runs"]
    rows = [
        [e["id"], e["domain"], e["package"], e["ops"], f"{e['max_diff']:.1e}", _fmt(e["onyxia_compile_load_s"])]
        + [_fmt(e["onyxia_first_run_s"]), _fmt(e["onyxia_run_ms"]), _fmt(e["ort_cpu_run_ms"])]
        + [f"{e['onyxia_run_ms'] / e['ort_cpu_run_ms']:.0f}x"]
        for e in entries
    ]
    header = ["model", "domain", "package", "ops", "max diff vs ORT", "Onyxia compile + load (s)"]
    header += ["Onyxia first run (s)"]
    return _table([*header, "Onyxia run (ms)", "ORT CPU run (ms)", "Onyxia / ORT"], rows, _source(entries))


def pipelines(data: Data) -> str:
    entries = data["pipelines"]["runs"]
    rows = []
    for e in entries:
        head = [e["id"], e["package"], f"`{e['call']}`"]
        if "error" in e:  # Onyxia failed: the error's last line, onnxruntime's time
            rows.append([*head, f"**fails**: {e['error']}", "", "", "", _fmt(e["ort_cpu_warm_ms"]), ""])
            continue
        equal = "yes" if e["equal"] else f"**no**: {e.get('problem', '')}"
        times = [f"{e['onyxia_setup_s']} + {e['onyxia_first_call_s']}", _fmt(e["onyxia_warm_ms"])]
        ratio = f"{e['onyxia_warm_ms'] / e['ort_cpu_warm_ms']:.1f}x"
        rows.append([*head, equal, e["largest_float_diff"], *times, _fmt(e["ort_cpu_warm_ms"]), ratio])
    header = ["pipeline", "package", "call", "result equal", "largest float diff (bound)"]
    header += ["Onyxia set-up + first call (s)", "Onyxia warm (ms)", "ORT CPU warm (ms)", "Onyxia / ORT"]
    return _table(header, rows, _source(entries))


def conformance(data: Data) -> str:
    entries = data["conformance"]["runs"]
    rows = []
    for e in entries:
        for mode in ("baked", "unbaked"):
            passed = e[f"{mode}_passed"]
            rows.append([mode, f"{passed:,}", f"{e['storable']:,}", f"{100 * passed / e['storable']:.1f}%", e["date"]])
    notes = "".join(f" {e['note']}." for e in entries if e.get("note"))
    return _table(["mode", "cases passed", "storable cases", "rate", "date"], rows, _source(entries) + notes)


def conformance_ops(data: Data) -> str:
    """Per op: storable cases and how many pass in each mode (from the newest full report run)."""
    entry = run(data, "conformance", "node-cases")
    rows = [
        [f"`{op}`", str(c["storable"]), str(c["baked_passed"]), str(c["unbaked_passed"])]
        for op, c in entry["per_op"].items()
    ]
    return _table(["op", "storable cases", "baked passed", "unbaked passed"], rows, _source([entry]))


def _median_ratio(entries: list[dict[str, Any]], mine: str, peer: str) -> float:
    return float(statistics.median(e[mine] / e[peer] for e in entries))


SUMMARIES: dict[str, Callable[[Data], Any]] = {
    "real_models.count": lambda d: len(d["real_models"]["runs"]),
    "real_models.median_ratio": lambda d: _median_ratio(d["real_models"]["runs"], "onyxia_run_ms", "ort_cpu_run_ms"),
    "packaged_models.count": lambda d: len(d["packaged_models"]["runs"]),
    "packaged_models.packages": lambda d: len({e["package"] for e in d["packaged_models"]["runs"]}),
    "packaged_models.median_ratio": lambda d: _median_ratio(
        d["packaged_models"]["runs"], "onyxia_run_ms", "ort_cpu_run_ms"
    ),
    "pipelines.count": lambda d: len(d["pipelines"]["runs"]),
    "pipelines.equal": lambda d: sum(e["equal"] for e in d["pipelines"]["runs"]),
    "pipelines.packages": lambda d: len({e["package"] for e in d["pipelines"]["runs"]}),
    "pipelines.median_ratio": lambda d: _median_ratio(
        [e for e in d["pipelines"]["runs"] if "onyxia_warm_ms" in e], "onyxia_warm_ms", "ort_cpu_warm_ms"
    ),
}

TABLES: dict[str, Callable[[Data], str]] = {
    "bench_families": bench_families,
    "bench_layouts": bench_layouts,
    "gpu": gpu,
    "serving": serving,
    "real_models": real_models,
    "packaged_models": packaged_models,
    "pipelines": pipelines,
    "conformance": conformance,
    "conformance_ops": conformance_ops,
}


def render_table(data: Data, name: str) -> str:
    """`name` from TABLES, or `bench:<run id>` for one bench run's table."""
    if name.startswith("bench:"):
        return bench_run(data, name.split(":", 1)[1])
    return TABLES[name](data)
