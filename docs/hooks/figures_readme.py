"""The README's one results table, rendered from docs/data/*.json by `tools/readme_figures.py`.

A line per surface, each linking to the docs page with the full tables; a test keeps the README equal to
this rendering, so the front page cannot quote a figure the JSON does not hold.
"""

from __future__ import annotations

from figures_tables import FAMILY_RUNS, SUMMARIES, Data, _ratio, load, run

__all__ = ["load", "readme_table"]  # load: the figures this renders, for tools/readme_figures.py


def readme_table(data: Data, docs: str = "docs") -> str:
    """The README's one results table: a line per surface, linking to the docs page with the full tables."""
    gemma = run(data, "bench", FAMILY_RUNS[0])["precisions"]["q4"]["engines"]
    conf = data["conformance"]["runs"][0]
    gpu = run(data, "gpu", "gemma3-full-onnx-community-both-p32")
    gpu_q4 = gpu["precisions"]["q4"]
    gpu_batched = gpu_q4["batched_decode_tok_s"]
    rows = [
        [
            f"[LLM decode]({docs}/benchmarks/index.md), Gemma 3 270m q4",
            f"{gemma['onyxia']['decode_tok_s']} tok/s",
            f"CPU {gemma['ort-cpu']['decode_tok_s']}, WebGPU {gemma['ort-webgpu']['decode_tok_s']} tok/s",
            run(data, "bench", FAMILY_RUNS[0])["date"],
        ],
        [
            f"[LLM decode on a GPU]({docs}/benchmarks/gpu.md), {gpu['machine'].split(' (')[0]}, Gemma 3 270m q4",
            f"{gpu_q4['engines']['onyxia']['decode_tok_s']:.1f} tok/s; 8 streams {gpu_batched['8']:.1f} tok/s "
            f"({_ratio(gpu_batched['8'], gpu_batched['1'])} one)",
            f"CPU {gpu_q4['engines']['ort-cpu']['decode_tok_s']:.1f} tok/s ({gpu['machine'].split(', ')[-1].split(';')[0]})",
            gpu["date"],
        ],
        *(_serving_row(serve, docs) for serve in data["serving"]["runs"]),
        [
            f"[Real models]({docs}/models/real-models.md), run time (median of {SUMMARIES['real_models.count'](data)})",
            f"{SUMMARIES['real_models.median_ratio'](data):.0f}x ORT CPU's",
            "CPU EP: 1x",
            max(e["date"] for e in data["real_models"]["runs"]),
        ],
        [
            f"[Packaged models]({docs}/models/packaged.md), run time (median of "
            f"{SUMMARIES['packaged_models.count'](data)})",
            f"{SUMMARIES['packaged_models.median_ratio'](data):.0f}x ORT CPU's",
            "CPU EP: 1x",
            max(e["date"] for e in data["packaged_models"]["runs"]),
        ],
        [
            f"[Packages' pipelines on `onyxia.ort`]({docs}/guide/ort.md)",
            f"{SUMMARIES['pipelines.equal'](data)} of {SUMMARIES['pipelines.count'](data)} results equal",
            f"warm {SUMMARIES['pipelines.median_ratio'](data):.1f}x ORT CPU's time (median)",
            max(e["date"] for e in data["pipelines"]["runs"]),
        ],
        [
            f"[ONNX node conformance]({docs}/reference/conformance.md)",
            f"{conf['baked_passed']:,} / {conf['storable']:,} storable cases pass",
            "-",
            conf["date"],
        ],
    ]
    lines = ["| what | Onyxia | onnxruntime | measured |", "|---|---|---|---|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows]) + "\n"


def _serving_row(serve: dict, docs: str) -> list[str]:
    """One served model's aggregate decode rate at its most clients against one client's: a row for every
    recorded model, so the front page shows each rather than the best."""
    one, many = serve["rows"][0], serve["rows"][-1]
    ratio = f"{_ratio(many['decode_tok_s'], one['decode_tok_s'])} vs 1 client"
    if "round_decode_ratios" in serve:  # medians of `serve_bench.py --rounds N`
        spread = serve["round_decode_ratios"]
        ratio = f"medians of {serve['rounds']} rounds: {ratio}, rounds {min(spread):.2f}-{max(spread):.2f}x"
    return [
        f"[Serving]({docs}/serving/index.md), {serve['model']}, {many['clients']} clients",
        f"{many['decode_tok_s']} tok/s ({ratio})",
        "-",
        serve["date"],
    ]
