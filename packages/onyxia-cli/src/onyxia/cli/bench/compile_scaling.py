"""``python -m onyxia.cli.bench.compile_scaling [N ...]``: compile elementwise chains of N nodes (default
1k, 3k, 10k) with the built-in operators and print the per-pass times (the table in docs/reference/passes.md)."""

from __future__ import annotations

import sys

from onyxia.compiler.scaling import format_scaling, measure
from onyxia.operators import core_operator_registry

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    lengths = [int(a) for a in args] or [1000, 3000, 10000]
    print(format_scaling(measure(core_operator_registry(), lengths)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
