#define_import_path onyxia::requant
// onnxruntime's requantization of an exact int32 sum (MLAS MlasRequantizeOutput, the epilogue of QLinearMatMul,
// QLinearConv and QGemm's quantized output), shared by qlinear_matmul.wgsl and conv_integer.wgsl so both
// produce onnxruntime's bytes:
//   multiplier = a_scale * b_scale / y_scale                 (f32, each step correctly rounded; QGemm's
//                                                             alpha * a_scale * b_scale first, left to right)
//   y = round_half_even(clamp(f32(acc) * multiplier, LO - zp, HI - zp)) + zp
// The division is onyxia::quant's div_rn: WGSL allows `/` 2.5 ULP, and a multiplier one ULP off moves any
// product that lies next to a half. Clamping before rounding equals clamping after (the bounds are whole).
// Reads no defs.
#import onyxia::quant::{div_rn}

// p / y (p the product of the input scales) correctly rounded, for scales of any sign
fn output_multiplier(p: f32, y: f32) -> f32 {
    let q = div_rn(abs(p), abs(y));
    return select(q, -q, (p < 0.0) != (y < 0.0));
}

// acc requantized with `multiplier` and zero point `zp` into the integer range [lo, hi]
fn requantize(acc: i32, multiplier: f32, zp: i32, lo: i32, hi: i32) -> i32 {
    let v = clamp(f32(acc) * multiplier, f32(lo - zp), f32(hi - zp));
    return i32(round(v)) + zp;
}
