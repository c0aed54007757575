"""The bench report: one JSON document, and the console tables printed from it.

Per precision: every engine's figures (or why it did not run), the ratios Onyxia / peer for each figure
(above 1 is better for tok/s, below 1 better for times and bytes), the decode bound and, with
`--profile`, Onyxia's top ops by GPU time; with `--batch`, Onyxia's aggregate decode with N streams decoding
together (one row per N in the figure table, where onnxruntime's cells say it ran single-stream, and a
table of its own with the per-stream rate and the ratio to N=1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from onyxia.cli.bench.bound import Bandwidth, StepBytes

__all__ = ["FIGURES", "Figure", "bound_figures", "memory_figures", "print_report", "ratios"]

ONYXIA = "onyxia"
_MB = 1e6
_MIB = float(1 << 20)
_SINGLE = "single-stream only"


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    scale: float = 1.0
    digits: int = 2


FIGURES = (
    Figure("decode_tok_s", "decode tok/s"),
    Figure("prefill_s", "prefill {prefill_tokens} tokens (s)"),
    Figure("prefill_tok_s", "prefill tok/s", digits=1),
    Figure("ttft_s", "time to first token, {prompt_tokens}-token prompt (s)", digits=3),
    Figure("load_compile_s", "load+compile (s)"),
    Figure("upload_s", "weight upload (s)"),
    Figure("warmup_s", "warm-up (s)"),
    Figure("peak_rss_bytes", "host peak RSS (MiB)", _MIB, 0),
    Figure("gpu_bytes", "GPU buffers (MiB)", _MIB, 0),
)


def ratios(engines: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Onyxia / peer for every figure both report (peers that did not run are left out)."""
    mine = engines.get(ONYXIA, {})
    if mine.get("status") != "ok":
        return {}
    table: dict[str, dict[str, float]] = {}
    for name, peer in engines.items():
        if name == ONYXIA or peer.get("status") != "ok":
            continue
        table[name] = {
            f.key: mine[f.key] / peer[f.key]
            for f in FIGURES
            if isinstance(mine.get(f.key), (int, float)) and isinstance(peer.get(f.key), (int, float)) and peer[f.key]
        }
    return table


def bound_figures(step: StepBytes, bandwidth: Bandwidth, onyxia: dict[str, Any] | None) -> dict[str, Any]:
    bound_ms = 1e3 * step.bound_seconds(bandwidth)
    figures: dict[str, Any] = {
        "position": step.position,
        "weight_bytes": step.weight_bytes,
        "kv_bytes": step.kv_bytes,
        "bytes_per_step": step.total,
        "bandwidth_bytes_per_second": bandwidth.bytes_per_second,
        "bound_ms_per_token": bound_ms,
    }
    if onyxia and onyxia.get("status") == "ok":
        decode_ms = 1e3 / onyxia["decode_tok_s"]
        figures.update(onyxia_decode_ms_per_token=decode_ms, onyxia_percent_of_bound=100 * decode_ms / bound_ms)
    return figures


def memory_figures(onyxia: dict[str, Any] | None) -> dict[str, Any]:
    """Onyxia's memory against its weights: GPU buffers over weights + KV capacity, and host peak RSS
    over the weights, in all and beyond the GPU buffers (lavapipe keeps device memory in host RAM, so
    its RSS includes every buffer; on a discrete GPU only the part beyond them stays on the host)."""
    if not onyxia or onyxia.get("status") != "ok" or not onyxia.get("weight_bytes"):
        return {}
    weights, kv, gpu, rss = (onyxia[k] for k in ("weight_bytes", "kv_capacity_bytes", "gpu_bytes", "peak_rss_bytes"))
    return {
        "weight_bytes": weights,
        "kv_capacity_bytes": kv,
        "gpu_over_weights_and_kv": gpu / (weights + kv) - 1,
        "rss_over_weights": rss / weights,
        "rss_beyond_gpu_over_weights": (rss - gpu) / weights,
    }


