#define_import_path onyxia::rounding
// A value rounded as storing it in an f16 buffer would round it, for fused kernels that must reproduce an
// unfused graph's f16 intermediates. `f32(f16(x))` does not do it: Mesa's NIR folds that round trip to x
// (an inexact algebraic rule, allowed since naga marks nothing exact), and f16 arithmetic may be widened the
// same way. Scaling by powers of two and `round` (half to even) are exact, so no compiler may drop them.
// Reads no defs.

// x rounded to the nearest f16 (ties to even), as an f32; beyond f16's range it is +-inf, NaN stays NaN.
fn round_to_f16(x: f32) -> f32 {
    let bits = bitcast<u32>(x) & 0x7fffffffu;  // compared as bits: a compiler may assume `x != x` is false
    if (bits > 0x7f800000u) {
        return x;  // NaN
    }
    if (bits >= 0x477ff000u) {  // 65520 and above (inf too) round past f16's largest, 65504
        return bitcast<f32>((bitcast<u32>(x) & 0x80000000u) | 0x7f800000u);
    }
    // f16 keeps 10 bits below the leading one, and steps of 2^-24 below 2^-14 (subnormals)
    let exponent = max(i32(bits >> 23u) - 127, -14);
    let step = bitcast<f32>(u32(exponent - 10 + 127) << 23u);
    let inverse = bitcast<f32>(u32(127 - (exponent - 10)) << 23u);
    return round(x * inverse) * step;
}
