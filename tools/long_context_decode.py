"""Decode tok/s with 32 and with 1,024 cached tokens, alternated in one process (issue 26's long-context line).

Two bench runs (`onyxia bench --arch qwen3 --size full --prompt-tokens 32`, then `--prompt-tokens 1024`) are
minutes apart, and on this shared 2-core machine the load moves a single figure by tens of percent; here one
`LlmSession` decodes `--tokens` greedy tokens (pipelined, as the bench does) with its position set to 32 and to
1,024 in turn (A B A B ...), so both see the same machine. The cache rows read are whatever the buffer holds: the
same bytes per step as a real context of that length (a 1,024-token prefill takes minutes on lavapipe). Prints
each pair and the medians.

    python tools/long_context_decode.py [--arch qwen3] [--precision q4] [--pairs 5] [--tokens 16]
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="qwen3")
    parser.add_argument("--precision", default="q4", choices=("fp32", "q4"))
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--long", type=int, default=1024)
    parser.add_argument("--short", type=int, default=32)
    args = parser.parse_args()

    from onyxia.cli.bench import arch_config, synthesize
    from onyxia.cli.llm import LlmSession

    model = synthesize(arch_config(args.arch, "full", None), precisions=(args.precision,))
    directory = model.model_dir(args.precision)
    precision = args.precision if directory == model.directory else None  # onnx-community: one file per precision
    session = LlmSession.from_pretrained(directory, precision, max_length=args.long + args.tokens + 8)

    def rate(position: int) -> float:
        session.reset()
        session.position, session.history = position, [1] * position
        tokens = session.generate_ids([5], args.tokens + 1)
        next(tokens)  # the one-token prefill
        start = time.perf_counter()
        count = sum(1 for _ in tokens)
        return count / (time.perf_counter() - start)

    rate(args.short), rate(args.long)  # warm-up: each length's first dispatches compile their pipelines
    pairs = []
    for _ in range(args.pairs):
        pairs.append((rate(args.short), rate(args.long)))
        short, long = pairs[-1]
        print(f"{args.short}: {short:.2f} tok/s  {args.long}: {long:.2f} tok/s  ratio {long / short:.2f}", flush=True)
    short = statistics.median(p[0] for p in pairs)
    long = statistics.median(p[1] for p in pairs)
    print(
        f"{args.arch} {args.precision}, medians of {len(pairs)} pairs: {short:.2f} and {long:.2f} tok/s, ratio {long / short:.2f}"
    )


if __name__ == "__main__":
    main()
