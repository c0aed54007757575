// com.onyxia ApplyRotaryPosEmb: y = x * cos + rotate_half(x) * sin on the first ROTARY elements of every head,
// the rest copied (optimum's plain-op RoPE, Hugging Face's apply_rotary_pos_emb). One workgroup per output head
// row (b, n, s). The pairing is onyxia::rotary's half-split one, but cos/sin are read at the element's own column
// d through their broadcast strides, as the graph's Mul read them (a row's halves need not be equal). With NORM
// the head is first RMS-normalised exactly as normalization.wgsl reduces a SimplifiedLayerNormalization row of
// HEAD elements (same workgroup size, same tree) and rounded to Y_T where the unfused norm would store it, so the
// result equals the unfused norm followed by the rotation.
// Bindings: 0 in_x, 1 in_cos, 2 in_sin, [3 in_scale with NORM] (read), B_Y out_y.
// Defs: X_T, COS_T, SIN_T, SCALE_T, Y_T  WGSL storage types; F16 (flag: some type is f16); Y_F16 (flag, with
//       NORM: Y_T is f16); WORKGROUP_SIZE, SPAN (SimplifiedLayerNormalization's for a row of HEAD);
//       NORM (flag: input 3 is the norm's scale), EPSILON (f32 literal, with NORM); TRANSPOSE_INPUT (flag: x is
//       [B, S, N, HEAD], else [B, N, S, HEAD]); B_Y (the output's binding: 3, or 4 with NORM).
// Dims (literal when static, immediates when symbolic): ROWS (B * N * S output head rows); HEADS (N); S; HEAD;
//       ROTARY (even, <= HEAD); COS_B, COS_N, COS_S, COS_D and SIN_* (element strides of cos / sin along the
//       output's b, n, s and d; 0 where they broadcast).
// Dispatch: ROWS workgroups, 1-D (the runtime may split it into x, y).
#ifdef F16
enable f16;
#endif
#import onyxia::rotary
#ifdef NORM
#import onyxia::reduce
#endif
#ifdef Y_F16
#import onyxia::rounding
#endif

@group(0) @binding(0) var<storage, read> in_x: array<#{X_T}>;
@group(0) @binding(1) var<storage, read> in_cos: array<#{COS_T}>;
@group(0) @binding(2) var<storage, read> in_sin: array<#{SIN_T}>;
#ifdef NORM
@group(0) @binding(3) var<storage, read> in_scale: array<#{SCALE_T}>;
#endif
@group(0) @binding(#{B_Y}) var<storage, read_write> out_y: array<#{Y_T}>;

// Element d of the head at `base`, normalised and rounded as the norm stores it with NORM (see onyxia::rounding
// for why not `f32(Y_T(y))`).
fn head_value(base: u32, d: u32, inv_std: f32) -> f32 {
#ifdef NORM
    let y = f32(in_x[base + d]) * inv_std * f32(in_scale[d]);
#ifdef Y_F16
    return round_to_f16(y);
#else
    return y;
#endif
#else
    return f32(in_x[base + d]);
#endif
}

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
    let s = row % #{S};
    let n = (row / #{S}) % #{HEADS};
    let b = row / (#{S} * #{HEADS});
#ifdef TRANSPOSE_INPUT
    let base = ((b * #{S} + s) * #{HEADS} + n) * #{HEAD};
#else
    let base = row * #{HEAD};
#endif
#ifdef NORM
    var parts: array<f32, #{SPAN}>;  // this invocation's virtual lanes' partial sums (onyxia::reduce)
    for (var t = 0u; t < #{SPAN}u; t++) {
        var squares = 0.0;
        for (var d = lid + t * #{WORKGROUP_SIZE}u; d < #{HEAD}; d += TREE) {
            let v = f32(in_x[base + d]);
            squares += v * v;
        }
        parts[t] = squares;
    }
    let inv_std = 1.0 / sqrt(lanes_sum(lid, &parts) / f32(#{HEAD}) + f32(#{EPSILON}));
#else
    let inv_std = 1.0;
#endif
    let cos_row = b * #{COS_B} + n * #{COS_N} + s * #{COS_S};
    let sin_row = b * #{SIN_B} + n * #{SIN_N} + s * #{SIN_S};
    let out_base = row * #{HEAD};
    for (var d = lid; d < #{HEAD}; d += #{WORKGROUP_SIZE}u) {
        let x = head_value(base, d, inv_std);
        if (d >= #{ROTARY}) {
            out_y[out_base + d] = #{Y_T}(x);  // partial rotary: the tail of the head passes through
            continue;
        }
        let tap = rotary_tap(d, #{ROTARY}, false);
        let partner = head_value(base, tap.partner, inv_std);
        let c = f32(in_cos[cos_row + d * #{COS_D}]);
        let sn = f32(in_sin[sin_row + d * #{SIN_D}]);
        out_y[out_base + d] = #{Y_T}(rotary_apply(x, partner, tap, c, sn));
    }
}