def print_report(doc: dict[str, Any], console: Console) -> None:
    settings = doc["settings"]
    bandwidth = doc.get("bandwidth")
    if bandwidth:
        console.print(
            f"copy bandwidth on {escape(str(bandwidth.get('adapter')))}: {bandwidth['bytes_per_second'] / 1e9:.2f} GB/s "
            f"(read + write; {bandwidth['copies']} copies of {bandwidth['buffer_bytes'] / _MIB:.0f} MiB)"
        )
    for precision, part in doc["precisions"].items():
        console.print(_figure_table(precision, part, settings))
        for name, result in part["engines"].items():
            if result.get("status") != "ok":
                console.print(f"[yellow]{name}: {result.get('status')}[/] - {escape(str(result.get('reason')))}")
        if "bound" in part:
            _print_bound(part["bound"], console)
        if part.get("memory"):
            _print_memory(part["memory"], part["engines"][ONYXIA], console)
        if part.get("batched"):
            _print_batched(part["batched"], part["engines"].get(ONYXIA, {}).get("tokens"), console)
        if part["engines"].get(ONYXIA, {}).get("profile"):
            _print_profile(part["engines"][ONYXIA]["profile"], console)


def _figure_table(precision: str, part: dict[str, Any], settings: dict[str, Any]) -> Table:
    engines, table_ratios = part["engines"], part.get("ratios", {})
    table = Table(
        title=f"{settings.get('arch', 'gemma3')} {settings['size']} {precision}: Onyxia / peer above 1 is better for "
        "tok/s, below 1 for the rest"
    )
    table.add_column("figure")
    for name in engines:
        table.add_column(name, justify="right")
    for peer in table_ratios:
        table.add_column(f"{ONYXIA}/{peer}", justify="right")
    for f in FIGURES:
        cells = [_cell(engines[name].get(f.key), f) for name in engines]
        ratio_cells = [_ratio(table_ratios[peer].get(f.key)) for peer in table_ratios]
        table.add_row(f.label.format(**settings), *cells, *ratio_cells)
    for row in part.get("batched", []):
        cells = [_cell(row.get("aggregate_decode_tok_s"), FIGURES[0]) if n == ONYXIA else _SINGLE for n in engines]
        label = f"decode tok/s, batch of {row['streams']} (aggregate over streams)"
        table.add_row(label, *cells, *["" for _ in table_ratios])
    reference = engines.get(ONYXIA, {}).get("tokens")
    if reference:
        agree = [_agreement(reference, engines[name].get("tokens")) for name in engines]
        table.add_row("greedy ids equal to onyxia's", *agree, *["" for _ in table_ratios])
    loads = [_loads(engines[name].get("load_average")) for name in engines]
    table.add_row("host load average, start/end", *loads, *["" for _ in table_ratios])
    return table


def _print_batched(rows: list[dict[str, Any]], reference: list[int] | None, console: Console) -> None:
    table = Table(title="Onyxia batched decode: N streams advanced together per step (onnxruntime: single-stream)")
    profiled = any(row.get("profile") for row in rows)
    columns = ["streams", "rows per step", "aggregate tok/s", "per-stream tok/s", "vs N=1", "stream 0 ids"]
    for column in columns + ["host ms/step (dims, inputs, encode)"] * profiled:
        table.add_column(column, justify="right")
    for row in rows:
        if row.get("status") != "ok":
            console.print(
                f"[yellow]onyxia, {row['streams']} streams: {row.get('status')}[/] - {escape(str(row.get('reason')))}"
            )
            continue
        table.add_row(
            str(row["streams"]),
            str(row["rows_per_step"]),
            f"{row['aggregate_decode_tok_s']:,.2f}",
            f"{row['per_stream_decode_tok_s']:,.2f}",
            _ratio(row.get("vs_single")),
            _agreement(reference, row.get("stream0_tokens")) if reference else "-",
            *([_host_split(row.get("profile"))] if profiled else []),
        )
    console.print(table)
    console.print("[dim]stream 0 ids: its greedy ids equal to the single-stream run's (same prompt)[/]")


def _loads(values: list[float | None] | None) -> str:
    if not values or None in values:
        return "-"
    return "/".join(f"{v:.1f}" for v in values if v is not None)


