"""What a process imports before it runs anything: start-up time `onyxia.ort` users pay on every start.

`onyxia.cli`'s package names the command's entry points lazily, so the plan cache (read by every
`onyxia.ort` session) loads without rich and the command table, and a warm-cache hit without the compiler.
"""

from __future__ import annotations

import subprocess
import sys

_HEAVY = ("rich", "onnx", "onyxia.cli.main", "onyxia.cli.llm", "onyxia.operators", "onyxia.compiler", "onyxia.onnx")


def _imported_by(statement: str) -> list[str]:
    code = f"import sys\n{statement}\nprint(' '.join(m for m in {_HEAVY!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return done.stdout.split()


def test_the_plan_cache_imports_neither_the_commands_nor_the_compiler() -> None:
    assert _imported_by("import onyxia.cli.plan_cache") == []


def test_the_package_still_names_the_entry_points() -> None:
    from onyxia.cli import build_parser, main
    from onyxia.cli.main import build_parser as parser_function
    from onyxia.cli.main import main as main_function

    assert main is main_function and build_parser is parser_function
    assert callable(main) and build_parser().prog
    assert "rich" in _imported_by("from onyxia.cli import main")  # the command table, on first use
