// QLinearMatMul and com.microsoft QGemm: acc = sum_k (a[m, k] - za[m]) * (b[k, n] - zb[n]) summed exactly in i32
// (wrapping like onnxruntime's accumulator), [+ c[m, n] (QGemm's int32 C)], then either requantized
// (onyxia::requant, multiplier ALPHA * a_scale[m] * b_scale[n] / y_scale) or, for QGemm without y_zero_point,
// stored as f32(acc) * multiplier (MLAS's scale output processor). One invocation per output element.
// Bindings (numbers from BIND_* defs): a, a_scale, [a_zp with AZP], b, b_scale, [b_zp with BZP], [c with BIAS],
//   [y_scale with YSCALE], [y_zp with REQUANT], y. Bytes are one per u32 (uint8) or i32 (int8), as stored.
// Defs: A_T, B_T, Y_T (storage types), AS_T, BS_T, YS_T (scale types: f32 or f16 with F16); AS_MODE, AZ_MODE,
//   BS_MODE, BZ_MODE (which elements a_scale, a_zp, b_scale, b_zp apply to: 0 per tensor, 1 per row, 2 per
//   column, 3 per column and batch of B, onnxruntime's [*B batch, 1, N]); AZP, BZP, BIAS, YSCALE, REQUANT with LO, HI
//   (i32 literals), ALPHA (f32 literal), BATCH_RANK, WORKGROUP_SIZE.
// Dims: TOTAL, M, N, K; element strides A_SM, A_SK, B_SK, B_SN (a transposed operand swaps them), C_SM, C_SN
//   (0 along a broadcast axis); BATCH_DIMS, A_BATCH_STRIDES, B_BATCH_STRIDES (in elements; 0 broadcasts).
#ifdef F16
enable f16;
#endif
#import onyxia::entry
#import onyxia::requant::{output_multiplier, requantize}
#import onyxia::batch_offsets::{batch_offsets}

@group(0) @binding(#{BIND_A}) var<storage, read> a: array<#{A_T}>;
@group(0) @binding(#{BIND_A_SCALE}) var<storage, read> a_scale: array<#{AS_T}>;
#ifdef AZP
@group(0) @binding(#{BIND_AZP}) var<storage, read> a_zp: array<#{A_T}>;
#endif
@group(0) @binding(#{BIND_B}) var<storage, read> b: array<#{B_T}>;
@group(0) @binding(#{BIND_B_SCALE}) var<storage, read> b_scale: array<#{BS_T}>;
#ifdef BZP
@group(0) @binding(#{BIND_BZP}) var<storage, read> b_zp: array<#{B_T}>;
#endif
#ifdef BIAS
@group(0) @binding(#{BIND_C}) var<storage, read> c: array<i32>;
#endif
#ifdef YSCALE
@group(0) @binding(#{BIND_Y_SCALE}) var<storage, read> y_scale: array<#{YS_T}>;
#endif
#ifdef REQUANT
@group(0) @binding(#{BIND_YZP}) var<storage, read> y_zp: array<#{Y_T}>;
#endif
@group(0) @binding(#{BIND_Y}) var<storage, read_write> y: array<#{Y_T}>;

fn element_count() -> u32 { return #{TOTAL}; }

// Where the parameter of row m / column n (in the batch of B at `b_offset`) sits, per its mode:
// tensor (one element), row, column, or batch (onnxruntime's [*B batch, 1, N]: one row of N per batch of B)
fn a_index(m: u32, mode: u32) -> u32 {
    return select(0u, m, mode == 1u);
}

fn b_index(n: u32, b_offset: u32, mode: u32) -> u32 {
    if (mode == 3u) {
        return b_offset / max(#{K}, 1u) + n;
    }
    return select(0u, n, mode == 2u);
}

fn a_zero(m: u32) -> i32 {
#ifdef AZP
    return i32(a_zp[a_index(m, #{AZ_MODE}u)]);
#else
    return 0i;
#endif
}

fn b_zero(n: u32, b_offset: u32) -> i32 {
#ifdef BZP
    return i32(b_zp[b_index(n, b_offset, #{BZ_MODE}u)]);
#else
    return 0i;
#endif
}

fn element(i: u32) {
    let n = i % #{N};
    let m = (i / #{N}) % #{M};
    let offsets = batch_offsets(i / (#{M} * #{N}));
    let za = a_zero(m);
    let zb = b_zero(n, offsets.y);
    let a_row = offsets.x + m * #{A_SM};
    let b_column = offsets.y + n * #{B_SN};
    var acc = 0i;
    for (var k = 0u; k < #{K}; k++) {
        acc += (i32(a[a_row + k * #{A_SK}]) - za) * (i32(b[b_column + k * #{B_SK}]) - zb);
    }
#ifdef BIAS
    acc += c[m * #{C_SM} + n * #{C_SN}];
#endif
    let product = #{ALPHA} * f32(a_scale[a_index(m, #{AS_MODE}u)]) * f32(b_scale[b_index(n, offsets.y, #{BS_MODE}u)]);
#ifdef YSCALE
    let multiplier = output_multiplier(product, f32(y_scale[0]));
#else
    let multiplier = product;
#endif
#ifdef REQUANT
    y[i] = #{Y_T}(requantize(acc, multiplier, i32(y_zp[0]), #{LO}, #{HI}));
#else
    y[i] = f32(acc) * multiplier;
#endif
}
