"""onyxia.cli — the `onyxia` command: inspect, validate and run ONNX models.

Top of load -> IR -> passes -> plan -> executor: the only package that may import every other
onyxia package (onnx front end, compiler, operators, runtime). Nothing imports it. `validate`
and `inspect` never import onyxia.runtime, so they work on machines without a GPU.
"""

from onyxia.cli.main import build_parser, main

__version__ = "0.1.0"

__all__ = ["build_parser", "main"]
