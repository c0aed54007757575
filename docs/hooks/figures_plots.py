"""The docs' plots, drawn with matplotlib from docs/data/*.json (the same runs the tables show).

Each plot is an SVG string (no timestamp in its metadata, so a rebuild from the same JSON gives the same
file): decode tok/s per engine and family, run time per real and packaged model against onnxruntime CPU,
and serving throughput by concurrent clients.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from figures_tables import ENGINE_NAMES, FAMILY_RUNS, Data, run

__all__ = ["PLOTS"]

_COLORS = {"onyxia": "#7b1fa2", "ort-cpu": "#607d8b", "ort-webgpu": "#ffa000"}


def _svg(fig: Any) -> str:
    out = io.StringIO()
    fig.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    return out.getvalue()


def decode_by_family(data: Data) -> str:
    """Grouped bars: decode tok/s per family and precision, one bar per engine (log scale: 0.2 to 80)."""
    entries = [run(data, "bench", i) for i in FAMILY_RUNS]
    labels = [f"{e['family'].split(' (')[0].removesuffix(' 270m')}\n{p}" for e in entries for p in e["precisions"]]
    parts = [p for e in entries for p in e["precisions"].values()]
    fig, ax = plt.subplots(figsize=(10, 4))
    width = 0.27
    for k, (engine, name) in enumerate(ENGINE_NAMES.items()):
        values = [p["engines"].get(engine, {}).get("decode_tok_s") or 0.0 for p in parts]
        xs = [i + (k - 1) * width for i in range(len(parts))]
        ax.bar(xs, values, width, label=name, color=_COLORS[engine])
    ax.set_xticks(range(len(parts)), labels, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("decode tok/s (log)")
    ax.set_title("Decode throughput per engine and family (lavapipe, 2 CPU cores; a missing bar: the engine failed)")
    ax.legend(loc="upper left", bbox_to_anchor=(1, 1))
    return _svg(fig)


def _time_per_model(entries: list[dict[str, Any]], mine: str, peer: str, title: str) -> str:
    entries = sorted(entries, key=lambda e: e[mine])
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(entries) + 1.2))
    ys = range(len(entries))
    ax.barh([y + 0.2 for y in ys], [e[mine] for e in entries], 0.4, label="Onyxia", color=_COLORS["onyxia"])
    ax.barh([y - 0.2 for y in ys], [e[peer] for e in entries], 0.4, label="ORT CPU", color=_COLORS["ort-cpu"])
    ax.set_yticks(list(ys), [e["id"] for e in entries], fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("ms per run (log)")
    ax.set_title(title)
    ax.legend()
    return _svg(fig)


def real_models(data: Data) -> str:
    title = "Run time per real model (onnxruntime's WebGPU EP is not measured on these)"
    return _time_per_model(data["real_models"]["runs"], "onyxia_run_ms", "ort_cpu_run_ms", title)


def packaged_models(data: Data) -> str:
    title = "Run time per packaged model"
    return _time_per_model(data["packaged_models"]["runs"], "onyxia_run_ms", "ort_cpu_run_ms", title)


def serving(data: Data) -> str:
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for entry in data["serving"]["runs"]:
        rows = entry["rows"]
        ax.plot([r["clients"] for r in rows], [r["decode_tok_s"] for r in rows], marker="o", label=entry["model"])
    ax.set_xlabel("concurrent clients")
    ax.set_ylabel("aggregate decode tok/s")
    ax.set_title(f"onyxia serve, {data['serving']['runs'][0]['parallel']} slots")
    ax.legend(fontsize=8)
    return _svg(fig)


PLOTS: dict[str, Callable[[Data], str]] = {
    "decode_by_family": decode_by_family,
    "real_models": real_models,
    "packaged_models": packaged_models,
    "serving": serving,
}
