// SampleToken (com.onyxia): the next token id from each row of logits, so a sampling LLM step needs
// no logits on the host and the id can feed the next step on the GPU (pipelined decode).
// One workgroup per row; invocation t owns the contiguous chunk [t * CHUNK, (t + 1) * CHUNK) of the
// vocabulary, so chunk sums in invocation order are cumulative sums in vocabulary order.
//   temperature <= 0: the first maximum (ArgMax's tie rule), one pass;
//   else s = logits / temperature; with 0 < top_k < V only s >= the top_k-th largest s are kept (ties
//   at it all kept), found bit by bit over an order-preserving u32 key (32 counting passes); the id is
//   the first kept i whose running sum of exp(s - max s) exceeds u * the total (inverse CDF).
// Bindings: 0 logits (read, T), 1 params (read, f32: temperature, top_k, u in [0, 1)), 2 out_y (i32:
//           the int64 output travels as i32).
// Defs: T, F16 (flag), WORKGROUP_SIZE (power of two). Dims: ROWS, V (> 0).
#ifdef F16
enable f16;
#endif
#import onyxia::reduce

@group(0) @binding(0) var<storage, read> logits: array<#{T}>;
@group(0) @binding(1) var<storage, read> params: array<f32>;
@group(0) @binding(2) var<storage, read_write> out_y: array<i32>;

const NONE: u32 = 0xffffffffu;
var<workgroup> best_value: array<f32, #{WORKGROUP_SIZE}>;
var<workgroup> best_index: array<u32, #{WORKGROUP_SIZE}>;
var<workgroup> chunk_mass: array<f32, #{WORKGROUP_SIZE}>;
var<workgroup> draw_chunk: u32;
var<workgroup> draw_before: f32;

// f32 -> u32 in the same order (negatives flipped below the positives), so `>=` on keys is `>=` on values
fn order_key(v: f32) -> u32 {
    let b = bitcast<u32>(v);
    return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

// The row's first maximum: (value, index) of every invocation's chunk, reduced keeping the lower index on ties.
fn first_maximum(lid: u32, base: u32, first: u32, last: u32) -> u32 {
    var best = 0.0;
    var best_j = NONE;
    for (var j = first; j < last; j++) {
        let v = f32(logits[base + j]);
        if (best_j == NONE || v > best) {
            best = v;
            best_j = j;
        }
    }
    best_value[lid] = best;
    best_index[lid] = best_j;
    workgroupBarrier();
    for (var step = #{WORKGROUP_SIZE}u / 2u; step > 0u; step >>= 1u) {
        if (lid < step) {
            let other = best_index[lid + step];
            let mine = best_index[lid];
            let v = best_value[lid + step];
            if (other != NONE && (mine == NONE || v > best_value[lid] || (v == best_value[lid] && other < mine))) {
                best_value[lid] = v;
                best_index[lid] = other;
            }
        }
        workgroupBarrier();
    }
    let top = best_index[0];
    workgroupBarrier();
    return top;
}

// The largest key with at least k scores at or above it: the key of the k-th largest score.
fn top_k_threshold(lid: u32, base: u32, first: u32, last: u32, temperature: f32, k: u32) -> u32 {
    var threshold = 0u;
    for (var bit = 32u; bit > 0u; bit--) {
        let candidate = threshold | (1u << (bit - 1u));
        var count = 0.0;
        for (var j = first; j < last; j++) {
            count += select(0.0, 1.0, order_key(f32(logits[base + j]) / temperature) >= candidate);
        }
        if (workgroup_sum(lid, count) >= f32(k)) {  // counts stay below 2^24: exact in f32
            threshold = candidate;
        }
    }
    return threshold;
}

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= #{ROWS}) {
        return;  // uniform: the whole workgroup leaves together
    }
    let base = row * #{V};
    let chunk = (#{V} + #{WORKGROUP_SIZE}u - 1u) / #{WORKGROUP_SIZE}u;
    let first = min(lid * chunk, #{V});
    let last = min(first + chunk, #{V});
    let top = first_maximum(lid, base, first, last);
    let temperature = params[0];
    if (temperature <= 0.0) {
        if (lid == 0u) {
            out_y[row] = i32(top);
        }
        return;
    }
    let k = u32(params[1]);
    var threshold = 0u;  // keys >= threshold are kept: 0 keeps every score
    if (k > 0u && k < #{V}) {
        threshold = top_k_threshold(lid, base, first, last, temperature, k);
    }
    let s_max = f32(logits[base + top]) / temperature;
    var mass = 0.0;
    for (var j = first; j < last; j++) {
        let s = f32(logits[base + j]) / temperature;
        if (order_key(s) >= threshold) {
            mass += exp(s - s_max);
        }
    }
    chunk_mass[lid] = mass;
    workgroupBarrier();
    if (lid == 0u) {  // the chunk the draw falls in, and the mass before it (in vocabulary order)
        var total = 0.0;
        for (var t = 0u; t < #{WORKGROUP_SIZE}u; t++) {
            total += chunk_mass[t];
        }
        let goal = params[2] * total;
        var before = 0.0;
        var owner = NONE;
        var last_nonzero = 0u;
        for (var t = 0u; t < #{WORKGROUP_SIZE}u; t++) {
            if (chunk_mass[t] > 0.0) {
                last_nonzero = t;
            }
            if (owner == NONE) {
                if (before + chunk_mass[t] > goal) {
                    owner = t;
                } else {
                    before += chunk_mass[t];
                }
            }
        }
        if (owner == NONE) {  // u * total rounded up to the total: the last kept score
            owner = last_nonzero;
            before = goal;
        }
        draw_chunk = owner;
        draw_before = goal - before;
    }
    workgroupBarrier();
    if (lid == draw_chunk) {
        let goal = draw_before;
        var running = 0.0;
        var pick = NONE;
        var last_kept = first;
        for (var j = first; j < last; j++) {
            let s = f32(logits[base + j]) / temperature;
            if (order_key(s) >= threshold) {
                running += exp(s - s_max);
                last_kept = j;
                if (pick == NONE && running > goal) {
                    pick = j;
                }
            }
        }
        out_y[row] = i32(select(pick, last_kept, pick == NONE));  // rounding left it past the chunk's end
    }
}
