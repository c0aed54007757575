// GroupQueryAttention core: causal softmax(q k^T * scale) v with one invocation per (query row,
// head). Keys stream through an online softmax (running max, running sum, rescaled accumulator), so
// no score matrix is stored and no barrier is needed: on lavapipe this measured several times faster
// for short sequences (and no slower for long ones) than a workgroup-per-row form whose workgroup
// reductions cost a barrier round per 64 keys. The
// invocations of a workgroup are consecutive query rows of one head, so they read the same k and v
// rows together. Scores and sums are f32 whatever the storage type.
// Bindings: 0 in_q, 1 in_k, 2 in_v (the present caches, BNSH), 3 seqlens_k, [4 cos_cache, 5 sin_cache
//       with ROTARY] (read), then out_y (write).
// Defs: T (storage type of q/k/v/out), SEQLENS_T (i32), F16 (flag), WORKGROUP_SIZE,
//       HEAD_SIZE, NUM_HEADS, GROUP (query heads per kv head), SCALE (f32 literal),
//       SOFTCAP (optional f32 literal: scores become SOFTCAP * tanh(score / SOFTCAP)),
//       WINDOW (optional: query i sees keys j with i - j < WINDOW, onnxruntime's convention),
//       ROTARY (optional: rotated elements of each q head; the keys arrive rotated), INTERLEAVED.
// Dims: SEQ (query sequence length), TOTAL (cache rows per kv head); with ROTARY also MAX_POS.
// Dispatch: (ceil(SEQ / WORKGROUP_SIZE), NUM_HEADS, batch). q and out are [B, SEQ, NUM_HEADS * HEAD_SIZE].
// Masking: key j is visible to query i when j <= i and j < seqlens_k[b] + 1 (right padding: padded
// query rows attend only to the real keys, as onnxruntime's CPU kernel does).
#ifdef F16
enable f16;
#endif
#ifdef ROTARY
#import onyxia::rotary
#endif

@group(0) @binding(0) var<storage, read> in_q: array<#{T}>;
@group(0) @binding(1) var<storage, read> in_k: array<#{T}>;
@group(0) @binding(2) var<storage, read> in_v: array<#{T}>;
@group(0) @binding(3) var<storage, read> seqlens_k: array<#{SEQLENS_T}>;
#ifdef ROTARY
@group(0) @binding(4) var<storage, read> cos_cache: array<#{T}>;
@group(0) @binding(5) var<storage, read> sin_cache: array<#{T}>;
@group(0) @binding(6) var<storage, read_write> out_y: array<#{T}>;
#else
@group(0) @binding(4) var<storage, read_write> out_y: array<#{T}>;
#endif

fn query_element(q_base: u32, h: u32, position: u32) -> f32 {
    let x = f32(in_q[q_base + h]);
#ifdef ROTARY
    if (h < #{ROTARY}u) {
        let tap = rotary_tap(h, #{ROTARY}u, #{INTERLEAVED});
        let c = min(position, #{MAX_POS} - 1u) * (#{ROTARY}u / 2u) + tap.cache;
        return rotary_apply(x, f32(in_q[q_base + tap.partner]), tap, f32(cos_cache[c]), f32(sin_cache[c]));
    }
#endif
    return x;
}

fn score(q: ptr<function, array<f32, #{HEAD_SIZE}>>, k_row: u32) -> f32 {
    var dot = 0.0;
    for (var h = 0u; h < #{HEAD_SIZE}u; h++) {
        dot += (*q)[h] * f32(in_k[k_row + h]);
    }
#ifdef SOFTCAP
    // tanh saturates long before 15; the clamp keeps exp-based tanh implementations away from inf/inf
    dot = #{SOFTCAP} * tanh(clamp(dot / #{SOFTCAP}, -15.0, 15.0));
#endif
    return dot;
}

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let s = wid.x * #{WORKGROUP_SIZE}u + lid;
    let head = wid.y;
    let b = wid.z;
    if (s >= #{SEQ}) {
        return;
    }
    let q_base = ((b * #{SEQ} + s) * #{NUM_HEADS}u + head) * #{HEAD_SIZE}u;
    var q: array<f32, #{HEAD_SIZE}>;
    for (var h = 0u; h < #{HEAD_SIZE}u; h++) {
        q[h] = query_element(q_base, h, s) * #{SCALE};
    }
    let hi = min(s + 1u, u32(seqlens_k[b] + 1));
    var lo = 0u;
#ifdef WINDOW
    lo = select(0u, s + 1u - #{WINDOW}u, s + 1u > #{WINDOW}u);
#endif
    let kv_base = ((b * #{NUM_HEADS}u + head) / #{GROUP}u) * #{TOTAL} * #{HEAD_SIZE}u;
    // Finite stand-in for -inf: the first key sets a finite max, after which exp(old - new) of the
    // stand-in underflows to exactly 0, with no inf arithmetic involved.
    var run_max = -3.0e38;
    var run_sum = 0.0;
    var acc: array<f32, #{HEAD_SIZE}>;
    for (var j = lo; j < hi; j++) {
        let row = kv_base + j * #{HEAD_SIZE}u;
        let x = score(&q, row);
        let new_max = max(run_max, x);
        let correction = exp(run_max - new_max);
        let p = exp(x - new_max);
        run_sum = run_sum * correction + p;
        run_max = new_max;
        for (var h = 0u; h < #{HEAD_SIZE}u; h++) {
            acc[h] = acc[h] * correction + p * f32(in_v[row + h]);
        }
    }
    let inv_sum = select(1.0 / run_sum, 0.0, run_sum == 0.0);  // no visible key (a padded row past the window)
    for (var h = 0u; h < #{HEAD_SIZE}u; h++) {
        out_y[q_base + h] = #{T}(acc[h] * inv_sum);
    }
}
