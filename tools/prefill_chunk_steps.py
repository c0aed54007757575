"""Each batch step timed while a newcomer's long prompt prefills, at several prefill chunks, in one process.

`tools/serve_bench.py --long-prompt` measures the same trade-off through HTTP; this leaves the server out and
times `Batch.step()` itself: 4 streams decode, then a newcomer with an N-token prompt arrives and every step
prefills one chunk of it besides the decode step, until its first token. Per chunk it prints the decode-only
step, the median and worst step with a chunk (a running stream's gap between tokens) and the newcomer's time
to first token; the chunks run in turn (64 128 ... 64 128 ...), after one warm-up round each (pipelines are
compiled per run length). The session is loaded once with the largest chunk, as `--prefill-chunk` sizes it.

    python tools/prefill_chunk_steps.py --synth gemma3 [--chunks 64,128,256,512] [--tokens 1000] [--repeats 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from serve_bench import synthesized
from serve_bench_long import TEXT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--synth", metavar="ARCH", required=True, help="`onyxia bench --arch ARCH`'s q4 model")
    parser.add_argument("--chunks", default="64,128,256,512")
    parser.add_argument("--tokens", type=int, default=1000, help="the newcomer's prompt")
    parser.add_argument("--decoders", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    chunks = [int(c) for c in args.chunks.split(",")]
    from onyxia.cli.llm import LlmSession, SamplingParams
    from onyxia.cli.llm.batch import Stream

    model_dir, precision = synthesized(args.synth)
    session = LlmSession.from_pretrained(model_dir, precision, slots=args.decoders + 1, prefill_chunk=max(chunks))
    ids = session.tokenizer.encode(TEXT)
    batch = session.batch()
    room = session.max_length - 64  # decode until the last round ends
    for i in range(args.decoders):
        batch.add(Stream(session.tokenizer.encode(f"Tell me a fortune number {i}"), room, SamplingParams()))

    def step() -> float:
        start = time.perf_counter()
        batch.step()
        return time.perf_counter() - start

    rows: dict[int, list[tuple[float, float, float, float]]] = {c: [] for c in chunks}
    for repeat in range(-1, args.repeats):  # -1: the warm-up round
        for c in chunks:
            session.prefill_chunk = c
            before = statistics.median(step() for _ in range(3))
            rng = np.random.default_rng(1000 + 10 * repeat + c)  # no slot keeps a prefix of another round's
            prompt = [int(i) for i in rng.permutation((ids * (args.tokens // len(ids) + 1))[: args.tokens])]
            newcomer = batch.add(Stream(prompt if repeat >= 0 else prompt[: c + 1], 1, SamplingParams()))
            start, steps = time.perf_counter(), []
            while not newcomer.tokens:
                steps.append(step())
            if repeat >= 0:
                rows[c].append((before, statistics.median(steps), max(steps), time.perf_counter() - start))
    print(f"{session.model_dir.model_path}, {args.decoders} streams decoding, a {args.tokens}-token newcomer")
    print(
        "| chunk | decode step (ms) | step with a chunk (ms) | worst step (ms) | worst / decode step | newcomer TTFT (ms) |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for c in chunks:
        step_ms, with_ms, worst_ms, ttft_ms = (1000 * statistics.median(r[i] for r in rows[c]) for i in range(4))
        print(f"| {c} | {step_ms:.0f} | {with_ms:.0f} | {worst_ms:.0f} | {worst_ms / step_ms:.1f} | {ttft_ms:.0f} |")


if __name__ == "__main__":
    main()
