// ScaledDotProductAttention (attention/sdpa.py): softmax(scaled q k^T + mask) v with grouped heads,
// onnxruntime's softmax over all KEYS keys, and its NaN rows. f32 throughout.
// Two kernels, one per main, chosen by DECODE (the structure of gqa.wgsl):
// - rows (no DECODE): one invocation per (query row, head), keys streamed through an online softmax
//   (running max, running sum, rescaled accumulator), no score matrix stored.
// - decode (DECODE, SEQ = 1): one workgroup per (head, batch) row, its invocations splitting the keys;
//   logits go to the `scores` scratch ([B, NUM_HEADS, KEYS] f32), then max and sum reductions, then
//   each invocation sums p * v for one dimension over a slice of the keys.
// Special values as onnxruntime's Softmax yields them: a key at -inf weighs exactly 0; a row whose max
// is not finite (every key -inf, or a +inf logit) or whose sum is NaN (a NaN logit) outputs NaN, or 0
// with ZERO_NAN_ROWS (the graph's Where(IsNaN(p), 0, p)). Infinities are tested on the bit pattern.
// With structural masks (ai.onnx Attention: onyxia::sdpa_row's key_allowed) a hidden key is skipped, and
// with EMPTY_ZERO a row that sees no key, or only keys whose bias is -inf, outputs 0 (the spec's
// fully-masked-row guard, decided on the bias, not on the logits).
// Resident caches (RESIDENT_K / RESIDENT_V, sdpa.py): k / v are the LLM session's buffers laid out
// [slots, K_HEADS / V_HEADS, KV_CAPACITY, size] (onyxia.core.resident_kv): batch row b reads slot
// in_rows[b, 0], key j at row j (the keys past the row's own length are stale; its mask hides them).
// Bindings (numbers from the BIND_* defs): in_q, in_k, in_v, [in_mask with MASK], [in_valid with
//       VALID_KEYS], [in_rows with KV_ROWS_INPUT: i32 [B, 2]] (read), then out_y, [scores with DECODE] (write).
// Defs: T (q/k/v/out storage, f32 or f16 with F16), HEAD_SIZE (q/k), V_SIZE, NUM_HEADS, K_HEADS, V_HEADS, K_GROUP / V_GROUP (query heads per kv
//       head), optional f32 literals Q_SCALE, K_SCALE, SCALE, DIVISOR, SOFTCAP; MASK with MASK_T (f32, or
//       u32 for a bool mask, which adds MASK_TRUE or MASK_FALSE, f32 literals); flags
//       ZERO_NAN_ROWS, TRANSPOSE_OUT (y is [B, SEQ, NUM_HEADS, V_SIZE], else [B, NUM_HEADS, SEQ, V_SIZE]);
//       the structural masks and EMPTY_ZERO above (onyxia::sdpa_row lists them);
//       WORKGROUP_SIZE (a power of two with DECODE), with DECODE also DIM_LANES (min(V_SIZE,
//       WORKGROUP_SIZE)) and KEY_GROUPS (WORKGROUP_SIZE / DIM_LANES).
// Dims: SEQ, KEYS, with RESIDENT_K or RESIDENT_V KV_CAPACITY; with MASK the mask's element strides MASK_B, MASK_N, MASK_S, MASK_J (0 where broadcast).
// Dispatch: rows (ceil(SEQ / WORKGROUP_SIZE), NUM_HEADS, batch); decode (1, NUM_HEADS, batch).
#ifdef F16
enable f16;
#endif
#import onyxia::sdpa_row
#ifdef DECODE
#import onyxia::reduce
#endif

