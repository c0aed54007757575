"""The runtime's pure helpers: workgroup splitting, buffer growth, dtype conversion, the uniform rewrite."""

from __future__ import annotations

import numpy as np
import pytest

from onyxia.core import CompiledShader, DataType, DeviceError, InputError
from onyxia.runtime.buffers import grown_size
from onyxia.runtime.convert import from_gpu, padded_nbytes, storage_bytes, to_gpu
from onyxia.runtime.layout import split_workgroups
from onyxia.runtime.pipelines import UNIFORM_DECLARATION, rewrite_immediates


@pytest.mark.parametrize(
    ("wg", "expected"),
    [
        ((10, 1, 1), (10, 1, 1)),
        ((65535, 1, 1), (65535, 1, 1)),
        ((70000, 1, 1), (35000, 2, 1)),
        ((65535 * 3 + 1, 1, 1), (49152, 4, 1)),
        ((0, 1, 1), None),
        ((5, 0, 1), None),
        ((4, 4, 4), (4, 4, 4)),
    ],
)
def test_split_workgroups(wg: tuple[int, int, int], expected: tuple[int, int, int] | None) -> None:
    result = split_workgroups(wg, 65535, "node 'n'")
    assert result == expected
    if result is not None:
        assert result[0] * result[1] >= wg[0] and max(result) <= 65535


def test_split_refuses_multi_dimensional_overflow() -> None:
    with pytest.raises(DeviceError, match=r"node 'n': dispatch of \(70000, 2, 1\) workgroups exceeds"):
        split_workgroups((70000, 2, 1), 65535, "node 'n'")


def test_buffer_sizes() -> None:
    assert [padded_nbytes(n) for n in (0, 1, 4, 5, 10)] == [4, 4, 4, 8, 12]
    assert grown_size(1000, 800, 1 << 30) == 1280  # 1.5x the old size, 256-aligned
    assert grown_size(5000, 800, 1 << 30) == 5120
    assert grown_size(1000, 800, 1000) == 1000  # never past the adapter limit


def test_gpu_storage_forms() -> None:
    assert to_gpu("t", DataType.INT64, np.array([1, -2], np.int64), InputError).dtype == np.int32
    assert to_gpu("t", DataType.BOOL, np.array([True]), InputError).dtype == np.uint32
    assert to_gpu("t", DataType.UINT8, np.array([255], np.uint8), InputError).tolist() == [255]
    with pytest.raises(InputError, match=r"weight 'w': int64 values range over \[-2147483649, 0\]"):
        to_gpu("weight 'w'", DataType.INT64, np.array([-(2**31) - 1, 0], np.int64), InputError)
    assert len(storage_bytes(np.ones(3, np.float16))) == 8


def test_readback_forms() -> None:
    raw = np.array([0, 1, 7, -3], np.int32).tobytes()
    assert from_gpu(DataType.BOOL, raw, 0, (2, 2)).tolist() == [[False, True], [True, True]]
    ints = from_gpu(DataType.INT64, raw, 4, (3,))
    assert ints.dtype == np.int64 and ints.tolist() == [1, 7, -3]
    assert from_gpu(DataType.FLOAT, b"", 0, (0, 5)).shape == (0, 5)


def test_uniform_rewrite() -> None:
    source = "struct Immediates { N: u32, }\nvar<immediate> imm: Immediates;\nfn main() {}"
    rewritten = rewrite_immediates(CompiledShader("s", source, "main", 4))
    assert UNIFORM_DECLARATION in rewritten and "var<immediate>" not in rewritten
    assert rewrite_immediates(CompiledShader("s", "fn main() {}")) == "fn main() {}"
