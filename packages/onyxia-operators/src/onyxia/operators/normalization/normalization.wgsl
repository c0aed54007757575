// Layer normalisation family: LayerNormalization, SimplifiedLayerNormalization (RMSNorm) and the
// com.microsoft Skip* fusions, and com.onyxia NormAddNorm (a Skip* whose skip is RMS-normalised first).
// One workgroup per row (the normalised axes flattened). Statistics are
// reduced in f32 whatever the storage type, in two passes (mean, then mean of squared deviations), so
// a large common offset does not cancel catastrophically as E[x^2] - E[x]^2 would.
// Bindings, numbered by the planner (reads first, in this order, absent ones skipped):
//   B_X in_x, [B_SKIP in_skip], [B_BIAS in_bias], B_SCALE in_scale, [B_BETA in_beta], [B_SKIP_SCALE in_skip_scale],
//   then B_Y out_y, [B_MEAN out_mean], [B_INV_STD out_inv_std], [B_SUM out_sum].
// Defs: X_T, SKIP_T, BIAS_T, SCALE_T, BETA_T, SKIP_SCALE_T, Y_T, MEAN_T, INV_STD_T, SUM_T  WGSL storage types
//       F16 (flag), WORKGROUP_SIZE and SPAN (powers of two: the row's reduction tree is WORKGROUP_SIZE * SPAN
//       virtual lanes wide, SPAN per invocation, `layer_norm.row_lanes`), EPSILON (float literal)
//       RMS (flag: no mean subtraction; out_mean receives 0, as onnxruntime writes)
//       SKIP, BIAS, BETA, OUT_MEAN, OUT_INV_STD, OUT_SUM (flags: that binding exists)
//       INT8_A (flag, com.onyxia <norm>Int8A): also write y quantized to int8 per block of BLOCK_SIZE, as the
//       MatMulNBits reading it at accuracy_level 4 would quantize it (onyxia::quant on the stored values):
//       out_qa [ROWS, NB * BLOCK_SIZE] int8 bytes, 4 to a u32, the tail past L zero; out_sa [NB, MP] f32,
//       block-major (matmul_nbits_quantize.wgsl's layout). An invocation takes whole blocks. Y_F16 (flag, with
//       INT8_A): y is stored as f16, so the values quantized are rounded as stored (onyxia::rounding).
//       SKIP_NORM (flag, with SKIP: the skip row is RMS-normalised and scaled by in_skip_scale before it is
//       added, exactly as an unfused SimplifiedLayerNormalization of the same row length computes it: same
//       workgroup size, same tree), SKIP_EPSILON (f32 literal, with SKIP_NORM), SKIP_Y_F16 (flag: that norm's
//       result is rounded as the f16 buffer the unfused norm writes would round it)
// Dims (literal when static, immediates when symbolic): ROWS, L (row length), and the element counts
//       SKIP_N, BIAS_N, SCALE_N, BETA_N, SKIP_SCALE_N (with SKIP_NORM the skip has x's shape: SKIP_N = ROWS * L). An operand shorter than what it combines with repeats
//       (flat index % N): numpy broadcasting over leading dims, checked by the planner.
// Dispatch: ROWS workgroups, 1-D (the runtime may split it into x, y).
#ifdef F16
enable f16;
#endif
#import onyxia::reduce
#ifdef SKIP_Y_F16
#import onyxia::rounding
#else
#ifdef Y_F16
#import onyxia::rounding
#endif
#endif
#ifdef INT8_A
#import onyxia::quant
#endif

