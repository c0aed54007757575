// DynamicQuantizeLinear (uint8), as onnxruntime's CPU kernel computes it (GetQuantizationParameter, then
// MlasQuantizeLinear), in one workgroup so that a decode step's row costs one dispatch:
//   lo = min(min(x), 0), hi = max(max(x), 0)
//   scale = hi == lo ? 1 : (hi - lo) / 255
//   zero_point = round_half_even(clamp(0 - lo / scale, 0, 255))
//   y = clamp(round_half_even(x / scale) + zero_point, 0, 255)
// Every division is correctly rounded (onyxia::quant's div_rn): WGSL allows `/` 2.5 ULP, and a quotient one ULP
// off next to a half would move a quantized value by one. A NaN in x is not handled as MLAS handles it.
// The threads first reduce min and max over strided elements, then thread 0 derives scale and zero point into
// workgroup memory, then all threads quantize.
// Bindings: 0 x [N] (f32), 1 y [N] (uint8 stored as u32), 2 y_scale [1] (f32), 3 y_zero_point [1] (u32).
// Defs: WORKGROUP_SIZE. Dims: N (elements of x; may be 0: scale 1, zero point 0).
#import onyxia::quant::{div_rn}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@group(0) @binding(2) var<storage, read_write> y_scale: array<f32>;
@group(0) @binding(3) var<storage, read_write> y_zero_point: array<u32>;

var<workgroup> lows: array<f32, #{WORKGROUP_SIZE}>;
var<workgroup> highs: array<f32, #{WORKGROUP_SIZE}>;
var<workgroup> params: vec2<f32>;  // scale, zero point

// x / y correctly rounded for any sign of x (div_rn takes positive operands); y > 0
fn signed_div(x: f32, y: f32) -> f32 {
    let q = div_rn(abs(x), y);
    return select(q, -q, x < 0.0);
}

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(@builtin(local_invocation_index) lid: u32) {
    var lo = 0.0;  // the range always includes 0
    var hi = 0.0;
    for (var i = lid; i < #{N}; i += #{WORKGROUP_SIZE}u) {
        lo = min(lo, x[i]);
        hi = max(hi, x[i]);
    }
    lows[lid] = lo;
    highs[lid] = hi;
    workgroupBarrier();
    for (var stride = #{WORKGROUP_SIZE}u / 2u; stride > 0u; stride /= 2u) {
        if (lid < stride) {
            lows[lid] = min(lows[lid], lows[lid + stride]);
            highs[lid] = max(highs[lid], highs[lid + stride]);
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        let low = lows[0];
        let high = highs[0];
        let scale = select(div_rn(high - low, 255.0), 1.0, high == low);
        // qmin - low / scale with qmin 0 and low <= 0 is -low / scale
        let zero_point = round(clamp(div_rn(-low, scale), 0.0, 255.0));
        params = vec2<f32>(scale, zero_point);
        y_scale[0] = scale;
        y_zero_point[0] = u32(zero_point);
    }
    workgroupBarrier();
    let p = workgroupUniformLoad(&params);
    for (var i = lid; i < #{N}; i += #{WORKGROUP_SIZE}u) {
        y[i] = u32(clamp(round(signed_div(x[i], p.x)) + p.y, 0.0, 255.0));
    }
}
