// com.onyxia RmsNormRotary: RMS-normalise each head of x, then rotate it as com.microsoft RotaryEmbedding does
// (Gemma 3 / Qwen 3 q_norm and k_norm before RoPE). One workgroup per head: the sum of squares is reduced exactly
// as normalization.wgsl reduces a SimplifiedLayerNormalization row of HEAD elements (same workgroup size, same
// tree), and each normalised value is rounded to Y_T where the unfused norm (or the Cast after it) would store it,
// so the result equals the unfused norm followed by rotary.wgsl. Every invocation recomputes its rotation partner's normalised value.
// RmsNormRotaryPair (PAIR) does the same for a second tensor at the same positions (a layer's q and k): its heads
// take the workgroups after the first tensor's, with its own scale and row geometry.
// Bindings: 0 in_x, 1 in_pos (position ids: int64 stored as i32), 2 in_cos, 3 in_sin, 4 in_scale,
//       [5 in_x2, 6 in_scale2 with PAIR] (read), then B_Y out_y, [B_Y2 out_y2 with PAIR].
// Defs: X_T, COS_T, SIN_T, SCALE_T, Y_T  WGSL storage types (Y_T is X_T: the rotation's input type; x2, scale2
//       and y2 have x's, scale's and y's); F16 (flag: some type is f16), Y_F16 (flag: Y_T is f16)
//       WORKGROUP_SIZE, SPAN (SimplifiedLayerNormalization's for a row of HEAD), EPSILON (f32 literal)
//       INTERLEAVED, POS_OFFSET, ANGLE_CACHE  as rotary.wgsl; B_Y, B_Y2 (binding numbers), PAIR (flag)
// Dims (literal when static, immediates when symbolic): HEADS_TOTAL (heads in x: elements / HEAD); HEAD, ROTARY,
//       ROW, S, BATCH, POS_B_STRIDE, CACHE_W, MAX_POS as rotary.wgsl; with PAIR also HEADS_TOTAL2, ROW2, BATCH2
//       (x2's heads, elements per token and per batch item).
// Dispatch: HEADS_TOTAL (+ HEADS_TOTAL2) workgroups, 1-D (the runtime may split it into x, y).
#ifdef F16
enable f16;
#endif
#import onyxia::reduce
#import onyxia::rotary
#ifdef Y_F16
#import onyxia::rounding
#endif

@group(0) @binding(0) var<storage, read> in_x: array<#{X_T}>;
@group(0) @binding(1) var<storage, read> in_pos: array<i32>;
@group(0) @binding(2) var<storage, read> in_cos: array<#{COS_T}>;
@group(0) @binding(3) var<storage, read> in_sin: array<#{SIN_T}>;
@group(0) @binding(4) var<storage, read> in_scale: array<#{SCALE_T}>;
@group(0) @binding(#{B_Y}) var<storage, read_write> out_y: array<#{Y_T}>;
#ifdef PAIR
@group(0) @binding(5) var<storage, read> in_x2: array<#{X_T}>;
@group(0) @binding(6) var<storage, read> in_scale2: array<#{SCALE_T}>;
@group(0) @binding(#{B_Y2}) var<storage, read_write> out_y2: array<#{Y_T}>;
#endif

// Element i of x (of x2 when `second`), and element d of its scale.
fn x_at(second: bool, i: u32) -> f32 {
#ifdef PAIR
    if (second) {
        return f32(in_x2[i]);
    }
#endif
    return f32(in_x[i]);
}

fn scale_at(second: bool, d: u32) -> f32 {
#ifdef PAIR
    if (second) {
        return f32(in_scale2[d]);
    }
#endif
    return f32(in_scale[d]);
}

fn store(second: bool, i: u32, y: f32) {
#ifdef PAIR
    if (second) {
        out_y2[i] = #{Y_T}(y);
        return;
    }
#endif
    out_y[i] = #{Y_T}(y);
}

// Element d of the head at `base`, normalised and rounded as the norm stores it (see onyxia::rounding for why
// not `f32(Y_T(y))`).
fn normalized(second: bool, base: u32, d: u32, inv_std: f32) -> f32 {
    let y = x_at(second, base + d) * inv_std * scale_at(second, d);
#ifdef Y_F16
    return round_to_f16(y);
#else
    return y;
#endif
}

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    var head = wid.x + wid.y * nwg.x;
    var second = false;
    var row_len: u32 = #{ROW};
    var batch_len: u32 = #{BATCH};
    if (head >= #{HEADS_TOTAL}) {  // uniform: the whole workgroup takes the same branch
#ifdef PAIR
        head -= #{HEADS_TOTAL};
        second = true;
        row_len = #{ROW2};
        batch_len = #{BATCH2};
        if (head >= #{HEADS_TOTAL2}) {
            return;
        }
#else
        return;
#endif
    }
    let base = head * #{HEAD};
    var parts: array<f32, #{SPAN}>;  // this invocation's virtual lanes' partial sums (onyxia::reduce)
    for (var t = 0u; t < #{SPAN}u; t++) {
        var squares = 0.0;
        for (var d = lid + t * #{WORKGROUP_SIZE}u; d < #{HEAD}; d += TREE) {
            let v = x_at(second, base + d);
            squares += v * v;
        }
        parts[t] = squares;
    }
    let inv_std = 1.0 / sqrt(lanes_sum(lid, &parts) / f32(#{HEAD}) + f32(#{EPSILON}));
    let s = (base / row_len) % #{S};
#ifdef POS_OFFSET
    let position = in_pos[0] + i32(s);
#else
    let position = in_pos[(base / batch_len) * #{POS_B_STRIDE} + s];
#endif
    // An id outside the cache is invalid input; clamping reads a real row instead of out of bounds.
    let row = u32(clamp(position, 0, i32(#{MAX_POS}) - 1));
    for (var d = lid; d < #{HEAD}; d += #{WORKGROUP_SIZE}u) {
        let x = normalized(second, base, d, inv_std);
        if (d >= #{ROTARY}) {
            store(second, base + d, x);  // partial rotary: the tail of the head passes through
            continue;
        }
        let tap = rotary_tap(d, #{ROTARY}, #{INTERLEAVED});
        let c = row * #{CACHE_W} + tap.cache;
        let partner = normalized(second, base, tap.partner, inv_std);
#ifdef ANGLE_CACHE
        let cos_sin = vec2<f32>(cos(f32(in_cos[c])), sin(f32(in_sin[c])));  // both caches are the angle table
#else
        let cos_sin = vec2<f32>(f32(in_cos[c]), f32(in_sin[c]));
#endif
        store(second, base + d, rotary_apply(x, partner, tap, cos_sin.x, cos_sin.y));
    }
}
