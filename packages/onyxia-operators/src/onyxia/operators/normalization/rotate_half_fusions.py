"""Rewrite rules that turn a plain-op rotate-half RoPE (optimum's exports) into one rotary kernel."""

from __future__ import annotations

from onyxia.core.rewrite import Rule

__all__ = ["ROTATE_HALF_FUSIONS"]

ROTATE_HALF_FUSIONS: tuple[Rule, ...] = ()
