"""The pass protocol: a standalone object that edits a graph in place and says if it changed it.

Passes are registered on the `CompilerPipeline`, never owned by operators; the pipeline runs each
stage's passes to a fixed point in stage order. `Pass` and `Stage` are defined in
`onyxia.core.registry`, because a pass's `run` takes the registry and the registry holds the
default passes; this module is their name for code that deals in passes only.
"""

from __future__ import annotations

from dataclasses import dataclass

from onyxia.core.registry import Pass, Stage

__all__ = ["Pass", "PassSet", "Stage"]


@dataclass(frozen=True)
class PassSet:
    """Passes a caller adds to a pipeline together, under one name (the LLM session's "generation"
    set). Each still runs in its own stage and shows in pass statistics and dumps on its own."""

    name: str
    passes: tuple[Pass, ...]
