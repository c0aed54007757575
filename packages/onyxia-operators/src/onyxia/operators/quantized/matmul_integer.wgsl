// MatMulInteger and com.microsoft MatMulIntegerToFloat: y = sum_k (a[m, k] - za) * (b[k, n] - zb[n]), summed exactly
// in 32-bit integers (onnxruntime's int32 accumulation; wrapping like it on overflow), four k per dot4U8Packed with
// both operands in u8 form (onyxia::u8_dot). MatMulIntegerToFloat (SCALED) then stores
// f32(sum) * (a_scale * b_scale[n]) [+ bias[n]], the float ops of the graph's Cast and Mul in their order.
//
// Each thread owns 4 adjacent columns of one row (GEMV: a decode step reads each weight word once, 4 bytes per u32).
// Bindings (numbers from BIND_* defs): a (A_T: u32 for uint8, i32 for int8, one element each), b, [a_zp (A_T) with
//   AZP], [b_zp (B_T) with BZP], [a_scale, b_scale (f32) with SCALED], [bias (f32) with BIAS], y (i32, or f32 with
//   SCALED).
//   b: PACKED_B: a compile-time B [K, N] repacked (see matmul_integer.py) as vec4<u32>, [N / 4][K4][4]: word w of
//   column n holds u8-form b[4w .. 4w + 3, n], zero-padded; else B as the graph stores it (B_T, one element each).
// Defs: A_T, B_T; A_XOR, B_XOR (0x80u for int8, 0u for uint8); AZP, BZP, BZP_COLUMNS (one zero point per column),
//   SCALED, SCALE_COLUMNS (one b_scale per column), BIAS, PACKED_B, BATCH_RANK, WG.
// Dims: M, N, K, K4 (= ceil(K / 4)), BATCH_DIMS, A_BATCH_STRIDES, B_BATCH_STRIDES (in elements; 0 broadcasts).
// Dispatch: (ceil(N / (4 * WG)), M, batch).

#import onyxia::u8_dot::{U8Sums, u8_accumulate, u8_products}
#import onyxia::batch_offsets::{batch_offsets}

@group(0) @binding(#{BIND_A}) var<storage, read> a: array<#{A_T}>;
#ifdef PACKED_B
@group(0) @binding(#{BIND_B}) var<storage, read> b: array<vec4<u32>>;
#else
@group(0) @binding(#{BIND_B}) var<storage, read> b: array<#{B_T}>;
#endif
#ifdef AZP
@group(0) @binding(#{BIND_AZP}) var<storage, read> a_zp: array<#{A_T}>;
#endif
#ifdef BZP
@group(0) @binding(#{BIND_BZP}) var<storage, read> b_zp: array<#{B_T}>;
#endif
#ifdef SCALED
@group(0) @binding(#{BIND_A_SCALE}) var<storage, read> a_scale: array<f32>;
@group(0) @binding(#{BIND_B_SCALE}) var<storage, read> b_scale: array<f32>;
@group(0) @binding(#{BIND_Y}) var<storage, read_write> y: array<f32>;
#else
@group(0) @binding(#{BIND_Y}) var<storage, read_write> y: array<i32>;
#endif
#ifdef BIAS
@group(0) @binding(#{BIND_BIAS}) var<storage, read> bias: array<f32>;
#endif

// a[row + k .. row + k + 3] in u8 form, one byte each (zero past K)
fn a_word(row: u32, k: u32) -> u32 {
    var word = 0u;
    for (var i = 0u; i < 4u; i++) {
        if (k + i < #{K}) {
            word |= ((u32(a[row + k + i]) ^ #{A_XOR}) & 0xffu) << (8u * i);
        }
    }
    return word;
}

// word w of columns n0 .. n0 + 3 (columns past N read as zero bytes; their sums are never stored)
fn b_words(b_base: u32, n0: u32, w: u32) -> vec4<u32> {
#ifdef PACKED_B
    return b[(n0 / 4u) * #{K4} + w];
#else
    var words = vec4<u32>(0u);
    for (var c = 0u; c < 4u; c++) {
        let n = n0 + c;
        for (var i = 0u; i < 4u; i++) {
            let k = 4u * w + i;
            if (n < #{N} && k < #{K}) {
                words[c] |= ((u32(b[b_base + k * #{N} + n]) ^ #{B_XOR}) & 0xffu) << (8u * i);
            }
        }
    }
    return words;
#endif
}

fn a_zero() -> u32 {
#ifdef AZP
    return (u32(a_zp[0]) ^ #{A_XOR}) & 0xffu;
#else
    return #{A_XOR};
#endif
}

fn b_zero(n: u32) -> u32 {
#ifdef BZP
#ifdef BZP_COLUMNS
    return (u32(b_zp[min(n, #{N} - 1u)]) ^ #{B_XOR}) & 0xffu;
#else
    return (u32(b_zp[0]) ^ #{B_XOR}) & 0xffu;
#endif
#else
    return #{B_XOR};
#endif
}

fn store(index: u32, n: u32, sum: i32) {
#ifdef SCALED
#ifdef SCALE_COLUMNS
    let multiplier = a_scale[0] * b_scale[n];
#else
    let multiplier = a_scale[0] * b_scale[0];
#endif
#ifdef BIAS
    y[index] = f32(sum) * multiplier + bias[n];
#else
    y[index] = f32(sum) * multiplier;
#endif
#else
    y[index] = sum;
#endif
}

@compute @workgroup_size(#{WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let n0 = (wid.x * #{WG}u + lid) * 4u;
    if (n0 >= #{N}) {
        return;
    }
    let m = wid.y;
    let offsets = batch_offsets(wid.z);
    let a_row = offsets.x + m * #{K};
    var acc = U8Sums(vec4<u32>(0u), vec4<u32>(0u), 0u);
    for (var w = 0u; w < #{K4}; w++) {
        acc = u8_accumulate(acc, a_word(a_row, 4u * w), b_words(offsets.y, n0, w));
    }
    let zb = vec4<u32>(b_zero(n0), b_zero(n0 + 1u), b_zero(n0 + 2u), b_zero(n0 + 3u));
    let sums = u8_products(acc, a_zero(), zb, #{K});
    let y_row = (wid.z * #{M} + m) * #{N};
    for (var c = 0u; c < 4u; c++) {
        if (n0 + c < #{N}) {
            store(y_row + n0 + c, n0 + c, sums[c]);
        }
    }
}
