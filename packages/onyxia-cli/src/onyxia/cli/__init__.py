"""onyxia.cli — the `onyxia` command: inspect, validate and run ONNX models.

Top of load -> IR -> passes -> plan -> executor: the only package that may import every other
onyxia package (onnx front end, compiler, operators, runtime). Nothing imports it. `validate`
and `inspect` never import onyxia.runtime, so they work on machines without a GPU.

Lazy: `build_parser` and `main` import the command table (rich and every command's modules) on first
use, so `onyxia.cli.plan_cache`, which `onyxia.ort` sessions read at start-up, does not pay for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onyxia.cli.main import build_parser, main

from onyxia.cli._version import __version__ as __version__

__all__ = ["build_parser", "main"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'onyxia.cli' has no attribute {name!r}")
    import onyxia.cli.main as commands

    # importing the submodule bound `onyxia.cli.main` to the module: the package's names are the functions
    globals().update(build_parser=commands.build_parser, main=commands.main)
    return globals()[name]
