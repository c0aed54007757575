"""The pass catalog: every pass a compile runs, in order, read from the pipeline itself.

`CompilerPipeline(registry).passes(dims)` is what a compile runs: the compiler's built-in passes and
the registry's default passes (`onyxia.operators.passes.default_passes()`, the one place a built-in
pass is registered, and any a plugin adds), sorted by stage; `Planning` runs once after the PLANNING
passes. The LLM session's own passes (its "generation" `PassSet` and the opt-in float16 matching) are
listed after them. A pass's purpose is the first sentence of its class docstring; a `RewritePass`
lists its rules grouped by the module that defines them; a `FixedPoint` lists the passes it settles.
"""

from __future__ import annotations

import inspect
import re
import sys
from dataclasses import dataclass
from typing import Any

from onyxia.core import OperatorRegistry, Pass

__all__ = ["PassRow", "pass_rows"]


@dataclass(frozen=True)
class PassRow:
    stage: str
    name: str
    module: str  # the module defining the pass's class, relative to onyxia
    rules: tuple[tuple[str, tuple[str, ...]], ...]  # (module relative to onyxia, rule names), in rule order
    purpose: str
    scope: str  # "every compile" or "LLM session"


def pass_rows(registry: OperatorRegistry) -> list[PassRow]:
    """Every compile's passes in the order they run, then the LLM session's."""
    from onyxia.cli.llm.generation_passes import generation_passes
    from onyxia.cli.llm.lm_head_precision import LM_HEAD_PRECISIONS
    from onyxia.compiler import CompilerPipeline
    from onyxia.compiler.passes import PlanningPass
    from onyxia.operators.passes import MatchOnnxruntimeCpuFloat16

    compile_passes: list[Any] = [*CompilerPipeline(registry).passes({}), PlanningPass({})]
    reduced = next(p for p in LM_HEAD_PRECISIONS if p != "exact")
    llm: list[Any] = [*generation_passes("logits", (), 1, lm_head=reduced).passes, MatchOnnxruntimeCpuFloat16()]
    return [_row(p, "every compile") for p in compile_passes] + [_row(p, "LLM session") for p in llm]


def _row(p: Pass, scope: str) -> PassRow:
    sub = getattr(p, "passes", None)
    if sub is not None:  # a FixedPoint: what it settles together
        purpose = "; ".join(f"{s.name}: {_first_sentence(s)}" for s in sub)
        return PassRow(p.stage.name, p.name, _module(p), tuple((_module(s), (s.name,)) for s in sub), purpose, scope)
    groups: dict[str, list[str]] = {}
    for rule in getattr(p, "rules", ()) or ():
        groups.setdefault(_module(rule.rewrite), []).append(rule.name)
    rules = tuple((module, tuple(names)) for module, names in groups.items())
    return PassRow(p.stage.name, p.name, _module(p), rules, _first_sentence(p), scope)


def _module(obj: object) -> str:
    module = obj.__module__ if inspect.isfunction(obj) or isinstance(obj, type) else type(obj).__module__
    return module.removeprefix("onyxia.")


def _first_sentence(p: object) -> str:
    """The class docstring's first sentence (a class does not inherit one); the module's when it has none."""
    doc = type(p).__doc__ or sys.modules[type(p).__module__].__doc__ or ""
    text = " ".join(doc.strip().split("\n\n", 1)[0].split())
    text = re.sub(r"^`+\w+`+:\s*", "", text)  # a module docstring opening with its class's name
    depth = 0
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "." and depth == 0 and text[i + 1 : i + 2] in ("", " "):
            text = text[:i]
            break
    return text[:1].upper() + text[1:]
