// GroupQueryAttention's present_key / present_value: the new keys and values moved from the
// input layout [B, S, KV_HEADS * HEAD_SIZE] (BSNH) to the cache layout [B, KV_HEADS, TOTAL, HEAD_SIZE]
// (BNSH), rows past the new ones zeroed (as onnxruntime leaves them). With do_rotary the keys are
// stored rotated, so attention reads them from here as they are.
// Bindings: 0 new_k, 1 new_v, [2 cos_cache, 3 sin_cache with ROTARY] (read), then present_k, present_v (write).
// Defs: T (WGSL storage type), F16 (flag), WORKGROUP_SIZE,
//       ROTARY (optional: rotated elements per head, 2 * cos_cache width), INTERLEAVED (true | false, with ROTARY).
// Dims: N elements of one present tensor, KV_HEADS, TOTAL (present sequence length), SEQ (new
//       sequence length), HEAD_SIZE; with ROTARY also MAX_POS (cos/sin cache rows).
// Dispatch: ceil(N / WORKGROUP_SIZE), 1-D (the runtime may split it into x, y).
// Positions are 0..SEQ-1 (onnxruntime's first prompt, right padding included). A non-empty past
// will add bindings for past_k / past_v copied into rows [0, PAST) and shift the positions by the
// past length (not yet needed: the operator accepts only an empty past).
#ifdef F16
enable f16;
#endif
#import onyxia::indexing
#ifdef ROTARY
#import onyxia::rotary
#endif

@group(0) @binding(0) var<storage, read> new_k: array<#{T}>;
@group(0) @binding(1) var<storage, read> new_v: array<#{T}>;
#ifdef ROTARY
@group(0) @binding(2) var<storage, read> cos_cache: array<#{T}>;
@group(0) @binding(3) var<storage, read> sin_cache: array<#{T}>;
@group(0) @binding(4) var<storage, read_write> present_k: array<#{T}>;
@group(0) @binding(5) var<storage, read_write> present_v: array<#{T}>;
#else
@group(0) @binding(2) var<storage, read_write> present_k: array<#{T}>;
@group(0) @binding(3) var<storage, read_write> present_v: array<#{T}>;
#endif

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = flat_invocation(wid, nwg, lid, #{WORKGROUP_SIZE}u);
    if (i >= #{N}) {
        return;
    }
    let h = i % #{HEAD_SIZE};
    let row = i / #{HEAD_SIZE};
    let t = row % #{TOTAL};
    let n = (row / #{TOTAL}) % #{KV_HEADS};
    let b = row / (#{TOTAL} * #{KV_HEADS});
    var k = #{T}(0);
    var v = #{T}(0);
    if (t < #{SEQ}) {
        let head_base = ((b * #{SEQ} + t) * #{KV_HEADS} + n) * #{HEAD_SIZE};
        k = new_k[head_base + h];
        v = new_v[head_base + h];
#ifdef ROTARY
        if (h < #{ROTARY}u) {
            let tap = rotary_tap(h, #{ROTARY}u, #{INTERLEAVED});
            // an id outside the cache is invalid input; clamping reads a real row, never out of bounds
            let c = min(t, #{MAX_POS} - 1u) * (#{ROTARY}u / 2u) + tap.cache;
            let partner = f32(new_k[head_base + tap.partner]);
            k = #{T}(rotary_apply(f32(k), partner, tap, f32(cos_cache[c]), f32(sin_cache[c])));
        }
#endif
    }
    present_k[i] = k;
    present_v[i] = v;
}
