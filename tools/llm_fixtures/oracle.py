"""onnxruntime's greedy outputs for one exported directory: the oracle Onyxia's tests compare against.

Why a plain loop instead of onnxruntime-genai's Generator: it is the loop Onyxia runs (prefill with
all prompt ids, then one token per step feeding ``present`` back as ``past``), it works on every layout
(optimum has no genai_config), and it records per-step logit statistics that let a test tell a real
mismatch from a near-tie. Schema: /work/shared/fixtures/README.md, section "expected*.json".
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Prompt", "GreedyRun", "open_session", "greedy", "prompt_record", "files_sha256", "window_layers"]


@dataclass
class Prompt:
    """A named prompt: source text, optional truncation, and its token ids."""

    name: str
    text: str
    truncate_to: int | None
    ids: list[int]


@dataclass
class GreedyRun:
    """What one greedy run produced; ``prefill_logits`` is [P, V] (or [1, V] if the graph keeps only the last)."""

    ids: list[int]
    step_logits: list[np.ndarray] = field(default_factory=list)  # [V] per step, step 0 = prefill last position
    prefill_logits: np.ndarray | None = None


def open_session(model: Path, accuracy_level: int | None = None) -> Any:
    """A CPU session; with ``accuracy_level`` set, every MatMulNBits gets it in an in-memory copy."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    if accuracy_level is None:
        return ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
    import onnx

    proto = onnx.load(str(model))  # loads external data from the model's folder
    found = 0
    for node in proto.graph.node:
        if node.op_type == "MatMulNBits":
            found += 1
            attrs = [a for a in node.attribute if a.name != "accuracy_level"]
            del node.attribute[:]
            node.attribute.extend(attrs + [onnx.helper.make_attribute("accuracy_level", accuracy_level)])
    if not found:
        raise ValueError(f"{model}: accuracy_level override asked for, but the graph has no MatMulNBits")
    return ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def _past_shapes(session: Any, kv_heads: int, head_dim: int, windowed: dict[int, int]) -> dict[str, list[int]]:
    """Empty past per layer, or a zero fixed-capacity buffer for genai's windowed (sliding_window_cache) layers."""
    shapes = {}
    for inp in session.get_inputs():
        if inp.name.startswith("past_key_values."):
            layer = int(inp.name.split(".")[1])
            shapes[inp.name] = [1, kv_heads, windowed.get(layer, 0), head_dim]
    return shapes


def greedy(
    session: Any, prompt_ids: list[int], new_tokens: int, kv_heads: int, head_dim: int, windowed: dict[int, int]
) -> GreedyRun:
    """Prefill, then ``new_tokens - 1`` single-token steps; argmax each time (EOS not special).

    A graph without past inputs (a no-cache export) is run as its users run it: the whole sequence each step."""
    names = {i.name for i in session.get_inputs()}
    cached = any(n.startswith("past_key_values.") for n in names)
    outputs = [o.name for o in session.get_outputs()]
    past = {k: np.zeros(s, np.float32) for k, s in _past_shapes(session, kv_heads, head_dim, windowed).items()}
    run = GreedyRun(ids=[])
    tokens, total = list(prompt_ids), len(prompt_ids)
    for step in range(new_tokens):
        start = total - len(tokens)
        feeds: dict[str, np.ndarray] = {"input_ids": np.array([tokens], np.int64)}
        feeds["attention_mask"] = np.ones((1, total), np.int64)
        if "position_ids" in names:
            feeds["position_ids"] = np.arange(start, total, dtype=np.int64)[None]
        feeds.update(past)
        result = dict(zip(outputs, session.run(outputs, feeds)))
        logits = result["logits"][0]
        if step == 0:
            run.prefill_logits = logits
        last = logits[-1].astype(np.float32)
        run.step_logits.append(last)
        nxt = int(np.argmax(last))
        run.ids.append(nxt)
        past = {k.replace("present.", "past_key_values."): v for k, v in result.items() if k.startswith("present.")}
        tokens, total = ([nxt] if cached else [*tokens, nxt]), total + 1
    return run


def prompt_record(prompt: Prompt, run: GreedyRun) -> dict[str, Any]:
    """The per-prompt fields of expected.json computed from the onnxruntime run."""
    steps = run.step_logits
    top2 = [np.sort(s)[-2:] for s in steps]
    first = steps[0]
    order = np.argsort(-first, kind="stable")[:5]
    return {
        "name": prompt.name,
        "text": prompt.text,
        "truncate_to": prompt.truncate_to,
        "prompt_ids": prompt.ids,
        "greedy_ids": run.ids,
        "greedy_logit_max": [float(t[1]) for t in top2],
        "greedy_top2_margin": [float(t[1] - t[0]) for t in top2],
        "prefill_top5": {"ids": [int(i) for i in order], "values": [float(first[i]) for i in order]},
        "prefill_last_logits_sum": float(first.astype(np.float64).sum()),
        "prefill_last_logits_sumsq": float((first.astype(np.float64) ** 2).sum()),
    }


def files_sha256(directory: Path, names: list[str]) -> dict[str, str]:
    """sha256 of the model files, so a test can tell the fixture it checks is the one recorded."""
    return {n: hashlib.sha256((directory / n).read_bytes()).hexdigest() for n in names if (directory / n).exists()}


def window_layers(directory: Path) -> dict[int, int]:
    """genai layers whose KV cache is a fixed-capacity window buffer (genai_config decoder.sliding_window)."""
    path = directory / "genai_config.json"
    if not path.exists():
        return {}
    sw = json.loads(path.read_text())["model"]["decoder"].get("sliding_window") or {}
    return {int(layer): int(sw["window_size"]) for layer in sw.get("layers", [])}
