// GroupQueryAttention's one-token step over an in-place cache (present aliased to past), KV append included:
// one dispatch where the unfused step takes two (kv_cache.wgsl's append, then gqa.wgsl's decode kernel).
// One workgroup per (head, batch) row, as gqa.wgsl's decode kernel, computing the same values in the same
// order (both end in onyxia::attend_row): each workgroup builds the new key (rotated with ROTARY, stored as T, as the cache stores it) and
// value rows of its kv head in workgroup memory and reads them there for the new row; the past rows come
// from the cache. The first query head of each kv head writes the new rows into the cache: no workgroup
// reads a cache row another writes, so one dispatch is race-free.
// Bindings (numbers from the BIND_* defs): in_q (the query, or the packed QKV with PACKED), [new_k, new_v
//       without PACKED], seqlens_k, [cos_cache, sin_cache with ROTARY], [the slots table with RESIDENT]
//       (read), then cache_k, cache_v (the present buffers, BNSH, read and written), out_y, scores (f32
//       scratch [B, NUM_HEADS, KV_ROWS]) (write), then with CHECKED the error word (ERRORS_BINDING,
//       ERROR_SLOT) as gqa.wgsl.
// Defs: T, SEQLENS_T, F16, WORKGROUP_SIZE (a power of two), BIND_*, HEAD_SIZE, NUM_HEADS, KV_HEADS, GROUP,
//       Q_STRIDE, SCALE, SOFTCAP (optional), WINDOW, ROTARY (optional), INTERLEAVED, DIM_LANES, KEY_GROUPS,
//       RESIDENT (flag), BIND_SLOTS as gqa.wgsl; NEW_STRIDE, K_OFFSET, V_OFFSET, PACKED as kv_cache.wgsl.
// Dims: SEQ (the step's length: the kernel works only when it is 1), KV_ROWS (rows per kv head of the
//       present buffer), PAST_ROWS (the same buffer's rows: in place, past and present are one); MAX_POS with ROTARY.
// Dispatch: (1, NUM_HEADS, batch) for a one-token step, (0, ...) otherwise (the unfused kernels serve it).
#ifdef F16
enable f16;
#endif
#import onyxia::kv_rows
#import onyxia::gqa_io
#import onyxia::reduce
#import onyxia::attend_row

// in_q, new_k()/new_v() and their bindings, seqlens_k, cos_cache, sin_cache and out_y: onyxia::gqa_io
@group(0) @binding(#{BIND_CACHE_K}) var<storage, read_write> cache_k: array<#{T}>;
@group(0) @binding(#{BIND_CACHE_V}) var<storage, read_write> cache_v: array<#{T}>;
@group(0) @binding(#{BIND_SCORES}) var<storage, read_write> scores: array<f32>;
var<workgroup> partial: array<f32, #{WORKGROUP_SIZE}>;
var<workgroup> new_k_row: array<#{T}, #{HEAD_SIZE}>;  // the new key as the cache holds it (rotated, in T)
var<workgroup> new_v_row: array<#{T}, #{HEAD_SIZE}>;

fn key_element(row: u32, is_new: bool, h: u32) -> f32 {
    if (is_new) {
        return f32(new_k_row[h]);
    }
    return f32(cache_k[row + h]);
}

fn row_value(base: u32, j: u32, new_row: u32, h: u32) -> f32 {
    if (j == new_row) {
        return f32(new_v_row[h]);
    }
    return f32(cache_v[base + j * #{HEAD_SIZE}u + h]);
}

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let head = wid.y;
    let b = wid.z;
    if (#{SEQ} != 1u) {
        return;  // the unfused append and rows kernel serve this step (uniform: the whole workgroup leaves)
    }
    let rows = kv_rows(seqlen(b), 1u, #{PAST_ROWS});
    let range = key_range(rows, 0u, #{WINDOW}u);
    let kv_head = head / #{GROUP}u;
    let base = (cache_slot(b) * #{KV_HEADS}u + kv_head) * #{KV_ROWS} * #{HEAD_SIZE}u;
    let new_row = rows.kept;  // the new key's cache row (and its row in key_range's numbering)
    // the new key and value rows, as kv_cache.wgsl writes them; the group's first head stores them
    let new_base = b * #{NEW_STRIDE}u + kv_head * #{HEAD_SIZE}u;
    for (var h = lid; h < #{HEAD_SIZE}u; h += #{WORKGROUP_SIZE}u) {
        let k = #{T}(rotated(f32(new_k(new_base + h)), f32(new_k(new_base + partner_of(h))), h, range.position));
        let v = new_v(new_base + h);
        new_k_row[h] = k;
        new_v_row[h] = v;
        if (head % #{GROUP}u == 0u) {
            cache_k[base + new_row * #{HEAD_SIZE}u + h] = k;
            cache_v[base + new_row * #{HEAD_SIZE}u + h] = v;
        }
    }
    workgroupBarrier();
    // the scaled, rotated query (gqa.wgsl's load_query)
    var q: array<f32, #{HEAD_SIZE}>;
    let q_base = b * #{Q_STRIDE}u + head * #{HEAD_SIZE}u;
    for (var h = 0u; h < #{HEAD_SIZE}u; h++) {
        let x = rotated(f32(in_q[q_base + h]), f32(in_q[q_base + partner_of(h)]), h, range.position);
        q[h] = x * #{SCALE};
    }
    let score_base = (b * #{NUM_HEADS}u + head) * #{KV_ROWS};
    var local_max = -3.0e38;  // finite stand-in for -inf, as in gqa.wgsl
    for (var j = range.lo + lid; j < range.hi; j += #{WORKGROUP_SIZE}u) {
        let row = base + j * #{HEAD_SIZE}u;
        var dot = 0.0;
        for (var h = 0u; h < #{HEAD_SIZE}u; h++) {
            dot += q[h] * key_element(row, j == new_row, h);
        }
        let x = softcapped(dot);
        scores[score_base + j] = x;
        local_max = max(local_max, x);
    }
    let out_base = (b * #{NUM_HEADS}u + head) * #{HEAD_SIZE}u;
    attend_row(lid, range.lo, range.hi, base, new_row, score_base, out_base, local_max);
}
