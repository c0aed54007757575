// SampleToken (com.onyxia): the next token id from each row of logits, so a sampling LLM step needs
// no logits on the host and the id can feed the next step on the GPU (pipelined decode).
// One workgroup per row; invocation t owns the contiguous chunk [t * CHUNK, (t + 1) * CHUNK) of the
// vocabulary, so chunk sums in invocation order are cumulative sums in vocabulary order.
//   temperature <= 0: the first maximum (ArgMax's tie rule), one pass;
//   else with 0 < top_k < V only logits >= the top_k-th largest are kept (ties at it all kept; dividing
//   by a positive temperature keeps the order), found by radix select over an order-preserving u32
//   key; with s = logits / temperature the id is the first kept i whose running sum of exp(s - max s)
//   exceeds u * the total (inverse CDF).
// With MASKED an allowed-token bitmask (grammar-constrained decoding: llguidance's mask, computed on the
// host) hides every id whose bit is 0 before anything is drawn, exactly as if its logit were -inf: the
// argmax, the top-k rank and the CDF all see only allowed ids. Rows whose bits are all 1 draw as unmasked.
// Bindings: 0 logits (read, T), 1 params (read, f32: temperature, top_k, u in [0, 1); one triple for
//           every row, or with PER_ROW a triple per batch row: a batch's rows sample each by its own request),
//           with MASKED 2 mask (read, u32: [batch rows, MASK_WORDS], bit j % 32 of word j / 32 allows id j),
//           then out_y (i32: the int64 output travels as i32; -1 when the mask allows no id).
// Defs: T, F16 (flag), WORKGROUP_SIZE (power of two), PER_ROW (flag), MASKED (flag). Dims: ROWS, V (> 0),
//       ROWS_PER_TRIPLE (with PER_ROW: logits rows per batch row), MASK_WORDS and ROWS_PER_MASK (with MASKED:
//       words per mask row, logits rows per mask row).
#ifdef F16
enable f16;
#endif
#import onyxia::reduce

@group(0) @binding(0) var<storage, read> logits: array<#{T}>;
@group(0) @binding(1) var<storage, read> params: array<f32>;
#ifdef MASKED
@group(0) @binding(2) var<storage, read> mask: array<u32>;
@group(0) @binding(3) var<storage, read_write> out_y: array<i32>;
#else
@group(0) @binding(2) var<storage, read_write> out_y: array<i32>;
#endif

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

// Whether the row's mask has a zero bit: an unconstrained row (all ones, what the LLM session leaves resident)
// then reads W words once instead of a word per id in every pass (+1.3x of the sampler at 262k ids otherwise)
var<private> row_masked: bool = false;
var<workgroup> masked_bits: atomic<u32>;

