"""Greedy agreement and decode speed of the reduced-precision lm heads (``--lm-head fp16|int8``) against the exact head.

Agreement is teacher-forced: one token sequence (the exact head's) is fed to a session per head, one token per
step in lockstep, and at every position the reduced head's argmax is compared with the exact head's. So a
disagreement cannot snowball into a different text, and each position counts once. The sequence is either
text the exact head samples from a few prompts (temperature 0.8, top-k 40, seeded; each sample runs to EOS or
the cache's end, and samples are drawn until `--tokens` positions are covered) or, with ``--text FILE``, a
file's tokens cut into windows that fit the cache (from its start, until `--tokens` positions are covered). Besides agreement the table shows the largest logit
difference from the exact head and, for the positions that disagree, the exact head's margin between its
top two logits (a disagreement on a near-tie is harmless; on a clear winner it is not).

Decode speed: each head then decodes `--decode-tokens` greedy tokens after the first prompt, in
`--rounds` interleaved rounds (exact, fp16, int8, then int8, fp16, exact, ...) so a noisy machine's drift hits every head
alike; the table shows each head's median tok/s.

    python tools/lm_head_agreement.py [MODEL_DIR] [--precision P] [--tokens 2000] [--text FILE]
                                      [--decode-tokens 128] [--rounds 3] [--heads exact,fp16,int8]

Without MODEL_DIR it uses the built-in demo (fortune-gemma3) in q4, where the tied f32 head is 67% of a
decode step's bytes.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.resources
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from onyxia.cli.llm import LlmSession

PROMPTS = ["Life is", "You will", "A friend", "Today", "Love", "The best", "Happiness", "Your future"]
TEMPERATURE, TOP_K = 0.8, 40  # the demo's sampling defaults (onyxia generate)
_BYTES = {"exact": 4, "fp16": 2, "int8": 1}


@dataclass
class Agreement:
    positions: int = 0
    agree: int = 0
    max_logit_diff: float = 0.0
    disagree_margins: list[float] = field(default_factory=list)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", nargs="?", type=Path, default=None, help="default: the built-in demo")
    parser.add_argument("--precision", default=None, help="model file precision (demo default: q4)")
    parser.add_argument("--max-length", type=int, default=None)
    parser.add_argument("--tokens", type=int, default=2000, help="positions compared, at least")
    parser.add_argument("--text", type=Path, default=None, help="teacher-force this file's tokens instead")
    parser.add_argument("--heads", default="exact,fp16,int8")
    parser.add_argument("--decode-tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3, help="0: agreement only")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    heads = [h.strip() for h in args.heads.split(",") if h.strip()]
    if heads[0] != "exact":
        heads = ["exact", *[h for h in heads if h != "exact"]]
    precision = args.precision or ("q4" if args.model_dir is None else None)
    with _model_dir(args.model_dir) as root:
        sessions = _sessions(root, precision, args.max_length, heads)
    exact = sessions["exact"]
    sequences = _text_windows(exact, args.text, args.tokens) if args.text else _sampled(exact, args.tokens, args.seed)
    results = _agreement(sessions, sequences)
    speeds = _speeds(sessions, exact.tokenizer.encode(PROMPTS[0]), args.decode_tokens, args.rounds)
    source = f"text of {args.text}" if args.text else "text sampled by the exact head"
    print(f"model {root} [{exact.model_dir.precision}] on {exact.adapter}; {len(sequences)} sequences, {source}")
    print(
        "| lm head | head weight bytes | decode tok/s (median) | greedy agreement | max abs logit diff | "
        "exact top-2 margin where they differ (median / max) |"
    )
    print("|---|---|---|---|---|---|")
    for head in heads:
        r, margins = results[head], results[head].disagree_margins
        spread = f"{statistics.median(margins):.3f} / {max(margins):.3f}" if margins else "-"
        print(
            f"| {head} | {_head_bytes(sessions[head], head)} | {_median(speeds[head])} | "
            f"{r.agree}/{r.positions} = {r.agree / max(r.positions, 1):.4f} | {r.max_logit_diff:.4f} | {spread} |"
        )


@contextlib.contextmanager
def _model_dir(path: Path | None) -> Iterator[Path]:
    if path is not None:
        yield path
        return
    with importlib.resources.as_file(importlib.resources.files("onyxia.cli.data") / "fortune-gemma3") as demo:
        yield demo


def _sessions(root: Path, precision: str | None, max_length: int | None, heads: list[str]) -> dict[str, LlmSession]:
    from onyxia.cli.llm import LlmSession
    from onyxia.runtime import Runtime

    runtime = Runtime()
    return {h: LlmSession.from_pretrained(root, precision, max_length, runtime=runtime, lm_head=h) for h in heads}


def _sampled(exact: LlmSession, tokens: int, seed: int) -> list[list[int]]:
    """Texts the exact head samples, prompt included, until `tokens` positions are covered."""
    from onyxia.cli.llm import SamplingParams

    eos, sequences, covered = exact.model_dir.eos_token_ids, list[list[int]](), 0
    while covered < tokens:
        prompt = exact.tokenizer.encode(PROMPTS[len(sequences) % len(PROMPTS)])
        params = SamplingParams(temperature=TEMPERATURE, top_k=TOP_K, seed=seed + len(sequences))
        exact.reset()
        room = exact.max_length - len(prompt)
        sequence = [*prompt, *exact.generate_ids(prompt, room, params, eos)]
        sequences.append(sequence)
        covered += len(sequence) - 1
    return sequences


def _text_windows(exact: LlmSession, path: Path, tokens: int) -> list[list[int]]:
    """The file's tokens in windows of the cache's length, from its start until `tokens` positions are covered."""
    ids = exact.tokenizer.encode(path.read_text(encoding="utf-8"))
    width, windows, covered = exact.max_length, list[list[int]](), 0
    for start in range(0, len(ids), width):
        window = ids[start : start + width]
        if len(window) < 2 or covered >= tokens:
            break
        windows.append(window)
        covered += len(window) - 1
    return windows


def _agreement(sessions: dict[str, LlmSession], sequences: list[list[int]]) -> dict[str, Agreement]:
    """Every session fed the same tokens one step at a time; argmax and logits compared per position."""
    results = {head: Agreement() for head in sessions}
    for sequence in sequences:
        for session in sessions.values():
            session.reset()
        for token in sequence[:-1]:
            rows = {h: s.next_token_logits([token]) for h, s in sessions.items()}
            exact = rows["exact"]
            best = int(np.argmax(exact))
            top2 = np.partition(exact, -2)[-2:]
            for head, row in rows.items():
                r = results[head]
                r.positions += 1
                r.max_logit_diff = max(r.max_logit_diff, float(np.max(np.abs(row - exact))))
                if int(np.argmax(row)) == best:
                    r.agree += 1
                else:
                    r.disagree_margins.append(float(top2[1] - top2[0]))
    return results


def _speeds(sessions: dict[str, LlmSession], prompt: list[int], tokens: int, rounds: int) -> dict[str, list[float]]:
    speeds: dict[str, list[float]] = {head: [] for head in sessions}
    for round_index in range(rounds):
        order = list(sessions.items())
        for head, session in order if round_index % 2 == 0 else order[::-1]:  # alternate who runs first
            session.reset()
            for _token in session.generate_ids(prompt, tokens):
                pass
            speeds[head].append(session.stats.decode_tokens_per_second)
    return speeds


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.1f}" if values else "-"


def _head_bytes(session: LlmSession, head: str) -> str:
    """MB the head's weight takes per decode step: vocabulary x hidden x the copy's bytes per value."""
    hidden = int(session.model_dir.config.get("hidden_size", 0))
    return f"{(session.vocab_size or 0) * hidden * _BYTES[head] / 1e6:.1f} MB"


if __name__ == "__main__":
    main()
