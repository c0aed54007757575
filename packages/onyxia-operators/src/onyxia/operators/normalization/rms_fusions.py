"""Rewrite rules that turn a plain-op RMSNorm (optimum's exports) into SimplifiedLayerNormalization."""

from __future__ import annotations

from onyxia.core.rewrite import Rule

__all__ = ["RMS_NORM_FUSIONS"]

RMS_NORM_FUSIONS: tuple[Rule, ...] = ()
