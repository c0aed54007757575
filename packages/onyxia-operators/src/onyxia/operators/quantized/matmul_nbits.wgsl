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

@group(0) @binding(0) var<storage, read> a: array<#{A_T}>;
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

fn b_word(i: u32) -> u32 {
#ifdef B_WIDENED
    let j = 4u * i;
    return b[j] | (b[j + 1u] << 8u) | (b[j + 2u] << 16u) | (b[j + 3u] << 24u);
#else
    return b[i];
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

// Element k of row m (0 past K: the padded tail of the last block must not contribute).
fn a_at(m: u32, k: u32) -> f32 {
#ifdef K_TAIL
    if (k >= #{K}) {
        return 0.0;
    }
#endif
    return f32(a[m * #{K} + k]);
}

// Eight consecutive weights of column n from word w (elements k0 .. k0 + 7), as (k0 .. k0+3, k0+4 .. k0+7).
struct Weights8 {
    lo: vec4<f32>,
    hi: vec4<f32>,
}

fn dequantize(n: u32, w: u32) -> Weights8 {
    let word = b_word(n * #{WPC} + w);
    let blk = w / #{WPB};
    let shifts = vec4<u32>(0u, 4u, 8u, 12u);
    let q_lo = vec4<f32>((vec4<u32>(word) >> shifts) & vec4<u32>(15u));
    let q_hi = vec4<f32>((vec4<u32>(word >> 16u) >> shifts) & vec4<u32>(15u));
    let z = vec4<f32>(zero_point(n, blk));
    let s = scale(n, blk);
    return Weights8((q_lo - z) * s, (q_hi - z) * s);
}

fn store(m: u32, n: u32, value: f32) {
#ifdef BIAS
    y[m * #{N} + n] = #{A_T}(value + f32(bias[n]));
#else
    y[m * #{N} + n] = #{A_T}(value);
#endif
}

#ifndef TILED
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
        for (var w = t; w < #{WPC}; w += #{TPC}u) {
            let k0 = w * 8u;
            let wt = dequantize(n, w);
            let a_lo = vec4<f32>(a_at(m, k0), a_at(m, k0 + 1u), a_at(m, k0 + 2u), a_at(m, k0 + 3u));
            let a_hi = vec4<f32>(a_at(m, k0 + 4u), a_at(m, k0 + 5u), a_at(m, k0 + 6u), a_at(m, k0 + 7u));
            acc += dot(a_lo, wt.lo) + dot(a_hi, wt.hi);
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
// 64 threads as 8 x 8, each owning a 4 x 4 block of the 32 x 32 output tile. Per 32-wide K step the
// workgroup stages a[m, k] and the dequantised weights in workgroup memory, both as vec4 along m / n,
// so the weights are unpacked once per tile instead of once per output row.
const TILE: u32 = 32u;
var<workgroup> a_tile: array<vec4<f32>, 256>;  // [k][m / 4]
var<workgroup> w_tile: array<vec4<f32>, 256>;  // [k][n / 4]

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let n_base = (wid.x + wid.y * nwg.x) * TILE;  // z counts row tiles, as the GEMV's rows
    let m_base = wid.z * TILE;
    let tx = lid % 8u;
    let ty = lid / 8u;
    var acc: array<vec4<f32>, 4>;
    for (var kt = 0u; kt < #{K}; kt += TILE) {
        for (var i = lid; i < 256u; i += 64u) {
            let k = kt + i / 8u;
            let m = m_base + (i % 8u) * 4u;
            var v = vec4<f32>(0.0);
            for (var r = 0u; r < 4u; r++) {
                if (m + r < #{M} && k < #{K}) {
                    v[r] = f32(a[(m + r) * #{K} + k]);
                }
            }
            a_tile[i] = v;
        }
        if (lid < 32u) {
            // lid = word (0..3) * 8 + column group (0..7): four columns' word at the same k0
            let group = lid % 8u;
            let kw = lid / 8u;
            let k0 = kt + kw * 8u;
            var lo: array<vec4<f32>, 4>;
            var hi: array<vec4<f32>, 4>;
            for (var c = 0u; c < 4u; c++) {
                let n = n_base + group * 4u + c;
                if (n < #{N} && k0 < #{K}) {
                    let wt = dequantize(n, k0 / 8u);
                    lo[c] = wt.lo;
                    hi[c] = wt.hi;
                }
            }
            for (var e = 0u; e < 4u; e++) {
                w_tile[(kw * 8u + e) * 8u + group] = vec4<f32>(lo[0][e], lo[1][e], lo[2][e], lo[3][e]);
                w_tile[(kw * 8u + 4u + e) * 8u + group] = vec4<f32>(hi[0][e], hi[1][e], hi[2][e], hi[3][e]);
            }
        }
        workgroupBarrier();
        for (var k = 0u; k < TILE; k++) {
            let av = a_tile[k * 8u + ty];
            let wv = w_tile[k * 8u + tx];
            acc[0] += av.x * wv;
            acc[1] += av.y * wv;
            acc[2] += av.z * wv;
            acc[3] += av.w * wv;
        }
        workgroupBarrier();
    }
    for (var r = 0u; r < 4u; r++) {
        let m = m_base + ty * 4u + r;
        for (var c = 0u; c < 4u; c++) {
            let n = n_base + tx * 4u + c;
            if (m < #{M} && n < #{N}) {
                store(m, n, acc[r][c]);
            }
        }
    }
}
#endif
