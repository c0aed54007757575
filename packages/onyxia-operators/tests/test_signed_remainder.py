"""Signed remainders in shaders: `rem_i32` and `mod_floor_i32` (onyxia::math) over every sign pairing.

NVIDIA's Vulkan driver (580, on an H200) evaluates WGSL's i32 `%` as if both operands were u32 (7 % -3
gave 7, -7 % 3 gave 0), which broke Mod on signed ints and Pad's reflect and wrap; its i32 `/` is right,
so the helpers spell the remainder with `/`. lavapipe's `%` is right too, so no test here can see a `%`
coming back: the GPU test pins what the helpers compute (a GPU run of it checks that driver), and the
compile-only test pins that the kernels that met negative operands call them.
"""

from __future__ import annotations

import numpy as np
import pytest
import wgpu
from oracle import compile_model, make_model, runtime

from onyxia.core import ShaderLibrary, preprocess

I32_MIN, I32_MAX = -(2**31), 2**31 - 1

_SHADER = """#import onyxia::math::{rem_i32, mod_floor_i32}
@group(0) @binding(0) var<storage, read> pairs: array<vec2<i32>>;
@group(0) @binding(1) var<storage, read_write> results: array<vec2<i32>>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&pairs)) {
        let p = pairs[id.x];
        results[id.x] = vec2<i32>(rem_i32(p.x, p.y), mod_floor_i32(p.x, p.y));
    }
}
"""


def _expected(a: int, b: int) -> tuple[int, int]:
    """C's remainder and Python's modulo in exact integers; 0 for a zero divisor (WGSL's `%`, numpy)."""
    if b == 0:
        return 0, 0
    c_rem = abs(a) % abs(b) * (1 if a >= 0 else -1)
    return c_rem, a % b


def _run_pairs(pairs: np.ndarray) -> np.ndarray:
    """One dispatch of `_SHADER` on the tests' device; returns the [n, 2] (rem_i32, mod_floor_i32)."""
    library = ShaderLibrary()
    library.add_package("onyxia.operators", "wgsl")
    device = runtime().ctx.device
    module = device.create_shader_module(code=preprocess(_SHADER, {}, "signed_remainder", library))
    pipeline = device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"})
    source = device.create_buffer_with_data(data=pairs.tobytes(), usage=wgpu.BufferUsage.STORAGE)
    usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC
    results = device.create_buffer(size=pairs.nbytes, usage=usage)
    entries = [
        {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}} for i, b in enumerate([source, results])
    ]
    group = device.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=entries)
    encoder = device.create_command_encoder()
    compute = encoder.begin_compute_pass()
    compute.set_pipeline(pipeline)
    compute.set_bind_group(0, group)
    compute.dispatch_workgroups((len(pairs) + 63) // 64)
    compute.end()
    device.queue.submit([encoder.finish()])
    return np.frombuffer(device.queue.read_buffer(results), np.int32).reshape(-1, 2)


def test_rem_and_mod_floor_take_the_dividends_and_the_divisors_sign() -> None:
    values = [-7, -6, -3, -1, 0, 1, 3, 6, 7, I32_MIN, I32_MIN + 1, I32_MAX]
    divisors = [-7, -3, -2, -1, 0, 1, 2, 3, 7, I32_MIN, I32_MAX]
    pairs = np.array([(a, b) for a in values for b in divisors], np.int32)
    got = _run_pairs(pairs)
    expected = np.array([_expected(int(a), int(b)) for a, b in pairs], np.int32)
    wrong = np.flatnonzero((got != expected).any(axis=1))
    assert not wrong.size, [(*pairs[i], *got[i], *expected[i]) for i in wrong[:8]]  # a, b, got, expected


@pytest.mark.parametrize(
    ("op", "attrs", "call"),
    [
        ("Mod", {"fmod": 1}, "rem_i32(i32(a), i32(b))"),
        ("Mod", {"fmod": 0}, "mod_floor_i32(i32(a), i32(b))"),
        ("Pad", {"mode": "reflect"}, "mod_floor_i32(c, period)"),
        ("Pad", {"mode": "wrap"}, "mod_floor_i32(c, n)"),
    ],
)
def test_kernels_with_negative_i32_operands_call_the_helpers(op: str, attrs: dict[str, object], call: str) -> None:
    """Compile only (no GPU): the kernel text calls the helper rather than WGSL's `%`."""
    x = np.arange(-4, 4, dtype=np.int32).reshape(2, 4)
    if op == "Mod":
        inputs = {"a": x, "b": np.full((2, 4), -3, np.int32)}
        model = make_model(op, inputs, attrs)
    else:
        inputs = {"x": x, "pads": np.array([0, 2, 0, 3], np.int64)}
        model = make_model(op, inputs, attrs, initializers=["pads"])
    sources = [s.source for s in compile_model(model).shaders]
    assert len(sources) == 1
    assert call in sources[0]
