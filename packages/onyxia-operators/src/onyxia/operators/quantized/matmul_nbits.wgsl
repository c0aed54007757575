// MatMulNBits (4-bit): y[m, n] = sum_k a[m, k] * (q[n, k] - zp[n, k / BLOCK_SIZE]) * scale[n, k / BLOCK_SIZE] + bias[n].
// Weights are dequantised in the shader and accumulated in f32 (onnxruntime's accuracy_level 0 numerics).
//
// Bindings: 0 a [M, K] (A_T), 1 b (u32 words of packed nibbles, low nibble first; column n starts at word
//   n * WPC), 2 scales [N * NB] (A_T), then zp when ZP != none, bias [N] when BIAS, then y [M, N] (A_T) at
//   #{ZP_BINDING}, #{BIAS_BINDING}, #{Y_BINDING}.
// Defs: A_T             f32 | f16 (activations, scales, float zero points, bias and output share it)
//       F16             flag: A_T is f16
//       ZP              none (zero point 8) | packed (4-bit, two per byte, ZB bytes per column) | float (A_T)
//       B_WIDENED       flag: b is a runtime uint8 tensor, one byte per u32 (else 4 bytes per word)
//       ZP_WIDENED      flag: the same for packed zero points
//       BIAS            flag: a bias input
//       K_TAIL          flag: K % BLOCK_SIZE != 0, so reads of a past K must give 0 (the padded block)
//       TILED           flag: the prefill kernel (TILE_M x TILE_N outputs per workgroup, 64 threads, 4x4 each);
//                       absent: the decode GEMV (one row, COLS columns per workgroup, TPC threads per column)
//       WORKGROUP_SIZE, TPC (GEMV only; TPC a power of two dividing WORKGROUP_SIZE)
// Dims: M (rows, symbolic or literal), K, N, NB (blocks per column), WPB (words per block), WPC (words per
//       column), ZB (zero-point bytes per column), BLOCK_SIZE.
#ifdef F16
enable f16;
#endif

