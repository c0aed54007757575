// GroupQueryAttention core: causal softmax(q k^T * scale) v over the extended KV cache that
// kv_cache.wgsl wrote (row r of a batch row's cache is at the position onyxia::kv_rows gives).
// Two kernels, one per main, chosen by DECODE; scores and sums are f32 whatever the storage type.
// - rows (no DECODE): one invocation per (query row, head). Keys stream through an online softmax
//   (running max, running sum, rescaled accumulator), so no score matrix is stored and no barrier is
//   needed: on lavapipe this measured several times faster for prompts than a workgroup per row, whose
//   reductions cost a barrier round per 64 keys. The invocations of a workgroup are consecutive query
//   rows of one head, so they read the same k and v rows together.
// - decode (DECODE, SEQ = 1): one workgroup per (head, batch) row, its invocations splitting the keys,
//   so a one-token step spreads its O(total) work over the workgroup instead of one invocation.
//   Scores go to the `scores` scratch ([B, NUM_HEADS, KV_ROWS] f32), then max and sum reductions,
//   then each invocation sums p * v for one dimension over a slice of the keys.
// Bindings (numbers from the BIND_* defs): in_q, in_k, in_v (the extended caches, BNSH), seqlens_k,
//       [cos_cache, sin_cache with ROTARY], [the slots table with RESIDENT] (read), then out_y, [scores with
//       DECODE] (write), then with CHECKED
//       the error word (ERRORS_BINDING; ERROR_SLOT immediate: onyxia::errors) seqlen() reports into.
// Defs: T (storage type of q/k/v/out), SEQLENS_T (i32), F16 (flag), WORKGROUP_SIZE (a power of two with
//       DECODE), BIND_*, HEAD_SIZE, NUM_HEADS, GROUP (query heads per kv head), Q_STRIDE (elements between
//       tokens' q rows: NUM_HEADS * HEAD_SIZE, or the packed QKV row, whose q heads come first), SCALE (f32 literal),
//       SOFTCAP (optional f32 literal: scores become SOFTCAP * tanh(score / SOFTCAP)),
//       WINDOW (local_window_size, 0 for none: query p sees keys j with p - j < WINDOW, onnxruntime's
//       convention), ROTARY (optional: rotated elements of each q head; the keys arrive rotated),
//       INTERLEAVED; with DECODE also DIM_LANES (min(HEAD_SIZE, WORKGROUP_SIZE)) and KEY_GROUPS
//       (WORKGROUP_SIZE / DIM_LANES: key slices summed in parallel per dimension); RESIDENT (flag: in_k and
//       in_v are the session's resident caches, batch row b in slot rows[b, 0]; onyxia::kv_rows), BIND_SLOTS.
// Dims: SEQ (query sequence length), KV_ROWS (cache rows per kv head), PAST_ROWS (rows per head of the
//       past buffer, 0 without one); with ROTARY also MAX_POS.
// Dispatch: rows (ceil(SEQ / WORKGROUP_SIZE), NUM_HEADS, batch); decode (1, NUM_HEADS, batch).
// q is [B, SEQ, Q_STRIDE] (its first NUM_HEADS * HEAD_SIZE columns read), out [B, SEQ, NUM_HEADS * HEAD_SIZE]. A query that sees no key (a right-padded row past
// the window) outputs zeros, as onnxruntime's CPU kernel does.
#ifdef F16
enable f16;
#endif
#import onyxia::kv_rows
#import onyxia::gqa_io
#ifdef DECODE
#import onyxia::reduce
#import onyxia::attend_row
#endif

// in_q, seqlens_k, cos_cache, sin_cache and out_y: onyxia::gqa_io
@group(0) @binding(#{BIND_K}) var<storage, read> in_k: array<#{T}>;
@group(0) @binding(#{BIND_V}) var<storage, read> in_v: array<#{T}>;
#ifdef DECODE
@group(0) @binding(#{BIND_SCORES}) var<storage, read_write> scores: array<f32>;
var<workgroup> partial: array<f32, #{WORKGROUP_SIZE}>;
#endif

fn score(q: ptr<function, array<f32, #{HEAD_SIZE}>>, k_row: u32) -> f32 {
    var dot = 0.0;
    for (var h = 0u; h < #{HEAD_SIZE}u; h++) {
        dot += (*q)[h] * f32(in_k[k_row + h]);
    }
    return softcapped(dot);
}

// Query row `s` of (batch b, head): its scaled, rotated q and the cache rows it sees.
fn load_query(q: ptr<function, array<f32, #{HEAD_SIZE}>>, b: u32, s: u32, head: u32) -> KeyRange {
    let range = key_range(kv_rows(seqlen(b), #{SEQ}, #{PAST_ROWS}), s, #{WINDOW}u);
    let q_base = (b * #{SEQ} + s) * #{Q_STRIDE}u + head * #{HEAD_SIZE}u;
    for (var h = 0u; h < #{HEAD_SIZE}u; h++) {
        (*q)[h] = query_element(q_base, h, range.position) * #{SCALE};
    }
    return range;
}

fn kv_base(b: u32, head: u32) -> u32 {
    return ((cache_slot(b) * #{NUM_HEADS}u + head) / #{GROUP}u) * #{KV_ROWS} * #{HEAD_SIZE}u;
}

#ifndef DECODE
@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let s = wid.x * #{WORKGROUP_SIZE}u + lid;
    let head = wid.y;
    let b = wid.z;
    if (s >= #{SEQ}) {
        return;
    }
    var q: array<f32, #{HEAD_SIZE}>;
    let range = load_query(&q, b, s, head);
    let base = kv_base(b, head);
    // Finite stand-in for -inf: the first key sets a finite max, after which exp(old - new) of the
    // stand-in underflows to exactly 0, with no inf arithmetic involved.
    var run_max = -3.0e38;
    var run_sum = 0.0;
    var acc: array<f32, #{HEAD_SIZE}>;
    for (var j = range.lo; j < range.hi; j++) {
        let row = base + j * #{HEAD_SIZE}u;
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
    let inv_sum = select(1.0 / run_sum, 0.0, run_sum == 0.0);
    let out_base = ((b * #{SEQ} + s) * #{NUM_HEADS}u + head) * #{HEAD_SIZE}u;
    for (var h = 0u; h < #{HEAD_SIZE}u; h++) {
        out_y[out_base + h] = #{T}(acc[h] * inv_sum);
    }
}
#else
fn row_value(base: u32, j: u32, new_row: u32, h: u32) -> f32 {
    return f32(in_v[base + j * #{HEAD_SIZE}u + h]);
}

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let head = wid.y;
    let b = wid.z;
    if (#{SEQ} != 1u) {
        return;  // the rows kernel serves this step (uniform: the whole workgroup leaves)
    }
    var q: array<f32, #{HEAD_SIZE}>;
    let range = load_query(&q, b, 0u, head);
    let base = kv_base(b, head);
    let score_base = (b * #{NUM_HEADS}u + head) * #{KV_ROWS};
    var local_max = -3.0e38;  // finite stand-in for -inf, as in the rows kernel
    for (var j = range.lo + lid; j < range.hi; j += #{WORKGROUP_SIZE}u) {
        let x = score(&q, base + j * #{HEAD_SIZE}u);
        scores[score_base + j] = x;
        local_max = max(local_max, x);
    }
    let out_base = (b * #{NUM_HEADS}u + head) * #{HEAD_SIZE}u;
    attend_row(lid, range.lo, range.hi, base, 0xffffffffu, score_base, out_base, local_max);
}
#endif