fn read_row_masked(lid: u32, row: u32) {
#ifdef MASKED
    if (lid == 0u) {
        atomicStore(&masked_bits, 0u);
    }
    workgroupBarrier();
    let base = (row / #{ROWS_PER_MASK}) * #{MASK_WORDS};
    var zeros = 0u;
    for (var w = lid; w < #{MASK_WORDS}; w += #{WORKGROUP_SIZE}u) {
        zeros |= ~mask[base + w];
    }
    if (zeros != 0u) {
        atomicOr(&masked_bits, 1u);
    }
    workgroupBarrier();
    row_masked = atomicLoad(&masked_bits) != 0u;
    workgroupBarrier();
#endif
}

// Whether id j of logits row `row` may be drawn (always, without MASKED or when the row's mask is all ones)
fn allowed(row: u32, j: u32) -> bool {
#ifdef MASKED
    if (!row_masked) {
        return true;
    }
    let word = mask[(row / #{ROWS_PER_MASK}) * #{MASK_WORDS} + j / 32u];
    return ((word >> (j % 32u)) & 1u) != 0u;
#else
    return true;
#endif
}

// The row's first maximum: (value, index) of every invocation's chunk, reduced keeping the lower index on ties.
fn first_maximum(lid: u32, row: u32, base: u32, first: u32, last: u32) -> u32 {
    var best = 0.0;
    var best_j = NONE;
    for (var j = first; j < last; j++) {
        let v = f32(logits[base + j]);
        if ((best_j == NONE || v > best) && allowed(row, j)) {  // the mask read only for a new best
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

// The key of the k-th largest logit, by radix select: four passes each fix 8 more bits of it, counting
// in a workgroup histogram only the logits whose higher bits match those fixed so far (32 passes of
// bisection took 60x as long on lavapipe).
var<workgroup> histogram: array<atomic<u32>, 256>;
var<workgroup> radix_prefix: u32;
var<workgroup> radix_need: u32;

fn top_k_threshold(lid: u32, row: u32, base: u32, first: u32, last: u32, k: u32) -> u32 {
    if (lid == 0u) {
        radix_prefix = 0u;
        radix_need = k;
    }
    for (var round = 0u; round < 4u; round++) {
        let shift = 24u - 8u * round;
        for (var b = lid; b < 256u; b += #{WORKGROUP_SIZE}u) {
            atomicStore(&histogram[b], 0u);
        }
        workgroupBarrier();
        let prefix = radix_prefix;
        let fixed = select(0xffffffffu << (shift + 8u), 0u, round == 0u);  // the bits above this digit
        for (var j = first; j < last; j++) {
            let key = order_key(f32(logits[base + j]));
            if ((key & fixed) == prefix && allowed(row, j)) {
                atomicAdd(&histogram[(key >> shift) & 255u], 1u);
            }
        }
        workgroupBarrier();
        if (lid == 0u) {  // the digit, from the top, where the count reaches the rank still needed
            var need = radix_need;
            var digit = 255u;
            loop {
                let count = atomicLoad(&histogram[digit]);
                if (count >= need || digit == 0u) {
                    break;
                }
                need -= count;
                digit -= 1u;
            }
            radix_prefix = prefix | (digit << shift);
            radix_need = need;
        }
        workgroupBarrier();
    }
    let threshold = radix_prefix;
    workgroupBarrier();
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
    read_row_masked(lid, row);
    let top = first_maximum(lid, row, base, first, last);
    if (top == NONE) {  // uniform (workgroup memory): a mask that allows nothing
        if (lid == 0u) {
            out_y[row] = -1;
        }
        return;
    }
#ifdef PER_ROW
    let p = (row / #{ROWS_PER_TRIPLE}) * 3u;
#else
    let p = 0u;
#endif
    let temperature = params[p];
    if (temperature <= 0.0) {
        if (lid == 0u) {
            out_y[row] = i32(top);
        }
        return;
    }
    let k = u32(params[p + 1u]);
    var threshold = 0u;  // keys >= threshold are kept: 0 keeps every score
    if (k > 0u && k < #{V}) {
        threshold = top_k_threshold(lid, row, base, first, last, k);
    }
    let s_max = f32(logits[base + top]) / temperature;
    var mass = 0.0;
    for (var j = first; j < last; j++) {
        let x = f32(logits[base + j]);
        if (order_key(x) >= threshold && allowed(row, j)) {
            mass += exp(x / temperature - s_max);
        }
    }
    chunk_mass[lid] = mass;
    workgroupBarrier();
    if (lid == 0u) {  // the chunk the draw falls in, and the mass before it (in vocabulary order)
        var total = 0.0;
        for (var t = 0u; t < #{WORKGROUP_SIZE}u; t++) {
            total += chunk_mass[t];
        }
        let goal = params[p + 2u] * total;
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
            let x = f32(logits[base + j]);
            if (order_key(x) >= threshold && allowed(row, j)) {
                running += exp(x / temperature - s_max);
                last_kept = j;
                if (pick == NONE && running > goal) {
                    pick = j;
                }
            }
        }
        out_y[row] = i32(select(pick, last_kept, pick == NONE));  // rounding left it past the chunk's end
    }
}
