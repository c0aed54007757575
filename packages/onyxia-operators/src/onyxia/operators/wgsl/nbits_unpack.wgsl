#define_import_path onyxia::nbits_unpack
// MatMulNBits' weight words unpacked into floats, eight nibbles a word (matmul_nbits.wgsl documents the defs read
// here: CODEBOOK, A_SUMS).
#import onyxia::nbits_activations

#ifdef CODEBOOK
// MatMulBnb4: a nibble is an index into bitsandbytes' FP4 or NF4 table (a `var<private>`: WGSL indexes an array
// value by a runtime index only in memory), and each byte holds its two elements high nibble first
var<private> codebook: array<f32, 16> = array<f32, 16>(#{CODEBOOK});

fn decode4(codes: vec4<u32>) -> vec4<f32> {
    return vec4<f32>(codebook[codes.x], codebook[codes.y], codebook[codes.z], codebook[codes.w]);
}

fn unpack_nibbles(word: u32) -> Eight {
    let shifts = vec4<u32>(4u, 0u, 12u, 8u);
    let lo = decode4((vec4<u32>(word) >> shifts) & vec4<u32>(15u));
    let hi = decode4((vec4<u32>(word >> 16u) >> shifts) & vec4<u32>(15u));
    return Eight(lo, hi);
}
#else
#ifdef A_SUMS
fn unpack_nibbles(word: u32) -> Eight {
    let shifts = vec4<u32>(0u, 4u, 8u, 12u);
    let lo = vec4<f32>((vec4<u32>(word) >> shifts) & vec4<u32>(15u));
    let hi = vec4<f32>((vec4<u32>(word >> 16u) >> shifts) & vec4<u32>(15u));
    return Eight(lo, hi);
}
#else
// ZP none: the nibbles minus their zero point 8, exactly (the float 2^23 + n from its bits, minus 2^23 + 8), so the
// block sums need no sum of a
fn unpack_nibbles(word: u32) -> Eight {
    let shifts = vec4<u32>(0u, 4u, 8u, 12u);
    let bits = vec4<u32>(0x4b000000u);
    let lo = bitcast<vec4<f32>>(((vec4<u32>(word) >> shifts) & vec4<u32>(15u)) | bits) - vec4<f32>(8388616.0);
    let hi = bitcast<vec4<f32>>(((vec4<u32>(word >> 16u) >> shifts) & vec4<u32>(15u)) | bits) - vec4<f32>(8388616.0);
    return Eight(lo, hi);
}
#endif
#endif

fn dot8(x: Eight, q: Eight) -> f32 {
    return dot(x.lo, q.lo) + dot(x.hi, q.hi);
}
