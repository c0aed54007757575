"""`onyxia bench --record PATH`: the run as one entry of the docs' figures file (docs/data/bench.json).

The docs' tables, plots and quoted figures are rendered from that file (docs/hooks/figures_tables.py), so
recording a re-measurement updates every page at once. An entry keeps what the docs show (per precision
and engine: status, decode tok/s, prefill and first-token times, load+compile, memory; the percent of the
decode bound; with `--batch`, Onyxia's aggregate decode tok/s per batch size) with the date, the command
line and the adapter; a run with the same id (arch, size, layout, precisions, prompt tokens) is replaced,
any other kept. A lent GPU's runs go to their own file (docs/data/gpu.json): same ids, other machine.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from onyxia.cli.bench.archs import arch_config, layout_of

__all__ = ["record_run", "run_entry"]

_ENGINE_KEYS = (
    "status",
    "reason",
    "decode_tok_s",
    "prefill_s",
    "ttft_s",
    "load_compile_s",
    "peak_rss_bytes",
    "gpu_bytes",
)


def run_entry(doc: dict[str, Any], command: str, date: datetime.date | None = None) -> dict[str, Any]:
    """The figures-file entry of a bench report `doc` (suite.run_bench's document)."""
    settings = doc["settings"]
    arch, size, precisions = settings["arch"], settings["size"], list(doc["precisions"])
    layout = layout_of(arch_config(arch, size, settings["layout"]))
    which = "both" if len(precisions) > 1 else precisions[0]
    bandwidth = doc.get("bandwidth") or {}
    system = doc.get("system") or {}
    machine = f"{system.get('adapter') or 'unknown adapter'}, {system.get('cpus')} CPUs"
    if bandwidth:
        machine += f"; copy bandwidth {bandwidth['bytes_per_second'] / 1e9:.2f} GB/s in the same run"
    entry: dict[str, Any] = {
        "id": f"{arch}-{size}-{layout}-{which}-p{settings['prompt_tokens']}",
        "family": doc["model"]["config"].get("name", arch),
        "arch": arch,
        "size": size,
        "layout": layout,
        "date": (date or datetime.date.today()).isoformat(),
        "command": command,
        "machine": machine,
        "prompt_tokens": settings["prompt_tokens"],
        "prefill_tokens": settings["prefill_tokens"],
        "decode_tokens": settings["decode_tokens"],
        "precisions": {},
    }
    for precision, part in doc["precisions"].items():
        engines = {name: {k: e[k] for k in _ENGINE_KEYS if e.get(k) is not None} for name, e in part["engines"].items()}
        figures: dict[str, Any] = {"engines": engines}
        bound = part.get("bound") or {}
        if "onyxia_percent_of_bound" in bound:
            figures["percent_of_bound"] = round(bound["onyxia_percent_of_bound"])
        batched = {
            str(b["streams"]): b["aggregate_decode_tok_s"] for b in part.get("batched") or [] if b["status"] == "ok"
        }
        if len(batched) > 1:  # `--batch`: aggregate decode tok/s by streams stepped together
            figures["batched_decode_tok_s"] = batched
        entry["precisions"][precision] = figures
    return entry


def record_run(path: Path, entry: dict[str, Any]) -> None:
    """Replace the run of `entry`'s id in the figures file at `path` (created when missing), keep the rest."""
    doc = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"runs": []}
    runs = [entry if run["id"] == entry["id"] else run for run in doc["runs"]]
    doc["runs"] = runs if entry in runs else [*runs, entry]  # in place, a new one last
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    temporary.replace(path)  # readers never see half a file
