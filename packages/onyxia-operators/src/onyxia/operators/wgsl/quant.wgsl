#define_import_path onyxia::quant
// onnxruntime's int8 activation quantization (MLAS QuantizeARow_CompInt8, MatMulNBits accuracy_level 4), shared by
// matmul_nbits_quantize.wgsl (a dispatch quantizing A for the prefill kernel), matmul_nbits.wgsl (a decode
// workgroup quantizing its one row of A into workgroup memory) and normalization.wgsl (INT8_A: a norm quantizing
// the rows it writes), so all produce the same int8 values:
//   amax = max |a| over the block's elements (the padded tail past K counts as 0)
//   qa[k] = round_half_even(a[k] * (127 / amax))   (0 when amax is 0)
//   sa = amax / 127
// Reads no defs.

// x / y correctly rounded, for positive normal x and y with a normal quotient (else WGSL's division).
// WGSL allows 2.5 ULP for `/`; a quotient one ULP off would move qa[k] by 1 whenever a[k] * (127 / amax)
// lies that close to a half, so the int8 values would no longer be onnxruntime's. Long division of the
// 24-bit significands gives 24 quotient bits plus a guard bit; the remainder is the sticky bit.
fn div_rn(x: f32, y: f32) -> f32 {
    let bx = bitcast<u32>(x);
    let by = bitcast<u32>(y);
    let ex = i32(bx >> 23u);
    let ey = i32(by >> 23u);
    if (ex == 0 || ey == 0 || ex >= 255 || ey >= 255) {
        return x / y;
    }
    let my = (by & 0x7fffffu) | 0x800000u;
    var r = (bx & 0x7fffffu) | 0x800000u;
    var e = ex - ey + 127;
    if (r < my) {
        r <<= 1u;
        e -= 1;
    }
    var q = 0u;
    for (var i = 0u; i < 25u; i++) {
        q <<= 1u;
        if (r >= my) {
            r -= my;
            q |= 1u;
        }
        r <<= 1u;
    }
    let guard = q & 1u;
    q >>= 1u;
    if (guard == 1u && (r != 0u || (q & 1u) == 1u)) {
        q += 1u;
    }
    if (q == 0x1000000u) {
        q >>= 1u;
        e += 1;
    }
    if (e <= 0 || e >= 255) {
        return x / y;
    }
    return bitcast<f32>((u32(e) << 23u) | (q & 0x7fffffu));
}

// A block's (multiplier, scale) from its amax: qa = round(a * multiplier), a ~ qa * scale.
fn int8_block(amax: f32) -> vec2<f32> {
    return vec2<f32>(select(0.0, div_rn(127.0, amax), amax != 0.0), div_rn(amax, 127.0));
}

// Four values quantized with a block's multiplier (WGSL round is half to even, like MLAS's).
fn int8_round(values: vec4<f32>, multiplier: f32) -> vec4<f32> {
    return round(values * multiplier);
}

// Four int8 values (integer-valued f32 in [-127, 127]) as the bytes of a u32, element 0 lowest: how the quantized
// rows are stored (the GEMM loads a lane's 8 values as two words, not eight floats).
fn int8_packed(v: vec4<f32>) -> u32 {
    let b = bitcast<vec4<u32>>(vec4<i32>(v)) & vec4<u32>(0xffu);
    return b.x | (b.y << 8u) | (b.z << 16u) | (b.w << 24u);
}
