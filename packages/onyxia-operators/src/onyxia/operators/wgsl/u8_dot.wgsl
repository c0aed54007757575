#define_import_path onyxia::u8_dot
// Exact 8-bit products in 32-bit integers (onnxruntime's int32 accumulation, wrapping like it on overflow),
// shared by matmul_integer.wgsl and dynamic_quantize_matmul.wgsl. Both operands are bytes in "u8 form" (int8
// values offset by 128: the byte XOR 0x80), so that four k at a time multiply with dot4U8Packed whatever the
// signedness: with u = x ^ XOR and zu = z ^ XOR,
//   sum_k (a - za)(b - zb) = sum_k ua ub - zub sum_k ua - zua sum_k ub + K zua zub   (mod 2^32, exact in i32).
// The sums of ua and ub are dot4U8Packed with 0x01010101. naga implements the packed dot product on every backend,
// as the device's instruction where it has one (SPIR-V DotProduct, HLSL SM 6.4) and as shifts and masks elsewhere.
// Bytes past K must be 0 in both operands (they then add nothing to any sum). Reads no defs.

const ONES: u32 = 0x01010101u;

// One row of a against 4 columns of b: sum ua ub per column, sum ub per column, sum ua.
struct U8Sums {
    ab: vec4<u32>,
    b: vec4<u32>,
    a: u32,
}

// `sums` plus one word of a (4 k) against the same word of 4 columns of b
fn u8_accumulate(sums: U8Sums, aw: u32, bw: vec4<u32>) -> U8Sums {
    var s = sums;
    s.ab += vec4<u32>(dot4U8Packed(aw, bw.x), dot4U8Packed(aw, bw.y), dot4U8Packed(aw, bw.z), dot4U8Packed(aw, bw.w));
    s.b += vec4<u32>(dot4U8Packed(bw.x, ONES), dot4U8Packed(bw.y, ONES), dot4U8Packed(bw.z, ONES), dot4U8Packed(bw.w, ONES));
    s.a += dot4U8Packed(aw, ONES);
    return s;
}

// The 4 products sum_k (a - za)(b - zb) over k < `k`, from the sums and the u8-form zero points
fn u8_products(s: U8Sums, za: u32, zb: vec4<u32>, k: u32) -> vec4<i32> {
    return bitcast<vec4<i32>>(s.ab - zb * s.a - za * s.b + k * za * zb);
}
