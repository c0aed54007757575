// GroupQueryAttention's present_key / present_value: the new keys and values moved from the
// input layout [B, S, KV_HEADS * HEAD_SIZE] (BSNH) to the cache layout [B, KV_HEADS, TOTAL, HEAD_SIZE]
// (BNSH), rows past the new ones zeroed (as onnxruntime leaves them).
// Bindings: 0 new_k (read), 1 new_v (read), 2 present_k (write), 3 present_v (write).
// Defs: T (WGSL storage type), F16 (flag), WORKGROUP_SIZE.
// Dims: N elements of one present tensor, KV_HEADS, TOTAL (present sequence length), SEQ (new
//       sequence length), HEAD_SIZE.
// Dispatch: ceil(N / WORKGROUP_SIZE), 1-D (the runtime may split it into x, y).
// A non-empty past will add bindings for past_k / past_v copied into rows [0, PAST) (not yet needed:
// the operator accepts only an empty past).
#ifdef F16
enable f16;
#endif
#import onyxia::indexing

@group(0) @binding(0) var<storage, read> new_k: array<#{T}>;
@group(0) @binding(1) var<storage, read> new_v: array<#{T}>;
@group(0) @binding(2) var<storage, read_write> present_k: array<#{T}>;
@group(0) @binding(3) var<storage, read_write> present_v: array<#{T}>;

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
        let src = ((b * #{SEQ} + t) * #{KV_HEADS} + n) * #{HEAD_SIZE} + h;
        k = new_k[src];
        v = new_v[src];
    }
    present_k[i] = k;
    present_v[i] = v;
}
