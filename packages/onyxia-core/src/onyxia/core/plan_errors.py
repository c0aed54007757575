"""The run-time error word: kernels report index and range errors into slots the runtime reads with the
outputs, so a bad index becomes an error naming the node instead of a silent wrong value."""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["ERROR_SLOT_WORDS", "ErrorCode", "ErrorSlot"]

ERROR_SLOT_WORDS = 2  # u32 words per error slot: the code (atomicMax), then the offending value


class ErrorCode(enum.IntEnum):
    """What a kernel reports in its error slot; a larger code wins when one slot sees several."""

    NONE = 0
    INDEX_OUT_OF_RANGE = 1  # the slot's value word holds the index (i32 bits)
    INT64_OUT_OF_RANGE = 2  # an int64 result left the i32 range the GPU computes in
    UINT64_OUT_OF_RANGE = 3  # a uint64 result left the u32 range the GPU computes in (or was negative)


@dataclass(frozen=True)
class ErrorSlot:
    """One checking node's slot in the error word: who reports there, for the error message.

    `detail` says what was checked (``"axis 0 of size 1024"``); it may name symbolic dims."""

    node: str
    op_type: str
    detail: str = ""
