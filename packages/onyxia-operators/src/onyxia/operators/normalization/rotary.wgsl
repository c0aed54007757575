// com.microsoft RotaryEmbedding: rotates the first ROTARY elements of every head by the angle of its
// position, one invocation per output element (the rest of the head is copied). The rotation math is
// onyxia::rotary, shared with fused attention kernels.
// Bindings: 0 in_x, 1 in_pos (position ids: int64 stored as i32), 2 in_cos, 3 in_sin (read), 4 out_y.
// Defs: X_T, COS_T, SIN_T, Y_T  WGSL storage types; F16 (flag); WORKGROUP_SIZE
//       INTERLEAVED  true | false (onnxruntime's `interleaved`: pairs (2k, 2k+1) vs (k, k + ROTARY/2))
//       POS_OFFSET   flag: in_pos holds one start position; position = in_pos[0] + s (onnxruntime's
//                    format 0). Absent: position = in_pos[b * POS_B_STRIDE + s] (format 1).
// Dims (literal when static, immediates when symbolic): N elements; HEAD head size; ROTARY rotated
//       elements per head (even, <= HEAD); ROW elements between consecutive positions (hidden size for
//       [B, S, hidden] input, HEAD for [B, heads, S, HEAD]); S sequence length; BATCH elements per batch
//       item; POS_B_STRIDE (S, or 0 when one row of ids serves every batch item); CACHE_W cos/sin row
//       width; MAX_POS cache rows.
//       ANGLE_CACHE  flag: in_cos and in_sin are one f32 angle table; cos/sin are taken here.
#ifdef F16
enable f16;
#endif
#import onyxia::entry
#import onyxia::rotary

@group(0) @binding(0) var<storage, read> in_x: array<#{X_T}>;
@group(0) @binding(1) var<storage, read> in_pos: array<i32>;
@group(0) @binding(2) var<storage, read> in_cos: array<#{COS_T}>;
@group(0) @binding(3) var<storage, read> in_sin: array<#{SIN_T}>;
@group(0) @binding(4) var<storage, read_write> out_y: array<#{Y_T}>;

fn element_count() -> u32 { return #{N}; }

fn element(i: u32) {
    let d = i % #{HEAD};
    if (d >= #{ROTARY}) {
        out_y[i] = #{Y_T}(in_x[i]);  // partial rotary: the tail of the head passes through
        return;
    }
    let s = (i / #{ROW}) % #{S};
#ifdef POS_OFFSET
    let position = in_pos[0] + i32(s);
#else
    let position = in_pos[(i / #{BATCH}) * #{POS_B_STRIDE} + s];
#endif
    // An id outside the cache is invalid input; clamping reads a real row instead of out of bounds.
    let row = u32(clamp(position, 0, i32(#{MAX_POS}) - 1));
    let tap = rotary_tap(d, #{ROTARY}, #{INTERLEAVED});
    let c = row * #{CACHE_W} + tap.cache;
    let partner = f32(in_x[i - d + tap.partner]);
#ifdef ANGLE_CACHE
    let cos_sin = vec2<f32>(cos(f32(in_cos[c])), sin(f32(in_sin[c])));  // both caches are the angle table
#else
    let cos_sin = vec2<f32>(f32(in_cos[c]), f32(in_sin[c]));
#endif
    out_y[i] = #{Y_T}(rotary_apply(f32(in_x[i]), partner, tap, cos_sin.x, cos_sin.y));
}
