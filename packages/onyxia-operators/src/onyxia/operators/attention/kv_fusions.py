"""Rewrite rules for the KV cache of plain-attention exports (optimum's Concat-grown caches)."""

from __future__ import annotations

from onyxia.core.rewrite import Rule

__all__ = ["KV_CACHE_FUSIONS"]

KV_CACHE_FUSIONS: tuple[Rule, ...] = ()
