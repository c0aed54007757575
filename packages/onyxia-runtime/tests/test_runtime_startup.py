"""Start-up costs a new process pays once: wgpu-py's C type strings parsed in one pass (runtime/ffi_warmup.py).

The warmed types must be exactly the ones cffi would parse lazily, and the path from `Runtime()` to a
run's result must meet no type string outside the warmed set (a wgpu-py change that adds one shows here).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cffi
import pytest
from wgpu.backends.wgpu_native._ffi import get_wgpu_header

from onyxia.runtime import ffi_warmup

# One plan with a weight (upload and its queue drain), a dispatch (bind group, pass) and a readback.
_PATH = """
import sys
sys.path.insert(0, {tests!r})
import numpy as np
from wgpu.backends.wgpu_native._ffi import ffi
from onyxia.core import DataType
from onyxia.runtime import Runtime, ffi_warmup
from runtime_plans import SCALE_WGSL, ElementwiseSpec, build_plan

before = set(ffi._parsed_types)
spec = ElementwiseSpec()
spec.input("x", DataType.FLOAT, [8])
w = spec.weight("w", np.full(8, 3.0, np.float32))
spec.output("y", DataType.FLOAT, [8])

def plan(ctx):
    defs = {{"T": "f32", "OUT_T": "f32", "EXPR": "x[i] * 2.0", "WG": 64, "HEADER": ""}}
    shader = ctx.compile_shader("scale", SCALE_WGSL, defs, {{"N": 8}})
    ctx.dispatch(shader, [ctx.input(1)], [ctx.output(0)], 1)

executor = Runtime().load_model(build_plan(spec, plan, [w]))
y = executor.run({{"x": np.zeros(8, np.float32)}})["y"]
assert (y == 6.0).all(), y
lazily = set(ffi._parsed_types) - before - set(ffi_warmup.PATH_TYPES)
assert not lazily, f"parsed outside the warm-up: {{sorted(lazily)}}"
"""


def _fresh_ffi() -> cffi.FFI:
    ffi = cffi.FFI()
    ffi.cdef(get_wgpu_header())
    return ffi


def test_warmed_types_are_the_ones_cffi_parses() -> None:
    warmed, lazy = _fresh_ffi(), _fresh_ffi()
    assert ffi_warmup._parse_all(warmed, list(ffi_warmup.PATH_TYPES)) == len(ffi_warmup.PATH_TYPES)
    assert ffi_warmup._parse_all(warmed, list(ffi_warmup.PATH_TYPES)) == 0  # already there
    for cdecl in ffi_warmup.PATH_TYPES:
        lazy._typeof(cdecl, consider_function_as_funcptr=True)  # what ffi.new / ffi.callback parse
        (a, a_function), (b, b_function) = warmed._parsed_types[cdecl], lazy._parsed_types[cdecl]
        assert (warmed.getctype(a), a.kind, a_function) == (lazy.getctype(b), b.kind, b_function), cdecl
        if a.kind != "function" and not cdecl.endswith("[]"):  # open arrays have no size
            assert warmed.sizeof(a) == lazy.sizeof(b), cdecl


def test_a_string_that_does_not_parse_leaves_the_cache_alone() -> None:
    ffi = _fresh_ffi()
    assert ffi_warmup._parse_all(ffi, []) == 0
    with pytest.raises(cffi.CDefError, match="NoSuchType"):  # `warm` turns this into a debug line
        ffi_warmup._parse_all(ffi, ["WGPUBufferDescriptor *", "NoSuchType *"])
    assert "WGPUBufferDescriptor *" not in ffi._parsed_types
    assert ffi_warmup.warm(["NoSuchType *"]) == 0


def test_the_load_path_parses_no_type_string_outside_the_warm_up() -> None:
    code = _PATH.format(tests=str(Path(__file__).parent))
    subprocess.run([sys.executable, "-c", code], check=True)
