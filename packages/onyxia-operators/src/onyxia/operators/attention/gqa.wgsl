// GroupQueryAttention core: causal softmax(q k^T * scale) v for one query row per workgroup, with
// the keys streamed in tiles of WORKGROUP_SIZE and an online (running max / running sum) softmax, so
// no score matrix is ever stored. Scores and sums are f32 whatever the storage type.
// Bindings: 0 in_q (read), 1 in_k (read), 2 in_v (read), 3 seqlens_k (read), 4 out_y (write).
// Defs: T (storage type of q/k/v/out), SEQLENS_T (i32), F16 (flag), WORKGROUP_SIZE (power of two),
//       HEAD_SIZE, HEAD_SLOTS (= ceil(HEAD_SIZE / WORKGROUP_SIZE): head dims each invocation accumulates),
//       NUM_HEADS, GROUP (query heads per kv head), SCALE (f32 literal),
//       SOFTCAP (optional f32 literal: scores become SOFTCAP * tanh(score / SOFTCAP)),
//       WINDOW (optional: query at position i sees keys j with i - j < WINDOW, onnxruntime's convention).
// Dims: SEQ (query sequence length), KV_BATCH_STRIDE, KV_HEAD_STRIDE, KV_SEQ_STRIDE (element strides of
//       k and v: the BSNH input now, the BNSH present cache once a past is supported).
// Dispatch: (SEQ, NUM_HEADS, batch). q and out are [B, SEQ, NUM_HEADS * HEAD_SIZE].
// Masking: key j is visible to query i when j <= i and j < seqlens_k[b] + 1 (right padding: padded
// query rows attend only to the real keys, as onnxruntime's CPU kernel does).
#ifdef F16
enable f16;
#endif
#import onyxia::reduce

@group(0) @binding(0) var<storage, read> in_q: array<#{T}>;
@group(0) @binding(1) var<storage, read> in_k: array<#{T}>;
@group(0) @binding(2) var<storage, read> in_v: array<#{T}>;
@group(0) @binding(3) var<storage, read> seqlens_k: array<#{SEQLENS_T}>;
@group(0) @binding(4) var<storage, read_write> out_y: array<#{T}>;

// Finite stand-in for -inf: the first tile always holds a visible key, so a running max is finite
// from then on and exp(MASKED - max) underflows to exactly 0 without inf arithmetic.
const MASKED: f32 = -3.0e38;

var<workgroup> q_row: array<f32, #{HEAD_SIZE}>;
var<workgroup> probs: array<f32, #{WORKGROUP_SIZE}>;
var<workgroup> total_len: u32;

fn score(j: u32, hi: u32, k_base: u32) -> f32 {
    if (j >= hi) {
        return MASKED;
    }
    var dot = 0.0;
    for (var h = 0u; h < #{HEAD_SIZE}u; h++) {
        dot += q_row[h] * f32(in_k[k_base + h]);
    }
#ifdef SOFTCAP
    // tanh saturates long before 15; the clamp keeps exp-based tanh implementations away from inf/inf
    dot = #{SOFTCAP} * tanh(clamp(dot / #{SOFTCAP}, -15.0, 15.0));
#endif
    return dot;
}

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let s = wid.x;
    let head = wid.y;
    let b = wid.z;
    let q_base = ((b * #{SEQ} + s) * #{NUM_HEADS}u + head) * #{HEAD_SIZE}u;
    if (lid == 0u) {
        total_len = u32(seqlens_k[b] + 1);
    }
    for (var h = lid; h < #{HEAD_SIZE}u; h += #{WORKGROUP_SIZE}u) {
        q_row[h] = f32(in_q[q_base + h]) * #{SCALE};
    }
    // a storage read is not uniform for WGSL; the bounds below gate barriers, so load it uniformly
    let total = workgroupUniformLoad(&total_len);
    let hi = min(s + 1u, total);
    var lo = 0u;
#ifdef WINDOW
    lo = select(0u, s + 1u - #{WINDOW}u, s + 1u > #{WINDOW}u);
#endif
    let kv_base = b * #{KV_BATCH_STRIDE} + (head / #{GROUP}u) * #{KV_HEAD_STRIDE};
    var run_max = MASKED;
    var run_sum = 0.0;
    var acc: array<f32, #{HEAD_SLOTS}>;
    for (var j0 = lo; j0 < hi; j0 += #{WORKGROUP_SIZE}u) {
        let j = j0 + lid;
        let x = score(j, hi, kv_base + j * #{KV_SEQ_STRIDE});
        let new_max = max(run_max, workgroup_max(lid, x));
        let p = exp(x - new_max);
        probs[lid] = p;
        let correction = exp(run_max - new_max);
        run_sum = run_sum * correction + workgroup_sum(lid, p);  // its barriers also publish `probs`
        run_max = new_max;
        let count = min(#{WORKGROUP_SIZE}u, hi - j0);
        for (var slot = 0u; slot < #{HEAD_SLOTS}u; slot++) {
            let h = lid + slot * #{WORKGROUP_SIZE}u;
            if (h < #{HEAD_SIZE}u) {
                var a = acc[slot] * correction;
                for (var jj = 0u; jj < count; jj++) {
                    a += probs[jj] * f32(in_v[kv_base + (j0 + jj) * #{KV_SEQ_STRIDE} + h]);
                }
                acc[slot] = a;
            }
        }
        workgroupBarrier();  // the next tile rewrites `probs`
    }
    let inv_sum = select(1.0 / run_sum, 0.0, run_sum == 0.0);  // no visible key (a fully masked window)
    for (var slot = 0u; slot < #{HEAD_SLOTS}u; slot++) {
        let h = lid + slot * #{WORKGROUP_SIZE}u;
        if (h < #{HEAD_SIZE}u) {
            out_y[q_base + h] = #{T}(acc[slot] * inv_sum);
        }
    }
}
