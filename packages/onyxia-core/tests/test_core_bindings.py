"""The binding limit (default, setting, override) and `split_rows`: aligned, balanced, within the limit."""

from __future__ import annotations

import pytest

from onyxia.core import BINDING_ALIGNMENT, MAX_BINDING_BYTES, Chunk, PlanningError, binding_limit, max_binding_bytes
from onyxia.core.bindings import split_rows
from onyxia.core.settings import Settings, SettingsError, override


def test_limit_default_env_and_override() -> None:
    with override(max_binding_bytes=None):
        assert max_binding_bytes() == MAX_BINDING_BYTES == 128 << 20
    from_env = Settings.from_environ({"ONYXIA_MAX_BINDING_BYTES": "0x10000"})
    with override(max_binding_bytes=from_env.max_binding_bytes):
        assert max_binding_bytes() == 65536
        with binding_limit(4096):
            assert max_binding_bytes() == 4096
        assert max_binding_bytes() == 65536
    with pytest.raises(SettingsError, match=r"ONYXIA_MAX_BINDING_BYTES='lots': expected an integer"):
        Settings.from_environ({"ONYXIA_MAX_BINDING_BYTES": "lots"})
    with pytest.raises(SettingsError, match=r"ONYXIA_MAX_BINDING_BYTES='100': .* must be >= 256"):
        Settings.from_environ({"ONYXIA_MAX_BINDING_BYTES": "100"})
    with pytest.raises(SettingsError, match=r"'max_binding_bytes' must be >= 256, got 100"), binding_limit(100):
        pass


def test_fitting_input_is_one_whole_chunk() -> None:
    assert split_rows(100, 640, 64000, "t") == [Chunk(0, None, 0, 100)]


@pytest.mark.parametrize(
    ("rows", "row_bytes", "limit"),
    [(262144, 2560, 128 << 20), (262144, 1280, 128 << 20), (1000, 160, 65536), (70, 2400, 65536), (999, 6, 1000)],
)
def test_chunks_cover_every_row_once_aligned_and_within_the_limit(rows: int, row_bytes: int, limit: int) -> None:
    chunks = split_rows(rows, row_bytes, limit, "t")
    assert len(chunks) > 1
    assert [c.first_row for c in chunks] == [sum(c.rows for c in chunks[:i]) for i in range(len(chunks))]
    assert sum(c.rows for c in chunks) == rows
    for c in chunks:
        assert c.offset == c.first_row * row_bytes and c.offset % BINDING_ALIGNMENT == 0
        assert c.size == c.rows * row_bytes <= limit
    assert max(c.rows for c in chunks) - min(c.rows for c in chunks) <= 256  # balanced, no sliver at the end


def test_the_gemma_embedding_splits_in_six() -> None:
    assert [c.rows for c in split_rows(262144, 640 * 4, MAX_BINDING_BYTES, "t")] == [43691] * 5 + [43689]


def test_a_range_too_big_for_the_limit_names_where() -> None:
    with pytest.raises(PlanningError, match=r"node 'n' \(MatMul\): input 1: rows are 1000 bytes.*\(32 rows\) exceeds"):
        split_rows(100, 1000, 16000, "node 'n' (MatMul): input 1")