def _cell(value: Any, figure: Figure) -> str:
    if not isinstance(value, (int, float)):
        return "-"
    return f"{value / figure.scale:,.{figure.digits}f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _agreement(reference: list[int], tokens: list[int] | None) -> str:
    if not tokens:
        return "-"
    return f"{sum(a == b for a, b in zip(reference, tokens))}/{len(reference)}"


def _print_bound(bound: dict[str, Any], console: Console) -> None:
    line = (
        f"decode bound: {bound['bytes_per_step'] / _MB:,.1f} MB per step (weights {bound['weight_bytes'] / _MB:,.1f} "
        f"+ KV {bound['kv_bytes'] / _MB:,.2f} at position {bound['position']}) / "
        f"{bound['bandwidth_bytes_per_second'] / 1e9:.2f} GB/s = {bound['bound_ms_per_token']:.1f} ms/token"
    )
    if "onyxia_percent_of_bound" in bound:
        line += (
            f"; Onyxia decode {bound['onyxia_decode_ms_per_token']:.1f} ms/token = "
            f"[bold]{bound['onyxia_percent_of_bound']:.0f}%[/] of the bound"
        )
    console.print(line)


def _print_memory(memory: dict[str, Any], onyxia: dict[str, Any], console: Console) -> None:
    console.print(
        f"memory: weights {memory['weight_bytes'] / _MIB:,.0f} MiB, KV capacity {memory['kv_capacity_bytes'] / _MIB:,.0f}"
        f" MiB; GPU buffers {onyxia['gpu_bytes'] / _MIB:,.0f} MiB = weights + KV + "
        f"{100 * memory['gpu_over_weights_and_kv']:.1f}%; host peak RSS {onyxia['peak_rss_bytes'] / _MIB:,.0f} MiB = "
        f"{memory['rss_over_weights']:.2f}x the weights, {memory['rss_beyond_gpu_over_weights']:.2f}x beyond the GPU "
        "buffers (which lavapipe keeps in host RAM)"
    )


def _host_split(profile: dict[str, Any] | None) -> str:
    """A profiled step's host time before submit and its parts, as `_print_profile` gives them."""
    if not profile:
        return "-"
    dims, inputs, encode = (
        profile.get("host_dims_ms_per_step", 0.0),  # update_dimensions(): absent from older JSON
        profile["host_prepare_ms_per_step"],
        profile["host_encode_ms_per_step"],
    )
    return f"{dims + inputs + encode:.2f} ({dims:.2f}, {inputs:.2f}, {encode:.2f})"


def _print_profile(profile: dict[str, Any], console: Console) -> None:
    dims = profile.get("host_dims_ms_per_step", 0.0)  # update_dimensions(): absent from older JSON
    console.print(
        f"profile ({profile['steps']} decode steps, {profile['dispatches_per_step']} dispatches each): "
        f"GPU {profile['gpu_ms_per_step']:.2f} ms/step summed over dispatches; host before submit "
        f"{dims + profile['host_prepare_ms_per_step'] + profile['host_encode_ms_per_step']:.2f} ms/step "
        f"(dims {dims:.2f}, inputs {profile['host_prepare_ms_per_step']:.2f}, "
        f"encode {profile['host_encode_ms_per_step']:.2f})"
    )
    by_type = Table(title="top ops by type (GPU ms per decode step)")
    for column in ("op type", "dispatches", "GPU ms", "share"):
        by_type.add_column(column, justify="left" if column == "op type" else "right")
    for row in profile["by_op_type"]:
        by_type.add_row(row["op_type"], str(row["dispatches"]), f"{row['gpu_ms']:.3f}", f"{100 * row['share']:.1f}%")
    by_node = Table(title="top nodes (GPU ms per decode step)")
    for column in ("node", "op type", "GPU ms", "share"):
        by_node.add_column(column, justify="right" if column in ("GPU ms", "share") else "left")
    for row in profile["by_node"]:
        by_node.add_row(escape(row["node"]), row["op_type"], f"{row['gpu_ms']:.3f}", f"{100 * row['share']:.1f}%")
    console.print(by_type)
    console.print(by_node)
