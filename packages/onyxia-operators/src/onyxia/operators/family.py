"""Helpers for family tables: rows are declared without their op name; the table supplies it."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["ONYXIA_DOMAIN", "named_rows"]

T = TypeVar("T", bound="DataclassInstance")

ONYXIA_DOMAIN = "com.onyxia"  # Onyxia's own ops: produced by its passes, not found in model files


def named_rows(table: dict[str, T]) -> dict[str, T]:
    """Give each frozen-dataclass row its table key as `name` (used in errors and profiles)."""
    return {key: dataclasses.replace(row, name=key) for key, row in table.items()}
