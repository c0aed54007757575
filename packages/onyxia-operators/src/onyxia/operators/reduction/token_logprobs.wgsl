// TokenLogprobs (com.onyxia): per asked row of logits, log_softmax at the sampled token and the top K entries,
// so a client's logprobs cost 1 + 2K floats of readback per token instead of the logits row.
// One workgroup per asked row; invocation t owns the contiguous chunk [t * CHUNK, (t + 1) * CHUNK) of the
// vocabulary. A first pass keeps the chunk's max and its K best (value desc, id asc: a chunk is scanned in id
// order, so `>` keeps the lower id on ties); the workgroup reduces the maxima; a second pass sums
// exp(x - max) (log-sum-exp). A single online-softmax pass was 3x slower on lavapipe: its rescaling branch
// diverges across SIMD lanes, so each logit paid two exps. Invocation 0 then merges the WORKGROUP_SIZE sorted
// candidate lists, K steps of a k-way merge.
// Bindings: 0 logits (read, T), 1 tokens (read, i32: int64 travels as i32), 2 rows (read, i32: logits row
//           indices), 3 out_y (f32 [R, 1 + 2K]: token logprob, top K logprobs, top K ids as f32).
// Defs: T, F16 (flag), WORKGROUP_SIZE (power of two), K (0..20), KS (max(K, 1): WGSL arrays are never empty),
//       CANDIDATES (WORKGROUP_SIZE * KS). Dims: R (asked rows), V (> 0), LOGIT_ROWS (rows of the logits).
#ifdef F16
enable f16;
#endif
#import onyxia::reduce

@group(0) @binding(0) var<storage, read> logits: array<#{T}>;
@group(0) @binding(1) var<storage, read> tokens: array<i32>;
@group(0) @binding(2) var<storage, read> rows: array<i32>;
@group(0) @binding(3) var<storage, read_write> out_y: array<f32>;

const NONE: u32 = 0xffffffffu;
const LOWEST: f32 = -3.40282347e+38;  // the running max starts here, not at -inf: exp(-inf - -inf) is NaN
const OUT_STRIDE: u32 = 1u + 2u * #{K}u;
var<workgroup> cand_v: array<f32, #{CANDIDATES}>;
var<workgroup> cand_i: array<u32, #{CANDIDATES}>;

// Whether (v, i) ranks before (w, j): a larger value, or an equal one at a lower id; NONE ranks last.
fn before(v: f32, i: u32, w: f32, j: u32) -> bool {
    return i != NONE && (j == NONE || v > w || (v == w && i < j));
}

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let r = wid.x + wid.y * nwg.x;
    if (r >= #{R}) {
        return;  // uniform: the whole workgroup leaves together
    }
    let row = min(u32(rows[r]), #{LOGIT_ROWS} - 1u);
    let base = row * #{V};
    let chunk = (#{V} + #{WORKGROUP_SIZE}u - 1u) / #{WORKGROUP_SIZE}u;
    let first = min(lid * chunk, #{V});
    let last = min(first + chunk, #{V});
    var top_v: array<f32, #{KS}>;
    var top_i: array<u32, #{KS}>;
    for (var q = 0u; q < #{KS}u; q++) {
        top_i[q] = NONE;
    }
    var m = LOWEST;
    var kth = LOWEST;  // the chunk's K-th best so far (LOWEST until K are kept): most logits fail `x > kth`
    for (var j = first; j < last; j++) {
        let x = f32(logits[base + j]);
        m = max(m, x);
        if (#{K}u > 0u && x > kth) {
            var at = #{KS}u - 1u;
            while (at > 0u && (top_i[at - 1u] == NONE || x > top_v[at - 1u])) {
                top_v[at] = top_v[at - 1u];
                top_i[at] = top_i[at - 1u];
                at -= 1u;
            }
            top_v[at] = x;
            top_i[at] = j;
            kth = select(LOWEST, top_v[#{KS}u - 1u], top_i[#{KS}u - 1u] != NONE);
        }
    }
    let row_max = workgroup_max(lid, m);
    var s = 0.0;
    for (var j = first; j < last; j++) {  // a second pass over the (cached) chunk: one exp a logit, no branch
        s += exp(f32(logits[base + j]) - row_max);
    }
    let total = workgroup_sum(lid, s);
    let lse = row_max + log(total);
    for (var q = 0u; q < #{KS}u; q++) {
        cand_v[lid * #{KS}u + q] = top_v[q];
        cand_i[lid * #{KS}u + q] = top_i[q];
    }
    workgroupBarrier();
    if (lid != 0u) {
        return;
    }
    let out = r * OUT_STRIDE;
    let token = min(u32(tokens[row]), #{V} - 1u);
    out_y[out] = f32(logits[base + token]) - lse;
    var heads: array<u32, #{WORKGROUP_SIZE}>;  // each list's next candidate
    for (var q = 0u; q < #{K}u; q++) {
        var best_t = 0u;
        for (var t = 1u; t < #{WORKGROUP_SIZE}u; t++) {
            let a = t * #{KS}u + heads[t];
            let b = best_t * #{KS}u + heads[best_t];
            let a_i = select(NONE, cand_i[a], heads[t] < #{KS}u);
            let b_i = select(NONE, cand_i[b], heads[best_t] < #{KS}u);
            if (before(cand_v[min(a, #{CANDIDATES}u - 1u)], a_i, cand_v[min(b, #{CANDIDATES}u - 1u)], b_i)) {
                best_t = t;
            }
        }
        let at = best_t * #{KS}u + heads[best_t];
        let found = heads[best_t] < #{KS}u && cand_i[min(at, #{CANDIDATES}u - 1u)] != NONE;
        if (found) {
            out_y[out + 1u + q] = cand_v[at] - lse;
            out_y[out + 1u + #{K}u + q] = f32(cand_i[at]);
            heads[best_t] += 1u;
        } else {  // fewer than K ids in the vocabulary
            out_y[out + 1u + q] = LOWEST;
            out_y[out + 1u + #{K}u + q] = -1.0;
        }
    }
}
