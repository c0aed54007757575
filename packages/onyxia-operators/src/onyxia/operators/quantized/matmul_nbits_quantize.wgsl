// MatMulNBits at accuracy_level 4: quantize each row of A to int8 per block, as onnxruntime's CPU kernel does
// (MLAS QuantizeARow_CompInt8, the CompInt8 path), before matmul_nbits.wgsl with INT8 multiplies:
//   amax = max |a| over the block's elements (the padded tail past K counts as 0)
//   qa[k] = round_half_even(a[k] * (127 / amax))   (0 when amax is 0)
//   sa = amax / 127
// The int8 values are stored as integer-valued f32, so the GEMM's f32 sums of qa * nibble stay exact integers
// (|sum| <= 256 * 127 * 15 < 2^24) and it can keep its float dot products.
//
// One thread per (row, block), reading and writing vec4s (4 elements; K % 4 == 0 with A_VEC4, else scalar reads
// of a). Bindings: 0 a [M, K] (A_T), 1 qa [M, NB * BLOCK_SIZE] (f32 vec4s, the tail zeroed), 2 sa [NB, MP] (f32;
//   block-major, so the GEMM reads 4 rows' scales as one vec4).
// Defs: A_T             f32 | f16; F16 flag when f16 (MLAS widens f16 activations to f32 first: exact)
//       A_VEC4          flag: K % 4 == 0, so a's 4-element groups are aligned vec4s
//       BLOCK_SIZE      elements per block (a power of two, 16 .. 256)
//       WORKGROUP_SIZE
// Dims: K, NB (blocks per row), ROW_BLOCKS (M * NB), MP (M rounded up to a multiple of 4)
#ifdef F16
enable f16;
#endif
#import onyxia::indexing

#ifdef A_VEC4
@group(0) @binding(0) var<storage, read> a: array<vec4<#{A_T}>>;
#else
@group(0) @binding(0) var<storage, read> a: array<#{A_T}>;
#endif
@group(0) @binding(1) var<storage, read_write> qa: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> sa: array<f32>;

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

// Elements k .. k + 3 of a (flat index, k % 4 == 0); zero at and past `end`.
fn a_four(k: u32, end: u32) -> vec4<f32> {
#ifdef A_VEC4
    return select(vec4<f32>(0.0), vec4<f32>(a[k / 4u]), k < end);  // end - k is a multiple of 4
#else
    var v = vec4<f32>(0.0);
    for (var j = 0u; j < 4u; j++) {
        if (k + j < end) {
            v[j] = f32(a[k + j]);
        }
    }
    return v;
#endif
}

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = flat_invocation(wid, nwg, lid, #{WORKGROUP_SIZE}u);
    if (i >= #{ROW_BLOCKS}) {
        return;
    }
    let m = i / #{NB};
    let blk = i % #{NB};
    let k0 = blk * #{BLOCK_SIZE}u;
    let src = m * #{K} + k0;
    let end = src + min(#{BLOCK_SIZE}u, #{K} - k0);
    var amax4 = vec4<f32>(0.0);
    for (var j = 0u; j < #{BLOCK_SIZE}u; j += 4u) {
        amax4 = max(amax4, abs(a_four(src + j, end)));
    }
    let amax = max(max(amax4.x, amax4.y), max(amax4.z, amax4.w));
    let inverse = select(0.0, div_rn(127.0, amax), amax != 0.0);
    sa[blk * #{MP} + m] = div_rn(amax, 127.0);
    let dst = i * #{BLOCK_SIZE}u / 4u;
    for (var j = 0u; j < #{BLOCK_SIZE}u; j += 4u) {
        qa[dst + j / 4u] = round(a_four(src + j, end) * inverse);  // WGSL round is half to even, like MLAS's
    }
}
