#define_import_path onyxia::gqa_io
// What every GroupQueryAttention kernel (attention/gqa.wgsl, gqa_prefill.wgsl, gqa_decode_append.wgsl,
// gqa_decode_quads.wgsl) reads and writes the same way, declared once: the query (or the packed QKV) in_q,
// seqlens_k, with ROTARY the cos and sin caches, the output out_y, and for the kernels that append a one-token
// step's rows themselves the new key and value rows (new_k(i), new_v(i): their own bindings with BIND_NEW_K, or
// with PACKED columns K_OFFSET / V_OFFSET of in_q); then the functions over them. The caches stay in each
// kernel: their element type (T or vec4<T>) and access (read, or read-write for the appending kernels) differ.
// Reads defs T, SEQLENS_T, BIND_Q, BIND_SEQLENS, BIND_OUT, KV_ROWS, CHECKED (then ERRORS_BINDING, ERROR_SLOT:
// onyxia::errors), ROTARY, INTERLEAVED, BIND_COS, BIND_SIN, MAX_POS (with ROTARY), SOFTCAP (optional),
// BIND_NEW_K, BIND_NEW_V, PACKED, K_OFFSET, V_OFFSET.
#ifdef CHECKED
#import onyxia::errors
#endif
#ifdef ROTARY
#import onyxia::rotary
#endif

@group(0) @binding(#{BIND_Q}) var<storage, read> in_q: array<#{T}>;
@group(0) @binding(#{BIND_SEQLENS}) var<storage, read> seqlens_k: array<#{SEQLENS_T}>;
#ifdef ROTARY
@group(0) @binding(#{BIND_COS}) var<storage, read> cos_cache: array<#{T}>;
@group(0) @binding(#{BIND_SIN}) var<storage, read> sin_cache: array<#{T}>;
#endif
@group(0) @binding(#{BIND_OUT}) var<storage, read_write> out_y: array<#{T}>;
#ifdef PACKED
fn new_k(i: u32) -> #{T} { return in_q[i + #{K_OFFSET}u]; }
fn new_v(i: u32) -> #{T} { return in_q[i + #{V_OFFSET}u]; }
#endif
#ifdef BIND_NEW_K
@group(0) @binding(#{BIND_NEW_K}) var<storage, read> in_new_k: array<#{T}>;
@group(0) @binding(#{BIND_NEW_V}) var<storage, read> in_new_v: array<#{T}>;
fn new_k(i: u32) -> #{T} { return in_new_k[i]; }
fn new_v(i: u32) -> #{T} { return in_new_v[i]; }
#endif

// seqlens_k[b], which onnxruntime refuses outside [0, KV_ROWS) (the present length): with CHECKED (every cache but
// the windowed one) a value outside is reported in the node's error slot and clamped.
fn seqlen(b: u32) -> i32 {
    let k = i32(seqlens_k[b]);
#ifdef CHECKED
    if (k < 0 || k >= i32(#{KV_ROWS})) {
        report_error(ERROR_INDEX_OUT_OF_RANGE, k);
        return clamp(k, 0, i32(#{KV_ROWS}) - 1);
    }
#endif
    return k;
}

// The element that element h of a head pairs with under rotary (h itself past ROTARY, or without it).
fn partner_of(h: u32) -> u32 {
#ifdef ROTARY
    if (h < #{ROTARY}u) {
        return rotary_tap(h, #{ROTARY}u, #{INTERLEAVED}).partner;
    }
#endif
    return h;
}

// Element h of a head, x, rotated to `position` with its partner's value (elements past ROTARY pass through).
fn rotated(x: f32, partner: f32, h: u32, position: u32) -> f32 {
#ifdef ROTARY
    if (h < #{ROTARY}u) {
        let tap = rotary_tap(h, #{ROTARY}u, #{INTERLEAVED});
        // an id outside the cache is invalid input; clamping reads a real row, never out of bounds
        let c = min(position, #{MAX_POS} - 1u) * (#{ROTARY}u / 2u) + tap.cache;
        return rotary_apply(x, partner, tap, f32(cos_cache[c]), f32(sin_cache[c]));
    }
#endif
    return x;
}

// Element h of the query head at q_base in in_q, rotated to `position` (the partner is read only where rotated).
fn query_element(q_base: u32, h: u32, position: u32) -> f32 {
    let x = f32(in_q[q_base + h]);
#ifdef ROTARY
    if (h < #{ROTARY}u) {
        return rotated(x, f32(in_q[q_base + partner_of(h)]), h, position);
    }
#endif
    return x;
}

// A score capped with SOFTCAP: SOFTCAP * tanh(score / SOFTCAP) (unchanged without it).
fn softcapped(dot: f32) -> f32 {
#ifdef SOFTCAP
    // tanh saturates long before 15; the clamp keeps exp-based tanh implementations away from inf/inf
    return #{SOFTCAP} * tanh(clamp(dot / #{SOFTCAP}, -15.0, 15.0));
#else
    return dot;
#endif
}
