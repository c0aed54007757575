"""GPU time per op of a batched decode step: where an N-row step of the bench's full-size models spends its time.

Loads the synthetic full-size model `onyxia bench --arch ARCH` measures (written to the bench cache on first use,
as `tools/serve_bench.py --synth` does) with 8 slots and timestamp queries, admits `--rows` streams of different
prompt lengths, steps until every one decodes, then profiles `--steps` decode steps of all of them together and
prints the GPU ms per step of each op (nodes of one op type added up, a node's second dispatch counted apart:
a product's int8 quantize pass comes first, so `MatMulNBits (0)` at more than one row is that pass; the lm head's
dispatches, its column ranges and quantize pass, as one row).
Compare `--rows 1` and `--rows 8` in one sitting: aggregate decode at 8 rows over one row's is about
8 x t(1) / t(8).

    python tools/batch_step_profile.py [--arch gemma3|qwen2] [--rows 8] [--steps 5] [--top 16]
"""

from __future__ import annotations

import argparse
import collections

from serve_bench import synthesized


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="gemma3", choices=["gemma3", "qwen2"])
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--top", type=int, default=16)
    args = parser.parse_args()

    from onyxia.cli.bench.onyxia_runner import OnyxiaRunner
    from onyxia.cli.llm.batch import Batch, Stream

    runner = OnyxiaRunner(synthesized(args.arch)[0], "q4", profile=True, slots=8, prefill_chunk=64)
    runner.load()
    session = runner.loaded
    batch = Batch(session)
    prompts = [[2] + [100 + 37 * i + j for j in range(20 + i)] for i in range(args.rows)]
    streams = [batch.add(Stream(p, args.steps + 8)) for p in prompts]
    while not all(s.tokens for s in streams):
        batch.step()
    batch.step()
    profiles: list = []
    session.profiles = profiles
    for _ in range(args.steps):
        batch.step()
    session.profiles = None
    per_op: dict[tuple[str, int], float] = collections.defaultdict(float)
    dispatches: collections.Counter[tuple[str, int]] = collections.Counter()
    for profile in profiles:
        seen: collections.Counter[str] = collections.Counter()
        for d in profile.dispatches:
            key = ("lm head", 0) if d.node.startswith("/lm_head") else (d.op_type, seen[d.node])  # all its dispatches
            seen[d.node] += 1
            per_op[key] += d.gpu_ns / 1e6 / len(profiles)
            dispatches[key] += 1
    print(f"{args.arch} q4, {args.rows} rows, {len(profiles)} steps: {sum(per_op.values()):.2f} GPU ms per step")
    print("| op (dispatch of its node) | dispatches per step | GPU ms per step |")
    print("|---|---:|---:|")
    for (op, nth), ms in sorted(per_op.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"| {op} ({nth}) | {dispatches[(op, nth)] // len(profiles)} | {ms:.2f} |")


if __name__ == "__main__":
    main()
