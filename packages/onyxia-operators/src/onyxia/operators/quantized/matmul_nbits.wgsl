// MatMulNBits (4-bit): y[m, n] = sum_k a[m, k] * (q[n, k] - zp[n, k / BLOCK_SIZE]) * scale[n, k / BLOCK_SIZE] + bias[n],
// dequantised in the shader and accumulated in f32 (onnxruntime's accuracy_level 0 numerics). With INT8, `a` holds
// matmul_nbits_quantize.wgsl's int8 values qa (as integer-valued f32) and a_scales their per-block scales sa, and
// a block adds (sa * s) * (sum_k qa_k q_k - z * sum_k qa_k): the sums are exact integers, the int32 dot products of
// onnxruntime's CompInt8 kernel (accuracy_level 4), which applies sa * s per block too.
//
// Each thread owns 4 * CG adjacent columns and ROWS rows and walks the K blocks (SPLIT > 1: SPLIT threads share a
// column group, taking blocks t, t + SPLIT, ..., and add their sums through workgroup memory). Per block it
// accumulates sum(a * q) and sum(a), then applies the block's zero point and scale once:
// sum_k a_k (q_k - z) s = s * (sum_k a_k q_k - z * sum_k a_k). The columns of a thread share each load of a,
// which (more than the weight reads) bounds the speed on lavapipe; ROWS > 1 (prefill) shares each weight unpack.
//
// Bindings: 0 a [M, K] (A_T; vec4s with A_VEC4; INT8: qa [M, KP] f32 vec4s), 1 b, 2 scales [N * NB] (A_T), then zp
//   when ZP != none, bias [N] when BIAS, a_scales [NB, MP] (f32 vec4s) when INT8, then y [M, N] (A_T) at #{ZP_BINDING},
//   #{BIAS_BINDING}, #{A_SCALES_BINDING}, #{Y_BINDING}.
//   b: a compile-time B repacked word-major, vec4<u32> at [word][column / 4] (columns padded to NP), each word
//   8 nibbles low first; B_WIDENED: a runtime uint8 B as the graph stores it, [N, WPC * 4] bytes, one per u32.
// Defs: A_T             f32 | f16 (activations, scales, float zero points, bias and output share it)
//       F16             flag: A_T is f16
//       ZP              none (zero point 8) | packed (4-bit, two per byte, ZB bytes per column) | float (A_T)
//       B_WIDENED       flag: see b above
//       ZP_WIDENED      flag: packed zero points from a runtime uint8 tensor, one byte per u32 (else 4 per word)
//       BIAS            flag: a bias input
//       K_TAIL          flag: K % BLOCK_SIZE != 0, so reads of a past K give 0 (the padded last block)
//       A_VEC4          flag: K % 8 == 0, so a row's 8 elements per word are two aligned vec4 loads
//       INT8            flag: a is int8-quantized per block (accuracy_level 4), rows padded to KP = NB * block size
//       ROWS            rows per thread (1 for decode)
//       CG              column groups of 4 per thread (each load of a serves 4 * CG columns)
//       SPLIT           threads per column group (a power of two dividing WORKGROUP_SIZE)
//       WORKGROUP_SIZE
// Dims: M (rows, literal or immediate), K, KP and MP (INT8: NB * block size, M rounded up to 4), N, NP (N rounded
//       up to the repack's column padding, a
//       multiple of 4 * CG), NB (blocks per column), WPB (words per
//       block), WPC (words per column), ZB (zero-point bytes per column).
#ifdef F16
enable f16;
#endif

