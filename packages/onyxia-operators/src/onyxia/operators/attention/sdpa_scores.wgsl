// ScaledDotProductAttention's optional second output, ai.onnx Attention's qk_matmul_output: the
// [B, NUM_HEADS, SEQ, KEYS] score matrix that the attention kernels (sdpa.wgsl) never store. Planned only
// when that output is read. One invocation per (query row, head); the logit, bias and hidden keys are
// onyxia::sdpa_row's, so the matrix is the one the attention kernels stream.
// QK_MODE 0: the scaled product (q * sqrt(scale)) (k * sqrt(scale))^T; 1: after the soft cap; 2: after the
// mask's bias (a hidden key is -inf); 3: the softmax (a row with no key, or only keys whose bias is -inf,
// is all 0: the spec's fully-masked-row guard).
// Bindings (numbers from the BIND_* defs): in_q, in_k, [in_mask with MASK], [in_valid with VALID_KEYS]
//       (read), then out_qk (write).
// Defs: T, F16, QK_MODE, WORKGROUP_SIZE, and those onyxia::sdpa_row reads. Dims: SEQ, KEYS (and the mask's).
// Dispatch: (ceil(SEQ / WORKGROUP_SIZE), NUM_HEADS, batch).
#ifdef F16
enable f16;
#endif
#import onyxia::sdpa_row

@group(0) @binding(#{BIND_Q}) var<storage, read> in_q: array<#{T}>;
@group(0) @binding(#{BIND_K}) var<storage, read> in_k: array<#{T}>;
#ifdef MASK
@group(0) @binding(#{BIND_MASK}) var<storage, read> in_mask: array<#{MASK_T}>;
#endif
#ifdef VALID_KEYS
@group(0) @binding(#{BIND_VALID}) var<storage, read> in_valid: array<i32>;
#endif
@group(0) @binding(#{BIND_QK}) var<storage, read_write> out_qk: array<#{T}>;

// Key j's entry before the softmax: modes 0 and 1 ignore the masks, 2 and 3 hide keys at -inf.
fn entry(q: ptr<function, array<f32, #{HEAD_SIZE}>>, kb: u32, b: u32, head: u32, s: u32, j: u32) -> f32 {
    let raw = raw_score(q, kb + j * #{HEAD_SIZE}u);
    if (#{QK_MODE}u == 0u) {
        return raw;
    }
    if (#{QK_MODE}u == 1u) {
        return soft_cap(raw);
    }
    if (!key_allowed(b, s, j)) {
        return minus_inf();
    }
    return soft_cap(raw) + mask_bias(b, head, s, j);
}

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
    let kb = k_base(b, head);
    let out = ((b * #{NUM_HEADS}u + head) * #{SEQ} + s) * #{KEYS};
    if (#{QK_MODE}u != 3u) {
        for (var j = 0u; j < #{KEYS}; j++) {
            out_qk[out + j] = #{T}(entry(&q, kb, b, head, s, j));
        }
        return;
    }
    var row_max = minus_inf();
    var attended = false;
    for (var j = 0u; j < #{KEYS}; j++) {
        let x = entry(&q, kb, b, head, s, j);
        if (is_nan(x) || is_nan(row_max)) {
            row_max = bitcast<f32>(0x7fc00000u);  // a NaN logit makes the row NaN, as the softmax does
        } else {
            row_max = max(row_max, x);
        }
        attended = attended || (key_allowed(b, s, j) && !is_minus_inf(mask_bias(b, head, s, j)));
    }
    var sum = 0.0;
    for (var j = 0u; j < #{KEYS}; j++) {
        let x = entry(&q, kb, b, head, s, j);
        sum += select(exp(x - row_max), 0.0, is_minus_inf(x));
    }
    for (var j = 0u; j < #{KEYS}; j++) {
        let x = entry(&q, kb, b, head, s, j);
        let p = select(exp(x - row_max) / sum, 0.0, is_minus_inf(x));
        out_qk[out + j] = #{T}(select(0.0, p, attended));
    }
}
