#define_import_path onyxia::dynamic_quant
// DynamicQuantizeLinear's arithmetic (uint8, one scale and zero point per tensor) as onnxruntime's CPU kernel
// computes it (GetQuantizationParameter, then MlasQuantizeLinear), shared by dynamic_quantize_linear.wgsl and
// dynamic_quantize_matmul.wgsl so that both produce the same bytes:
//   lo = min(min(x), 0), hi = max(max(x), 0)
//   scale = hi == lo ? 1 : (hi - lo) / 255
//   zero_point = round_half_even(clamp(0 - lo / scale, 0, 255))
//   y = clamp(round_half_even(x / scale) + zero_point, 0, 255)
// Every division is correctly rounded (onyxia::quant's div_rn, or `round_quotient` where it provably rounds alike):
// WGSL allows `/` 2.5 ULP, and a quotient one ULP off next to a half would move a quantized value by one. A NaN in
// x is not handled as MLAS handles it.
// `range_of` reduces the invocations' own (lo, hi) over a workgroup; min and max are exact, so any order of
// reduction gives onnxruntime's range.
// Reads def WORKGROUP_SIZE (a power of two: the invocations of the workgroup that calls `range_of`).
#import onyxia::quant::{div_rn}

var<workgroup> lows: array<f32, #{WORKGROUP_SIZE}>;
var<workgroup> highs: array<f32, #{WORKGROUP_SIZE}>;

// x / y correctly rounded for any sign of x (div_rn takes positive operands); y > 0
fn signed_div(x: f32, y: f32) -> f32 {
    let q = div_rn(abs(x), y);
    return select(q, -q, x < 0.0);
}

// The workgroup's range (low, high) from each invocation's (lo, hi), both starting at 0 (the range always
// includes 0). Every invocation of the workgroup must call it, in uniform control flow (it has barriers).
fn range_of(lid: u32, lo: f32, hi: f32) -> vec2<f32> {
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
    return vec2<f32>(lows[0], highs[0]);
}

// (scale, zero point) of the range (low, high), low <= 0 <= high; the zero point is a whole number 0 .. 255
fn quant_params(range: vec2<f32>) -> vec2<f32> {
    let scale = select(div_rn(range.y - range.x, 255.0), 1.0, range.y == range.x);
    // qmin - low / scale with qmin 0 and low <= 0 is -low / scale
    return vec2<f32>(scale, round(clamp(div_rn(-range.x, scale), 0.0, 255.0)));
}

// round_half_even(x / scale) with the quotient correctly rounded, mostly without div_rn's long division (the
// costliest step of a product that quantizes its own rows): WGSL's `/` is within 2.5 ULP of the exact quotient and
// div_rn within 0.5, so both round to the same whole number unless the quotient lies within 3 ULP of a half; a
// quotient nearer a half than 2^-16 of itself (over 100 ULP, so any `/` within that bound is safe) takes div_rn.
fn round_quotient(x: f32, scale: f32) -> f32 {
    let q = x / scale;
    if (abs(fract(abs(q)) - 0.5) > abs(q) * 0x1p-16f) {
        return round(q);
    }
    return round(signed_div(x, scale));
}

// x quantized with (scale, zero point) `p`: 0 .. 255
fn quantize_u8(x: f32, p: vec2<f32>) -> u32 {
    return u32(clamp(round_quotient(x, p.x) + p.y, 0.0, 255.0));
}
