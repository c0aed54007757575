"""The LLM session's resident KV cache: one buffer per cache tensor, laid out [slots, kv_heads, capacity, head_size].

Why: a cache that grows by concatenation moves every row each step once it has more than one kv head or
batch row (the rows of head h + 1 start right after head h's last row, so appending shifts them). Stored
with a fixed row stride (`capacity`) per (slot, kv head), a step writes only its new rows and every reader
indexes the rows it needs: zero bytes of cache are copied per step, for any number of kv heads, and the
batch rows of one run can belong to any slots (continuous batching: a sequence keeps its slot while
others come and go).

The session records the layout on the graph (`IrGraph.resident_kv`) and aliases each present cache to its
past (`IrGraph.aliases`); an op plans against it through `PlanCtx.resident_kv(i)`, which answers for the
input whose storage root is one of `caches`. The physical element (slot, h, t, d) of a cache is at
``((slot * kv_heads + h) * capacity + t) * head_size + d``, batch row b uses slot ``rows[b, 0]``, and:

- GroupQueryAttention (the past's sequence dim is `capacity`, present shares the buffer: onnxruntime's
  past_present_share_buffer) places row b's new tokens by ``seqlens_k[b]`` as onnxruntime does;
- KvAppend (Concat semantics: present has past + new rows logically) writes row b's new rows from row
  ``rows[b, 1]`` on (the rows that batch row has cached), not at the shared past length;
- ScaledDotProductAttention reads key j of row b at that row's slot with stride `capacity`; the keys past a
  row's own length are hidden by the row's attention mask, which the session builds per row.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KV_ROWS", "ResidentKvLayout"]

KV_ROWS = "onyxia/kv_rows"  # the int32 [batch, 2] input: per batch row, (slot, rows cached before this run)


@dataclass(frozen=True)
class ResidentKvLayout:
    capacity: int  # rows per (slot, kv head): the physical stride of a cache's sequence axis
    rows_input: int  # tensor id of the `KV_ROWS` graph input
    caches: frozenset[int]  # tensor ids of the past caches (graph inputs) stored in this layout

    def __post_init__(self) -> None:
        if self.capacity <= 0:
            raise ValueError(f"ResidentKvLayout: capacity {self.capacity}; expected a positive row count")