#ifdef A_VEC4
@group(0) @binding(0) var<storage, read> a: array<vec4<#{A_T}>>;
#else
@group(0) @binding(0) var<storage, read> a: array<#{A_T}>;
#endif
@group(0) @binding(1) var<storage, read> b: array<u32>;
@group(0) @binding(2) var<storage, read> scales: array<#{A_T}>;
#if ZP == packed
@group(0) @binding(#{ZP_BINDING}) var<storage, read> zp: array<u32>;
#endif
#if ZP == float
@group(0) @binding(#{ZP_BINDING}) var<storage, read> zp: array<#{A_T}>;
#endif
#ifdef BIAS
@group(0) @binding(#{BIAS_BINDING}) var<storage, read> bias: array<#{A_T}>;
#endif
@group(0) @binding(#{Y_BINDING}) var<storage, read_write> y: array<#{A_T}>;

// Word w of column n. A compile-time B is repacked word-major ([WPC, N]), so neighbouring columns'
// threads read neighbouring words; a runtime B keeps the graph's [N, WPC] layout, one byte per u32.
fn b_word(n: u32, w: u32) -> u32 {
#ifdef B_WIDENED
    let j = 4u * (n * #{WPC} + w);
    return b[j] | (b[j + 1u] << 8u) | (b[j + 2u] << 16u) | (b[j + 3u] << 24u);
#else
    return b[w * #{N} + n];
#endif
}

fn zero_point(n: u32, blk: u32) -> f32 {
#if ZP == none
    return 8.0;
#endif
#if ZP == float
    return f32(zp[n * #{NB} + blk]);
#endif
#if ZP == packed
    let byte_index = n * #{ZB} + blk / 2u;
#ifdef ZP_WIDENED
    let byte = zp[byte_index];
#else
    let byte = zp[byte_index / 4u] >> (8u * (byte_index % 4u));
#endif
    return f32((byte >> (4u * (blk % 2u))) & 15u);
#endif
}

fn scale(n: u32, blk: u32) -> f32 {
    return f32(scales[n * #{NB} + blk]);
}

// Elements k0 .. k0 + 7 of row m, as (k0 .. k0+3) and (k0+4 .. k0+7); zero past K, where the last block is
// padding. With A_VEC4 (K % 8 == 0) two vector loads instead of eight scalar ones, which dominate the cost.
struct Eight {
    lo: vec4<f32>,
    hi: vec4<f32>,
}

fn a_eight(m: u32, k0: u32) -> Eight {
#ifdef A_VEC4
#ifdef K_TAIL
    if (k0 >= #{K}) {
        return Eight(vec4<f32>(0.0), vec4<f32>(0.0));
    }
#endif
    let i = (m * #{K} + k0) / 4u;
    return Eight(vec4<f32>(a[i]), vec4<f32>(a[i + 1u]));
#else
    var v: array<f32, 8>;
    for (var j = 0u; j < 8u; j++) {
        let k = k0 + j;
#ifdef K_TAIL
        if (k < #{K}) {
            v[j] = f32(a[m * #{K} + k]);
        }
#else
        v[j] = f32(a[m * #{K} + k]);
#endif
    }
    return Eight(vec4<f32>(v[0], v[1], v[2], v[3]), vec4<f32>(v[4], v[5], v[6], v[7]));
#endif
}

// The eight nibbles of a word (elements k0 .. k0 + 7) as floats.
fn unpack_nibbles(word: u32) -> Eight {
    let shifts = vec4<u32>(0u, 4u, 8u, 12u);
    let lo = vec4<f32>((vec4<u32>(word) >> shifts) & vec4<u32>(15u));
    let hi = vec4<f32>((vec4<u32>(word >> 16u) >> shifts) & vec4<u32>(15u));
    return Eight(lo, hi);
}

fn store(m: u32, n: u32, value: f32) {
#ifdef BIAS
    y[m * #{N} + n] = #{A_T}(value + f32(bias[n]));
#else
    y[m * #{N} + n] = #{A_T}(value);
#endif
}

#ifndef TILED
// Each thread owns one column and walks whole blocks (TPC > 1: blocks t, t + TPC, ... then a workgroup
// reduction). Per block it sums a * q and a separately, so the block's zero point and scale are applied
// once: sum_k a_k (q_k - z) s = s * (sum_k a_k q_k - z * sum_k a_k).
const COLS: u32 = #{WORKGROUP_SIZE}u / #{TPC}u;
var<workgroup> partial: array<f32, #{WORKGROUP_SIZE}>;

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    // x (and y, when the runtime splits a long x) count column groups; z counts rows
    let n = (wid.x + wid.y * nwg.x) * COLS + lid / #{TPC}u;
    let t = lid % #{TPC}u;
    let m = wid.z;
    var acc = 0.0;
    if (n < #{N}) {
        for (var blk = t; blk < #{NB}; blk += #{TPC}u) {
            var dot_q = 0.0;
            var sum_a = 0.0;
            for (var w = blk * #{WPB}; w < (blk + 1u) * #{WPB}; w++) {
                let k0 = w * 8u;
                let q = unpack_nibbles(b_word(n, w));
                let x = a_eight(m, k0);
                dot_q += dot(x.lo, q.lo) + dot(x.hi, q.hi);
                sum_a += dot(x.lo + x.hi, vec4<f32>(1.0));
            }
            acc += scale(n, blk) * (dot_q - zero_point(n, blk) * sum_a);
        }
    }
#if TPC == 1
    if (n < #{N}) {
        store(m, n, acc);
    }
#else
    partial[lid] = acc;
    workgroupBarrier();
    for (var s = #{TPC}u / 2u; s > 0u; s /= 2u) {
        if (t < s) {
            partial[lid] += partial[lid + s];
        }
        workgroupBarrier();
    }
    if (t == 0u && n < #{N}) {
        store(m, n, partial[lid]);
    }
#endif
}
#endif

#ifdef TILED
fn row_dot(m: u32, k0: u32, w_lo: vec4<f32>, w_hi: vec4<f32>) -> f32 {
    let x = a_eight(m, k0);
    return dot(x.lo, w_lo) + dot(x.hi, w_hi);
}
// ROWS rows x WORKGROUP_SIZE columns per workgroup, one column per thread: each word is unpacked and
// dequantised once and used for ROWS rows, and no workgroup memory or barrier is needed (a's reads are
// uniform across the workgroup, b's are contiguous in the word-major layout).
@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let n = (wid.x + wid.y * nwg.x) * #{WORKGROUP_SIZE}u + lid;
    let m0 = wid.z * #{ROWS}u;
    var acc = vec4<f32>(0.0);
    if (n < #{N}) {
        for (var blk = 0u; blk < #{NB}; blk++) {
            let z = vec4<f32>(zero_point(n, blk));
            let s = scale(n, blk);
            for (var w = blk * #{WPB}; w < (blk + 1u) * #{WPB}; w++) {
                let k0 = w * 8u;
                let q = unpack_nibbles(b_word(n, w));
                let w_lo = (q.lo - z) * s;
                let w_hi = (q.hi - z) * s;
                acc.x += row_dot(m0, k0, w_lo, w_hi);
                acc.y += row_dot(m0 + 1u, k0, w_lo, w_hi);
                acc.z += row_dot(m0 + 2u, k0, w_lo, w_hi);
                acc.w += row_dot(m0 + 3u, k0, w_lo, w_hi);
            }
        }
        for (var r = 0u; r < #{ROWS}u; r++) {
            if (m0 + r < #{M}) {
                store(m0 + r, n, acc[r]);
            }
        }
    }
}
#endif
