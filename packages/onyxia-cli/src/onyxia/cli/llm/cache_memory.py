"""What the KV caches of `slots` sequences of `capacity` tokens take, checked against the device before any
allocation: an impossible `--parallel` x `--max-length` is refused at start with the numbers, not by an
allocation failure mid-upload.

Each cache tensor is one buffer [slots, kv_heads, capacity, head_size] (`resident_cache`) that every kernel
binds whole, so it must fit the device's largest storage binding; together they add slots x capacity x
(bytes per position) to the weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from onyxia.cli.llm.signature import LlmSignature
from onyxia.core import ModelLoadError, SymbolicExpr
from onyxia.core.bindings import max_binding_bytes

if TYPE_CHECKING:
    from onyxia.cli.llm.session import LlmSession

__all__ = ["bytes_per_position", "check_cache_memory", "kv_buffer_bytes"]

_MIB = 1024 * 1024


def bytes_per_position(signature: LlmSignature, static: Mapping[str, int]) -> dict[str, int]:
    """Each cache tensor's bytes per (slot, position): kv_heads x head_size x the stored dtype's size."""
    sizes = {}
    for pair in signature.kv:
        heads, head = (_known(d, static) for d in (pair.past_dims[1], pair.past_dims[3]))
        if heads is not None and head is not None:
            sizes[pair.past] = heads * head * pair.dtype.gpu_numpy.itemsize
    return sizes


def check_cache_memory(
    signature: LlmSignature, static: Mapping[str, int], slots: int, capacity: int, where: str
) -> int:
    """The caches' total bytes; a `ModelLoadError` naming the numbers when one buffer cannot be bound."""
    per_position = bytes_per_position(signature, static)
    limit = max_binding_bytes()
    worst = max(per_position.items(), key=lambda item: item[1], default=None)
    if worst is not None and slots * capacity * worst[1] > limit:
        name, size = worst
        fits = limit // (capacity * size)
        raise ModelLoadError(
            f"{where}: {slots} slots x {capacity} tokens of KV cache need {slots * capacity * size / _MIB:.1f} MiB "
            f"in one buffer ('{name}': slots x capacity x {size} bytes per position), over this device's "
            f"largest storage binding of {limit / _MIB:.0f} MiB; lower --parallel to {max(fits, 1)} or less"
            + (f" or --max-length to {limit // (slots * size)} or less" if limit >= slots * size else "")
        )
    return slots * capacity * sum(per_position.values())


def kv_buffer_bytes(session: LlmSession) -> int:
    """Bytes the loaded session's KV cache buffers take on the device: what its slots x max_length cost."""
    executor = session.executor
    return sum(executor.buffer_bytes(pair.past) for pair in session.signature.kv)


def _known(dim: object, static: Mapping[str, int]) -> int | None:
    if isinstance(dim, int):
        return dim
    if isinstance(dim, SymbolicExpr) and dim.is_name:
        return static.get(str(dim))
    return None
