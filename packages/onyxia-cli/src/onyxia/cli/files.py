"""Reading user arrays and writing results, with every failure one `InputError` naming the file.

A ``.npy`` header is checked against the file's size before numpy allocates anything, so a
truncated or empty file, or a header claiming 2^40 elements, is a one-line error and not an
EOFError or a MemoryError. Outputs are written to a temporary file beside the target and renamed
into place, so a failure (or Ctrl-C) never leaves a half-written file under the requested name.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

from onyxia.core import InputError

__all__ = ["atomic_output", "load_npy"]


def load_npy(path: str | Path, what: str) -> np.ndarray:
    """The array in `path`; `what` names it in errors (e.g. ``--input x``)."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            shape, dtype = _header(f, path, what)
            needed = f.tell() + math.prod(shape) * dtype.itemsize
            if needed > size:
                raise InputError(
                    f"{what}: '{path}' is truncated: its header says {dtype}{list(shape)} "
                    f"({needed} bytes with the header), but the file has {size} bytes"
                )
            f.seek(0)
            array = np.load(f, allow_pickle=False)
    except InputError:
        raise
    except (OSError, ValueError, EOFError, MemoryError) as e:
        raise InputError(f"{what}: cannot read '{path}' as a .npy array: {e}") from e
    if not isinstance(array, np.ndarray):
        raise InputError(f"{what}: '{path}' is an archive; give one .npy file per input")
    return array


def _header(f: BinaryIO, path: Path, what: str) -> tuple[tuple[int, ...], np.dtype]:
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = fmt.read_array_header_1_0(f)
        else:
            shape, _, dtype = fmt.read_array_header_2_0(f)
    except (ValueError, EOFError) as e:
        reason = "the file is empty" if not path.stat().st_size else str(e) or "truncated header"
        raise InputError(f"{what}: '{path}' is not a .npy array ({reason})") from e
    if dtype.hasobject:
        raise InputError(f"{what}: '{path}' holds Python objects ({dtype}); only numeric arrays can be read")
    return tuple(shape), dtype


@contextlib.contextmanager
def atomic_output(path: Path) -> Iterator[Path]:
    """A temporary path beside `path`, renamed onto it when the block finishes without error."""
    try:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise InputError(f"cannot write '{path}': {e.strerror or e}") from e
    os.close(fd)
    temporary = Path(name)
    try:
        yield temporary
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp's 0600 would outlive the rename
        os.replace(temporary, path)
    except OSError as e:
        raise InputError(f"cannot write '{path}': {e.strerror or e}") from e
    finally:
        temporary.unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