@group(0) @binding(#{B_X}) var<storage, read> in_x: array<#{X_T}>;
#ifdef SKIP
@group(0) @binding(#{B_SKIP}) var<storage, read> in_skip: array<#{SKIP_T}>;
#endif
#ifdef BIAS
@group(0) @binding(#{B_BIAS}) var<storage, read> in_bias: array<#{BIAS_T}>;
#endif
@group(0) @binding(#{B_SCALE}) var<storage, read> in_scale: array<#{SCALE_T}>;
#ifdef BETA
@group(0) @binding(#{B_BETA}) var<storage, read> in_beta: array<#{BETA_T}>;
#endif
#ifdef SKIP_NORM
@group(0) @binding(#{B_SKIP_SCALE}) var<storage, read> in_skip_scale: array<#{SKIP_SCALE_T}>;
var<private> skip_inv_std: f32;  // the skip row's 1 / rms, set once per row before load_value reads it

// Element l of the skip row at flat index i, normalised and stored as the unfused norm stores it.
fn normed_skip(i: u32, l: u32) -> f32 {
    let y = f32(in_skip[i]) * skip_inv_std * f32(in_skip_scale[l % #{SKIP_SCALE_N}]);
#ifdef SKIP_Y_F16
    return round_to_f16(y);
#else
    return y;
#endif
}
#endif
@group(0) @binding(#{B_Y}) var<storage, read_write> out_y: array<#{Y_T}>;
#ifdef OUT_MEAN
@group(0) @binding(#{B_MEAN}) var<storage, read_write> out_mean: array<#{MEAN_T}>;
#endif
#ifdef OUT_INV_STD
@group(0) @binding(#{B_INV_STD}) var<storage, read_write> out_inv_std: array<#{INV_STD_T}>;
#endif
#ifdef OUT_SUM
@group(0) @binding(#{B_SUM}) var<storage, read_write> out_sum: array<#{SUM_T}>;
#endif
#ifdef INT8_A
@group(0) @binding(#{B_QA}) var<storage, read_write> out_qa: array<u32>;
@group(0) @binding(#{B_SA}) var<storage, read_write> out_sa: array<f32>;
#endif

// The value normalised at flat index `i` (element `l` of its row): input + skip + bias, in f32.
fn load_value(i: u32, l: u32) -> f32 {
    var v = f32(in_x[i]);
#ifdef SKIP_NORM
    v += normed_skip(i, l);
#else
#ifdef SKIP
    v += f32(in_skip[i % #{SKIP_N}]);
#endif
#endif
#ifdef BIAS
    v += f32(in_bias[l % #{BIAS_N}]);
#endif
    return v;
}

// Element l of the row at `base`, normalised, scaled and shifted, in f32.
fn normalized(base: u32, l: u32, mean: f32, inv_std: f32) -> f32 {
    var y = (load_value(base + l, l) - mean) * inv_std * f32(in_scale[l % #{SCALE_N}]);
#ifdef BETA
    y += f32(in_beta[l % #{BETA_N}]);
#endif
    return y;
}

#ifdef INT8_A
// Element l of the row (0 past L) written to out_y and returned as stored: what a reader would quantize.
fn stored_one(base: u32, l: u32, mean: f32, inv_std: f32) -> f32 {
    if (l >= #{L}) {
        return 0.0;
    }
    let y = normalized(base, l, mean, inv_std);
    out_y[base + l] = #{Y_T}(y);
#ifdef Y_F16
    return round_to_f16(y);  // not f32(f16(y)): the compiler may fold that round trip to y
#else
    return y;
#endif
}
#endif

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= #{ROWS}) {
        return;  // uniform: the whole workgroup leaves together
    }
    let base = row * #{L};
    var parts: array<f32, #{SPAN}>;  // this invocation's virtual lanes' partial sums (onyxia::reduce)
#ifdef SKIP_NORM
    for (var t = 0u; t < #{SPAN}u; t++) {
        var skip_squares = 0.0;
        for (var l = lid + t * #{WORKGROUP_SIZE}u; l < #{L}; l += TREE) {
            let s = f32(in_skip[base + l]);
            skip_squares += s * s;
        }
        parts[t] = skip_squares;
    }
    skip_inv_std = 1.0 / sqrt(lanes_sum(lid, &parts) / f32(#{L}) + f32(#{SKIP_EPSILON}));
#endif
#ifdef RMS
    let mean = 0.0;
#else
    for (var t = 0u; t < #{SPAN}u; t++) {
        var partial = 0.0;
        for (var l = lid + t * #{WORKGROUP_SIZE}u; l < #{L}; l += TREE) {
            partial += load_value(base + l, l);
        }
        parts[t] = partial;
    }
    let mean = lanes_sum(lid, &parts) / f32(#{L});
#endif
    for (var t = 0u; t < #{SPAN}u; t++) {
        var squares = 0.0;
        for (var l = lid + t * #{WORKGROUP_SIZE}u; l < #{L}; l += TREE) {
            let v = load_value(base + l, l);
#ifdef OUT_SUM
            out_sum[base + l] = #{SUM_T}(v);
#endif
            squares += (v - mean) * (v - mean);
        }
        parts[t] = squares;
    }
    let inv_std = 1.0 / sqrt(lanes_sum(lid, &parts) / f32(#{L}) + f32(#{EPSILON}));
#ifdef INT8_A
    for (var blk = lid; blk < #{NB}; blk += #{WORKGROUP_SIZE}u) {
        let k0 = blk * #{BLOCK_SIZE}u;
        // the block as out_y holds it (0 past L), what a reader would quantize, zeroed explicitly (wgpu 0.32 on
        // lavapipe kept a loop body's uninitialised `var` from the previous iteration: matmul_nbits.wgsl). Held
        // in an array: written out with `#for` instead, Gemma 3's 8-row norms took 0.3 ms more per step.
        var stored = array<f32, #{BLOCK_SIZE}>();
        var amax = 0.0;
        for (var j = 0u; j < #{BLOCK_SIZE}u; j++) {
            stored[j] = stored_one(base, k0 + j, mean, inv_std);
            amax = max(amax, abs(stored[j]));
        }
        let block = int8_block(amax);
        out_sa[blk * #{MP} + row] = block.y;
        let dst = (row * #{NB} + blk) * #{BLOCK_SIZE}u / 4u;
        for (var j = 0u; j < #{BLOCK_SIZE}u; j += 4u) {
            let four = vec4<f32>(stored[j], stored[j + 1u], stored[j + 2u], stored[j + 3u]);
            out_qa[dst + j / 4u] = int8_packed(int8_round(four, block.x));
        }
    }
#else
    for (var l = lid; l < #{L}; l += #{WORKGROUP_SIZE}u) {
        out_y[base + l] = #{Y_T}(normalized(base, l, mean, inv_std));
    }
#endif
    if (lid == 0u) {
#ifdef OUT_MEAN
        out_mean[row] = #{MEAN_T}(mean);
#endif
#ifdef OUT_INV_STD
        out_inv_std[row] = #{INV_STD_T}(inv_std);
#endif
    }
}
