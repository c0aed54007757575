"""`python -m onyxia.cli.bench`: write (or find cached) the synthetic model directory and print where it is."""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import replace

from onyxia.cli.bench.archs import ARCHS, LAYOUT_NAMES, arch_config
from onyxia.cli.bench.layouts import PRECISIONS
from onyxia.cli.bench.synth import synthesize

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m onyxia.cli.bench", description=__doc__)
    parser.add_argument("--arch", choices=ARCHS, default="gemma3")
    parser.add_argument("--size", choices=("full", "270m", "tiny"), default="full", help="270m: gemma3's full size")
    parser.add_argument("--layout", choices=LAYOUT_NAMES, default=None, help="default: the family's published one")
    parser.add_argument("--out", help="model directory (default: the cache, ~/.cache/onyxia/bench/...)")
    parser.add_argument("--precision", action="append", choices=PRECISIONS, help="repeatable")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rope-cache-positions", type=int, default=4096, help="gemma3 full size only")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    config = arch_config(args.arch, args.size, args.layout)
    if args.arch == "gemma3" and args.size != "tiny":
        config = replace(config, rope_cache_positions=args.rope_cache_positions)
    result = synthesize(config, args.out, args.precision or ("fp32", "q4"), args.seed)
    print(result.directory)
    print("written:", ", ".join(result.written) or "nothing (cached)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
