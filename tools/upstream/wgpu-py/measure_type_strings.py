"""Time wgpu-py's cffi set-up and the C type strings Onyxia's path parses, with whichever cffi is first on the path.

    .venv/bin/python tools/upstream/wgpu-py/measure_type_strings.py                 # the installed cffi
    PYTHONPATH=/tmp/cffi-patched .venv/bin/python tools/upstream/wgpu-py/measure_type_strings.py

(/tmp/cffi-patched: a copy of the installed `cffi` package with ../cffi/*.patch applied; see NOTE.md.)
The strings are `onyxia.runtime.ffi_warmup.PATH_TYPES`, each parsed the way `ffi.new` / `ffi.callback`
parse it, in a process that has not parsed any of them yet.
"""

from __future__ import annotations

import time

began = time.perf_counter()
import cffi  # noqa: E402 - the import is part of what is timed
from wgpu.backends.wgpu_native._ffi import ffi  # noqa: E402

from onyxia.runtime.ffi_warmup import PATH_TYPES  # noqa: E402

set_up = time.perf_counter() - began
times = []
for cdecl in PATH_TYPES:
    start = time.perf_counter()
    ffi._typeof(cdecl, consider_function_as_funcptr=True)
    times.append(time.perf_counter() - start)
print(
    f"cffi at {cffi.__file__}: import + cdef {set_up:.3f} s; {len(times)} type strings "
    f"{sum(times):.3f} s (slowest {max(times) * 1e3:.1f} ms)"
)