#ifdef INT8
@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;
#else
#ifdef A_VEC4
@group(0) @binding(0) var<storage, read> a: array<vec4<#{A_T}>>;
#else
@group(0) @binding(0) var<storage, read> a: array<#{A_T}>;
#endif
#endif
#ifdef B_WIDENED
@group(0) @binding(1) var<storage, read> b: array<u32>;
#else
@group(0) @binding(1) var<storage, read> b: array<vec4<u32>>;
#endif
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
#ifdef INT8
@group(0) @binding(#{A_SCALES_BINDING}) var<storage, read> a_scales: array<vec4<f32>>;
#endif
@group(0) @binding(#{Y_BINDING}) var<storage, read_write> y: array<#{A_T}>;

// Word w of columns n0 .. n0 + 3. Columns past N read clamped or padding words whose sums are never stored.
fn b_words(n0: u32, w: u32) -> vec4<u32> {
#ifdef B_WIDENED
    var words = vec4<u32>(0u);
    for (var c = 0u; c < 4u; c++) {
        let j = 4u * ((n0 + c) * #{WPC} + w);
        words[c] = b[j] | (b[j + 1u] << 8u) | (b[j + 2u] << 16u) | (b[j + 3u] << 24u);
    }
    return words;
#else
    return b[w * (#{NP} / 4u) + n0 / 4u];
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

fn scales4(n0: u32, blk: u32) -> vec4<f32> {
    let i = n0 * #{NB} + blk;
    return vec4<f32>(f32(scales[i]), f32(scales[i + #{NB}]), f32(scales[i + 2u * #{NB}]), f32(scales[i + 3u * #{NB}]));
}

fn zero_points4(n0: u32, blk: u32) -> vec4<f32> {
    return vec4<f32>(zero_point(n0, blk), zero_point(n0 + 1u, blk), zero_point(n0 + 2u, blk), zero_point(n0 + 3u, blk));
}

// Eight consecutive values (elements k0 .. k0 + 3 and k0 + 4 .. k0 + 7).
struct Eight {
    lo: vec4<f32>,
    hi: vec4<f32>,
}

// Row m's elements k0 .. k0 + 7; zero past K (the padded tail of the last block must not contribute).
fn a_eight(m: u32, k0: u32) -> Eight {
#ifdef INT8
    let i = (m * #{KP} + k0) / 4u;  // whole blocks, the tail zeroed by the quantize pass
    return Eight(a[i], a[i + 1u]);
#else
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
        if (k0 + j < #{K}) {
            v[j] = f32(a[m * #{K} + k0 + j]);
        }
    }
    return Eight(vec4<f32>(v[0], v[1], v[2], v[3]), vec4<f32>(v[4], v[5], v[6], v[7]));
#endif
#endif
}

fn unpack_nibbles(word: u32) -> Eight {
    let shifts = vec4<u32>(0u, 4u, 8u, 12u);
    let lo = vec4<f32>((vec4<u32>(word) >> shifts) & vec4<u32>(15u));
    let hi = vec4<f32>((vec4<u32>(word >> 16u) >> shifts) & vec4<u32>(15u));
    return Eight(lo, hi);
}

fn dot8(x: Eight, q: Eight) -> f32 {
    return dot(x.lo, q.lo) + dot(x.hi, q.hi);
}

fn store4(m: u32, n0: u32, value: vec4<f32>) {
    for (var c = 0u; c < 4u; c++) {
        let n = n0 + c;
        if (n < #{N}) {
#ifdef BIAS
            y[m * #{N} + n] = #{A_T}(value[c] + f32(bias[n]));
#else
            y[m * #{N} + n] = #{A_T}(value[c]);
#endif
        }
    }
}

const COLUMNS: u32 = 4u * #{CG}u;  // columns per thread: CG groups of 4
const THREADS: u32 = #{WORKGROUP_SIZE}u / #{SPLIT}u;  // threads with distinct columns per workgroup
#if SPLIT != 1
var<workgroup> partial: array<vec4<f32>, #{WORKGROUP_SIZE}u * #{ROWS}u * #{CG}u>;
#endif

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    // x (and y, when the runtime splits a long x) count column groups; z counts row groups
    let n0 = ((wid.x + wid.y * nwg.x) * THREADS + lid / #{SPLIT}u) * COLUMNS;
    let t = lid % #{SPLIT}u;
    let m0 = wid.z * #{ROWS}u;
    // acc[r * CG + g]: rows m0 + r, columns n0 + 4 g .. n0 + 4 g + 3 (constant-bound loops unroll, so
    // these arrays live in registers)
    var acc = array<vec4<f32>, #{ROWS}u * #{CG}u>();
    if (n0 < #{N}) {
        for (var blk = t; blk < #{NB}; blk += #{SPLIT}u) {
            // zeroed explicitly: a `var` declared without initializer in a loop body kept the previous
            // iteration's value here (wgpu 0.32 on lavapipe), though WGSL says it starts at zero
            var dot_q = array<vec4<f32>, #{ROWS}u * #{CG}u>();
            var sum_a = array<f32, #{ROWS}>();
            for (var w = blk * #{WPB}; w < (blk + 1u) * #{WPB}; w++) {
                var q: array<Eight, 4u * #{CG}u>;
                for (var g = 0u; g < #{CG}u; g++) {
                    let words = b_words(n0 + 4u * g, w);
                    for (var c = 0u; c < 4u; c++) {
                        q[4u * g + c] = unpack_nibbles(words[c]);
                    }
                }
                for (var r = 0u; r < #{ROWS}u; r++) {
                    // rows past M read clamped garbage (WebGPU bounds every access) and are never stored
                    let x = a_eight(m0 + r, w * 8u);
                    sum_a[r] += dot(x.lo + x.hi, vec4<f32>(1.0));
                    for (var g = 0u; g < #{CG}u; g++) {
                        let j = 4u * g;
                        dot_q[r * #{CG}u + g] += vec4<f32>(dot8(x, q[j]), dot8(x, q[j + 1u]), dot8(x, q[j + 2u]), dot8(x, q[j + 3u]));
                    }
                }
            }
#ifdef INT8
            // one load for the block's ROWS rows (ROWS divides 4, so they share a vec4); rows past M read
            // the padding, and their sums are never stored
            let row_scale = a_scales[(blk * #{MP} + m0) / 4u];
            let row0 = m0 % 4u;
#endif
            for (var g = 0u; g < #{CG}u; g++) {
                let s = scales4(n0 + 4u * g, blk);
                let z = zero_points4(n0 + 4u * g, blk);
                for (var r = 0u; r < #{ROWS}u; r++) {
#ifdef INT8
                    acc[r * #{CG}u + g] += (s * row_scale[row0 + r]) * (dot_q[r * #{CG}u + g] - z * sum_a[r]);
#else
                    acc[r * #{CG}u + g] += s * (dot_q[r * #{CG}u + g] - z * sum_a[r]);
#endif
                }
            }
        }
    }
#if SPLIT != 1
    for (var i = 0u; i < #{ROWS}u * #{CG}u; i++) {
        partial[lid * #{ROWS}u * #{CG}u + i] = acc[i];
    }
    workgroupBarrier();
    if (t != 0u) {
        return;
    }
    for (var j = 1u; j < #{SPLIT}u; j++) {
        for (var i = 0u; i < #{ROWS}u * #{CG}u; i++) {
            acc[i] += partial[(lid + j) * #{ROWS}u * #{CG}u + i];
        }
    }
#endif
    for (var r = 0u; r < #{ROWS}u; r++) {
        for (var g = 0u; g < #{CG}u; g++) {
            if (m0 + r < #{M} && n0 + 4u * g < #{N}) {
                store4(m0 + r, n0 + 4u * g, acc[r * #{CG}u + g]);
            }
        }
    }
}
