"""`python -m onyxia.cli.bench`: write (or find cached) the synthetic model directory and print where it is."""

from __future__ import annotations

import argparse
import logging
import sys

from onyxia.cli.bench.config import GemmaConfig
from onyxia.cli.bench.synth import MODEL_FILES, synthesize

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m onyxia.cli.bench", description=__doc__)
    parser.add_argument("--size", choices=("270m", "tiny"), default="270m")
    parser.add_argument("--out", help="model directory (default: the cache, ~/.cache/onyxia/bench/...)")
    parser.add_argument("--precision", action="append", choices=sorted(MODEL_FILES), help="repeatable")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rope-cache-positions", type=int, default=4096, help="270m only")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.size == "tiny":
        config = GemmaConfig.tiny()
    else:
        config = GemmaConfig.gemma3_270m(rope_cache_positions=args.rope_cache_positions)
    result = synthesize(config, args.out, args.precision or ("fp32", "q4"), args.seed)
    print(result.directory)
    print("written:", ", ".join(result.written) or "nothing (cached)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
