#define_import_path onyxia::sdpa_row
// What ScaledDotProductAttention's kernels (attention/sdpa.wgsl) and its qk_matmul_output kernel
// (attention/sdpa_scores.wgsl) share: the scaled, soft-capped product of a query row and a key, the mask's
// bias, which keys a query may see at all (ai.onnx Attention's causal frontier, sliding window, padded keys
// and short mask), and the special-value tests. The importer declares in_q, in_k, [in_mask with MASK],
// [in_valid with VALID_KEYS] (array<i32>: nonpad_kv_seqlen, int64 stored as i32).
// Defs read: T (q/k/v storage), Q_BSNH (q is [B, SEQ, NUM_HEADS, HEAD_SIZE], else [B, NUM_HEADS, SEQ, ..]), HEAD_SIZE, NUM_HEADS, K_HEADS, K_GROUP, optional f32 literals Q_SCALE,
//       K_SCALE, SCALE, DIVISOR, SOFTCAP; MASK with MASK_T and for a bool mask MASK_TRUE / MASK_FALSE;
//       structural masks: VALID_KEYS (key j of batch row b exists iff j < in_valid[b]), MASK_SHORT (keys at
//       or past the mask's last dim MASK_KEYS are hidden), CAUSAL (key j <= the query's position),
//       WINDOW_LEFT / WINDOW_RIGHT (position - j <= left, j - position <= right), OFFSET_FROM_VALID (the
//       query's position is s + valid(b) - SEQ - OFFSET_TRIM, an i32 literal: the bottom-right alignment
//       of a cache, valid(b) being in_valid[b] or KEYS; else s).
// Dims: SEQ, KEYS; with MASK the strides MASK_B, MASK_N, MASK_S, MASK_J; with MASK_SHORT MASK_KEYS.

fn is_finite(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u;
}

fn is_minus_inf(x: f32) -> bool {
    return bitcast<u32>(x) == 0xff800000u;
}

fn is_nan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

fn minus_inf() -> f32 {
    return bitcast<f32>(0xff800000u);
}

// q row (b, head, s) times q_scale, as the graph's Mul rounds it.
fn load_query(q: ptr<function, array<f32, #{HEAD_SIZE}>>, b: u32, head: u32, s: u32) {
#ifdef Q_BSNH
    let base = ((b * #{SEQ} + s) * #{NUM_HEADS}u + head) * #{HEAD_SIZE}u;
#else
    let base = ((b * #{NUM_HEADS}u + head) * #{SEQ} + s) * #{HEAD_SIZE}u;
#endif
    for (var h = 0u; h < #{HEAD_SIZE}u; h++) {
#ifdef Q_SCALE
        (*q)[h] = f32(in_q[base + h]) * #{Q_SCALE};
#else
        (*q)[h] = f32(in_q[base + h]);
#endif
    }
}

fn k_base(b: u32, head: u32) -> u32 {
    return (b * #{K_HEADS}u + head / #{K_GROUP}u) * #{KEYS} * #{HEAD_SIZE}u;
}

// The scaled product of the query and key row `k_row`, before the soft cap.
fn raw_score(q: ptr<function, array<f32, #{HEAD_SIZE}>>, k_row: u32) -> f32 {
    var x = 0.0;
    for (var h = 0u; h < #{HEAD_SIZE}u; h++) {
#ifdef K_SCALE
        x += (*q)[h] * (f32(in_k[k_row + h]) * #{K_SCALE});
#else
        x += (*q)[h] * f32(in_k[k_row + h]);
#endif
    }
#ifdef SCALE
    x = x * #{SCALE};
#endif
#ifdef DIVISOR
    x = x / #{DIVISOR};
#endif
    return x;
}

fn soft_cap(x: f32) -> f32 {
#ifdef SOFTCAP
    // tanh saturates long before 15; the clamp keeps exp-based tanh implementations away from inf/inf
    let capped = x / #{SOFTCAP};
    return select(tanh(clamp(capped, -15.0, 15.0)), capped, is_nan(capped)) * #{SOFTCAP};
#else
    return x;
#endif
}

// The mask's bias for key j (0 without a mask).
fn mask_bias(b: u32, head: u32, s: u32, j: u32) -> f32 {
#ifdef MASK
    let m = in_mask[b * #{MASK_B} + head * #{MASK_N} + s * #{MASK_S} + j * #{MASK_J}];
#ifdef MASK_TRUE
    return select(#{MASK_FALSE}, #{MASK_TRUE}, m != 0u);
#else
    return f32(m);
#endif
#else
    return 0.0;
#endif
}

// The logit of key j: the scaled product, soft-capped, plus the mask, in the graph's order.
fn logit(q: ptr<function, array<f32, #{HEAD_SIZE}>>, k_row: u32, b: u32, head: u32, s: u32, j: u32) -> f32 {
#ifdef MASK
    return soft_cap(raw_score(q, k_row)) + mask_bias(b, head, s, j);
#else
    return soft_cap(raw_score(q, k_row));
#endif
}

// The query's position among the keys (the causal frontier and the window are measured from it).
fn query_position(b: u32, s: u32) -> i32 {
#ifdef OFFSET_FROM_VALID
#ifdef VALID_KEYS
    return i32(s) + in_valid[b] - i32(#{SEQ}) - #{OFFSET_TRIM};
#else
    return i32(s) + i32(#{KEYS}) - i32(#{SEQ}) - #{OFFSET_TRIM};
#endif
#else
    return i32(s);
#endif
}

// Whether query s of batch row b may see key j at all (a hidden key weighs exactly 0).
fn key_allowed(b: u32, s: u32, j: u32) -> bool {
    var ok = true;
#ifdef VALID_KEYS
    ok = ok && i32(j) < in_valid[b];
#endif
#ifdef MASK_SHORT
    ok = ok && j < #{MASK_KEYS};
#endif
    let p = query_position(b, s);
#ifdef CAUSAL
    ok = ok && i32(j) <= p;
#endif
#ifdef WINDOW_LEFT
    ok = ok && p - i32(j) <= #{WINDOW_LEFT};
#endif
#ifdef WINDOW_RIGHT
    ok = ok && i32(j) - p <= #{WINDOW_RIGHT};
#endif
    return ok;
}