@group(0) @binding(#{BIND_Q}) var<storage, read> in_q: array<#{T}>;
@group(0) @binding(#{BIND_K}) var<storage, read> in_k: array<#{T}>;
@group(0) @binding(#{BIND_V}) var<storage, read> in_v: array<#{T}>;
#ifdef MASK
@group(0) @binding(#{BIND_MASK}) var<storage, read> in_mask: array<#{MASK_T}>;
#endif
#ifdef VALID_KEYS
@group(0) @binding(#{BIND_VALID}) var<storage, read> in_valid: array<i32>;
#endif
#ifdef KV_ROWS_INPUT
@group(0) @binding(#{BIND_ROWS}) var<storage, read> in_rows: array<i32>;
#endif
@group(0) @binding(#{BIND_OUT}) var<storage, read_write> out_y: array<#{T}>;
#ifdef DECODE
@group(0) @binding(#{BIND_SCORES}) var<storage, read_write> scores: array<f32>;
var<workgroup> partial: array<f32, #{WORKGROUP_SIZE}>;
#endif

// Where key 0 of (batch row b, query head) starts in k; key j follows at j * HEAD_SIZE.
fn key_base(b: u32, head: u32) -> u32 {
#ifdef RESIDENT_K
    return (u32(in_rows[2u * b]) * #{K_HEADS}u + head / #{K_GROUP}u) * #{KV_CAPACITY} * #{HEAD_SIZE}u;
#else
    return k_base(b, head);
#endif
}

fn v_base(b: u32, head: u32) -> u32 {
#ifdef RESIDENT_V
    return (u32(in_rows[2u * b]) * #{V_HEADS}u + head / #{V_GROUP}u) * #{KV_CAPACITY} * #{V_SIZE}u;
#else
    return (b * #{V_HEADS}u + head / #{V_GROUP}u) * #{KEYS} * #{V_SIZE}u;
#endif
}

// Whether key j's bias leaves it in the row (EMPTY_ZERO's guard: a row of -inf biases only is empty).
fn attends(bias: f32) -> bool {
    return !is_minus_inf(bias);
}

// 1 / sum for a well-defined row; for a NaN row, 0 (ZERO_NAN_ROWS) or NaN as the factor; 0 for an empty
// row (EMPTY_ZERO and no key with a bias above -inf).
fn row_factor(row_max: f32, row_sum: f32, any_key: bool, attended: bool) -> f32 {
#ifdef EMPTY_ZERO
    if (!attended) {
        return 0.0;
    }
#endif
    if (any_key && is_finite(row_max) && !is_nan(row_sum)) {
        return 1.0 / row_sum;
    }
#ifdef ZERO_NAN_ROWS
    return 0.0;
#else
    return select(0.0, bitcast<f32>(0x7fc00000u), any_key);
#endif
}

fn out_base(b: u32, head: u32, s: u32) -> u32 {
#ifdef TRANSPOSE_OUT
    return ((b * #{SEQ} + s) * #{NUM_HEADS}u + head) * #{V_SIZE}u;
#else
    return ((b * #{NUM_HEADS}u + head) * #{SEQ} + s) * #{V_SIZE}u;
#endif
}

// A NaN factor must reach every output element (0 * NaN), a 0 factor must clear NaN sums.
fn finish(acc: f32, factor: f32) -> #{T} {
    return #{T}(select(acc * factor, 0.0, factor == 0.0));
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
    load_query(&q, b, head, s);
    let kb = key_base(b, head);
    let vb = v_base(b, head);
    var run_max = 0.0;
    var started = false;
    var attended = false;
    var run_sum = 0.0;
    var acc: array<f32, #{V_SIZE}>;
    for (var j = 0u; j < #{KEYS}; j++) {
        if (!key_allowed(b, s, j)) {
            continue;
        }
        attended = attended || attends(mask_bias(b, head, s, j));
        let x = logit(&q, kb + j * #{HEAD_SIZE}u, b, head, s, j);
        if (!started || x > run_max) {  // a NaN first logit becomes the max: every later p is NaN
            let correction = select(exp(run_max - x), 0.0, !started || is_minus_inf(run_max));
            run_sum = run_sum * correction;
            for (var h = 0u; h < #{V_SIZE}u; h++) {
                acc[h] = acc[h] * correction;
            }
            run_max = x;
            started = true;
        }
        let p = select(exp(x - run_max), 0.0, is_minus_inf(x));
        run_sum += p;
        let row = vb + j * #{V_SIZE}u;
        for (var h = 0u; h < #{V_SIZE}u; h++) {
            acc[h] = acc[h] + p * f32(in_v[row + h]);
        }
    }
    let factor = row_factor(run_max, run_sum, started, attended);
    let base = out_base(b, head, s);
    for (var h = 0u; h < #{V_SIZE}u; h++) {
        out_y[base + h] = finish(acc[h], factor);
    }
}
#else
@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let head = wid.y;
    let b = wid.z;
    if (#{SEQ} != 1u || #{KEYS} == 0u) {
        // the rows kernel serves longer steps (uniform: the whole workgroup leaves); no keys: zeros
        for (var h = lid; #{SEQ} == 1u && h < #{V_SIZE}u; h += #{WORKGROUP_SIZE}u) {
            out_y[out_base(b, head, 0u) + h] = #{T}(0.0);
        }
        return;
    }
    var q: array<f32, #{HEAD_SIZE}>;
    load_query(&q, b, head, 0u);
    let kb = key_base(b, head);
    let vb = v_base(b, head);
    let score_base = (b * #{NUM_HEADS}u + head) * #{KEYS};
    // a hidden key's logit is -inf (it weighs exactly 0); -inf is the identity of the max
    var local_max = minus_inf();
    var local_nan = 0.0;
    var local_attended = 0.0;
    var local_any = 0.0;
    for (var j = lid; j < #{KEYS}; j += #{WORKGROUP_SIZE}u) {
        var x = minus_inf();
        if (key_allowed(b, 0u, j)) {
            x = logit(&q, kb + j * #{HEAD_SIZE}u, b, head, 0u, j);
            local_any = 1.0;
            local_attended = max(local_attended, select(0.0, 1.0, attends(mask_bias(b, head, 0u, j))));
        }
        scores[score_base + j] = x;
        local_max = select(max(local_max, x), local_max, is_nan(x));
        local_nan = max(local_nan, select(0.0, 1.0, is_nan(x)));
    }
    let row_max = workgroup_max(lid, local_max);
    let row_nan = workgroup_max(lid, local_nan);
    let row_attended = workgroup_max(lid, local_attended);
    let row_any = workgroup_max(lid, local_any);
    var local_sum = 0.0;
    for (var j = lid; j < #{KEYS}; j += #{WORKGROUP_SIZE}u) {
        let x = scores[score_base + j];
        let p = select(exp(x - row_max), 0.0, is_minus_inf(x));
        scores[score_base + j] = p;
        local_sum += p;
    }
    let row_sum = workgroup_sum(lid, local_sum);
    storageBarrier();  // every p is written before any invocation reads another's
    let marked_max = select(row_max, bitcast<f32>(0x7fc00000u), row_nan > 0.0);
    let factor = row_factor(marked_max, row_sum, row_any > 0.0, row_attended > 0.0);
    let lane = lid % #{DIM_LANES}u;
    let slice = lid / #{DIM_LANES}u;
    let base = out_base(b, head, 0u);
    for (var chunk = 0u; chunk < (#{V_SIZE}u + #{DIM_LANES}u - 1u) / #{DIM_LANES}u; chunk++) {
        let h = chunk * #{DIM_LANES}u + lane;
        var acc = 0.0;
        if (h < #{V_SIZE}u && slice < #{KEY_GROUPS}u) {
            for (var j = slice; j < #{KEYS}; j += #{KEY_GROUPS}u) {
                acc += scores[score_base + j] * f32(in_v[vb + j * #{V_SIZE}u + h]);
            }
        }
        partial[lid] = acc;
        workgroupBarrier();
        if (slice == 0u && h < #{V_SIZE}u) {
            var sum = 0.0;
            for (var g = 0u; g < #{KEY_GROUPS}u; g++) {
                sum += partial[g * #{DIM_LANES}u + lane];
            }
            out_y[base + h] = finish(sum, factor);
        }
        workgroupBarrier();
    }
}
#endif
