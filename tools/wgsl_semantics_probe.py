"""Print how this adapter evaluates the WGSL expressions whose results adapters may differ on.

Integer remainder and division of negative operands, float-to-integer conversion of negative and
out-of-range values, shifts by the type's width or more, min/max/clamp with NaN, division by zero,
denormal literals and inputs, exp/cosh near overflow and rounding at halves. Each line reads
`expression inputs -> result`; run it on two adapters and compare (lavapipe is the reference machine).
Every operand is read from a storage buffer so that no expression is folded at shader creation.

    python tools/wgsl_semantics_probe.py
"""

from __future__ import annotations

import numpy as np
import wgpu

# (label, result type, WGSL expression over a, b (i32), x, y (f32), u (u32))
CASES: list[tuple[str, str, str]] = [
    ("a % b", "i32", "a % b"),
    ("a / b", "i32", "a / b"),
    ("a - b * (a / b)", "i32", "a - b * (a / b)"),
    ("i32(x)", "i32", "i32(x)"),
    ("u32(x)", "u32", "u32(x)"),
    ("u32(a)", "u32", "u32(a)"),
    ("u << u32(b)", "u32", "u << u32(b)"),
    ("u >> u32(b)", "u32", "u >> u32(b)"),
    ("a >> u32(b)", "i32", "a >> u32(b)"),
    ("max(x, y)", "f32", "max(x, y)"),
    ("min(x, y)", "f32", "min(x, y)"),
    ("clamp(x, y, 1e9)", "f32", "clamp(x, y, 1e9)"),
    ("x / y", "f32", "x / y"),
    ("x * y", "f32", "x * y"),
    ("exp(x)", "f32", "exp(x)"),
    ("round(x)", "f32", "round(x)"),
    ("floor(x + 0.5)", "f32", "floor(x + 0.5)"),
    ("x * 3.0 + y", "f32", "x * 3.0 + y"),
    ("select(x, y, x != x)", "f32", "select(x, y, x != x)"),
]

INTS = [(7, -3), (-7, 3), (-4, 2), (-7, -3), (5, 0), (1, 33), (1, 32), (-8, 1)]
FLOATS = [
    (-1.5, 0.0),
    (-0.4, 1.0),
    (np.nan, 0.0),
    (0.0, np.nan),
    (0.0, 0.0),
    (1.0, 0.0),
    (89.0, 1.0),
    (2.5, 1.0),
    (-2.5, 1.0),
    (1e-45, 1.0),
    (3e9, 1.0),
    (-0.3333333, 1.0),
]


def _shader(result: str, expression: str) -> str:
    return f"""
@group(0) @binding(0) var<storage, read> ints: array<vec2<i32>>;
@group(0) @binding(1) var<storage, read> floats: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read_write> out: array<{result}>;
@compute @workgroup_size(1)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {{
    let a = ints[id.x].x;
    let b = ints[id.x].y;
    let x = floats[id.x].x;
    let y = floats[id.x].y;
    let u = u32(abs(a));
    out[id.x] = {expression};
}}
"""


def main() -> None:
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    device = adapter.request_device_sync()
    print(f"adapter: {adapter.info['device']} ({adapter.info['backend_type']}, {adapter.info['description']})")
    count = max(len(INTS), len(FLOATS))
    ints = np.zeros((count, 2), np.int32)
    ints[: len(INTS)] = INTS
    floats = np.zeros((count, 2), np.float32)
    floats[: len(FLOATS)] = FLOATS
    usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC
    inputs = [device.create_buffer_with_data(data=array.tobytes(), usage=usage) for array in (ints, floats)]
    for label, result, expression in CASES:
        out = device.create_buffer(size=count * 4, usage=usage)
        module = device.create_shader_module(code=_shader(result, expression))
        pipeline = device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"})
        entries = [{"binding": i, "resource": {"buffer": b}} for i, b in enumerate([*inputs, out])]
        group = device.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=entries)
        encoder = device.create_command_encoder()
        compute = encoder.begin_compute_pass()
        compute.set_pipeline(pipeline)
        compute.set_bind_group(0, group)
        compute.dispatch_workgroups(count)
        compute.end()
        device.queue.submit([encoder.finish()])
        values = np.frombuffer(
            device.queue.read_buffer(out), {"i32": np.int32, "u32": np.uint32, "f32": np.float32}[result]
        )
        uses_ints = any(name in expression for name in ("a", "b", "u")) and "x" not in expression
        pairs = INTS if uses_ints else FLOATS
        shown = ", ".join(f"{p}->{v!r}" for p, v in zip(pairs, values.tolist()))
        print(f"{label:22s} {shown}")


if __name__ == "__main__":
    main()
