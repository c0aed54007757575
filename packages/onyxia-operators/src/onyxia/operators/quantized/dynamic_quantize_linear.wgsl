// DynamicQuantizeLinear (uint8), as onnxruntime's CPU kernel computes it (onyxia::dynamic_quant has the
// arithmetic), in one workgroup so that a decode step's row costs one dispatch: the invocations reduce min and
// max over strided elements, then each derives scale and zero point and quantizes its elements.
// PARAMS_ONLY: only the scale and zero point are written (no y binding): the dispatch DynamicQuantizeMatMul
// runs before its product when A has too many rows for every workgroup to reduce A itself.
// Bindings: 0 x [N] (f32), [1 y [N] (uint8 stored as u32)], then y_scale [1] (f32), y_zero_point [1] (u32).
// Defs: WORKGROUP_SIZE, PARAMS_ONLY. Dims: N (elements of x; may be 0: scale 1, zero point 0).
// Dispatch: 1 workgroup.
#import onyxia::dynamic_quant::{quant_params, quantize_u8, range_of}

@group(0) @binding(0) var<storage, read> x: array<f32>;
#ifdef PARAMS_ONLY
@group(0) @binding(1) var<storage, read_write> y_scale: array<f32>;
@group(0) @binding(2) var<storage, read_write> y_zero_point: array<u32>;
#else
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@group(0) @binding(2) var<storage, read_write> y_scale: array<f32>;
@group(0) @binding(3) var<storage, read_write> y_zero_point: array<u32>;
#endif

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(@builtin(local_invocation_index) lid: u32) {
    var lo = 0.0;  // the range always includes 0
    var hi = 0.0;
    for (var i = lid; i < #{N}; i += #{WORKGROUP_SIZE}u) {
        lo = min(lo, x[i]);
        hi = max(hi, x[i]);
    }
    let p = quant_params(range_of(lid, lo, hi));
    if (lid == 0u) {
        y_scale[0] = p.x;
        y_zero_point[0] = u32(p.y);
    }
#ifndef PARAMS_ONLY
    for (var i = lid; i < #{N}; i += #{WORKGROUP_SIZE}u) {
        y[i] = quantize_u8(x[i], p);
    }
#endif
}
