// GroupQueryAttention's one-token step over an in-place cache, KV append included (as gqa_decode_append.wgsl), with
// one workgroup per (kv head, batch row) reading each key and value row once for all the query heads that share
// it (HEADS of them; HEAD_SPLIT workgroups split a kv head's GROUP query heads when there is one kv head, so a
// one-row step still fills two CPU threads), and no scores scratch and no barrier per key.
//
// The workgroup's lanes form quads (4 neighbouring lanes of a subgroup). A quad takes keys lo + quad,
// lo + quad + QUADS, ... of the row's visible keys; lane c of the quad owns elements c * HEAD_SIZE / 4 ..
// (c + 1) * HEAD_SIZE / 4 - 1 of each head (DQ4 vec4s), loads that part of the key and value rows, and the quad adds
// its partial dot products by two subgroup shuffles. Each quad keeps an online softmax per head (running max, sum
// and rescaled value sum, as gqa.wgsl's rows kernel); the quads' results are merged in workgroup memory at the end.
// On lavapipe a storage load costs a loop over the lanes, so the cost is the rows read: every key and value row once
// per kv head, where a workgroup per query head with a lane per key read each row GROUP times and paid barriers,
// scores round trips and per-lane reads of q for every 64 keys.
// A workgroup's results depend only on its own batch row: a row gets the same bits in a batch of any size.
//
// Bindings (numbers from the BIND_* defs) as gqa_decode_append.wgsl's, without the scores scratch: in_q (or the
//       packed QKV with PACKED), [new_k, new_v without PACKED], seqlens_k, [cos_cache, sin_cache with ROTARY],
//       [the slots table with RESIDENT] (read), then cache_k, cache_v (the present buffers as vec4s, read and
//       written), out_y (write), then with CHECKED the error word.
// Defs: T, SEQLENS_T, F16, BIND_*, HEAD_SIZE (a multiple of 16), NUM_HEADS, KV_HEADS, GROUP, Q_STRIDE, SCALE, SOFTCAP
//       (optional), WINDOW, ROTARY (optional), INTERLEAVED, RESIDENT (flag), NEW_STRIDE, K_OFFSET, V_OFFSET, PACKED
//       as gqa_decode_append.wgsl; WORKGROUP_SIZE (a multiple of 4), HEAD_SPLIT (workgroups per kv head), HEADS
//       (GROUP / HEAD_SPLIT) and HEAD_ITEMS (0 .. HEADS - 1), DQ4 (HEAD_SIZE / 16) and DQ4_ITEMS (0 .. DQ4 - 1).
// Dims: SEQ, KV_ROWS, PAST_ROWS, MAX_POS with ROTARY, as gqa_decode_append.wgsl.
// Dispatch: (1, KV_HEADS * HEAD_SPLIT, batch) for a one-token step, (0, ...) otherwise. Needs subgroups of at least
// 4 lanes numbered in local invocation order (invocations 4 q .. 4 q + 3 are lanes of one subgroup, as on lavapipe
// and GPUs for a one-dimensional workgroup), so a quad's shuffles stay within it.
#ifdef F16
enable f16;
#endif
#import onyxia::kv_rows
#import onyxia::gqa_io

// in_q, new_k()/new_v() and their bindings, seqlens_k, cos_cache, sin_cache and out_y: onyxia::gqa_io
@group(0) @binding(#{BIND_CACHE_K}) var<storage, read_write> cache_k: array<vec4<#{T}>>;
@group(0) @binding(#{BIND_CACHE_V}) var<storage, read_write> cache_v: array<vec4<#{T}>>;

const QUADS: u32 = #{WORKGROUP_SIZE}u / 4u;
const DQ4: u32 = #{DQ4}u;  // vec4s of a head a lane owns
const ROW4: u32 = #{HEAD_SIZE}u / 4u;  // vec4s per cache row
const CELLS: u32 = #{HEADS}u * DQ4;  // a lane's query and value-sum vec4s

var<workgroup> new_k_row: array<vec4<f32>, ROW4>;  // the new key as the cache holds it (rotated, rounded to T)
var<workgroup> new_v_row: array<vec4<f32>, ROW4>;
var<workgroup> queries: array<vec4<f32>, #{HEADS}u * ROW4>;  // the workgroup's query heads, scaled and rotated
var<workgroup> merge_max: array<f32, QUADS>;
var<workgroup> merge_sum: array<f32, QUADS>;
var<workgroup> merge_acc: array<vec4<f32>, QUADS * ROW4>;

// Elements 4 e .. 4 e + 3 of batch row b's new key of kv head `kv_head`, rotated and stored as the cache holds them.
fn new_key4(b: u32, kv_head: u32, e: u32, position: u32) -> vec4<#{T}> {
    let row = b * #{NEW_STRIDE}u + kv_head * #{HEAD_SIZE}u;
    var k: vec4<#{T}>;
    for (var d = 0u; d < 4u; d++) {
        let h = 4u * e + d;
        k[d] = #{T}(rotated(f32(new_k(row + h)), f32(new_k(row + partner_of(h))), h, position));
    }
    return k;
}

fn new_value4(b: u32, kv_head: u32, e: u32) -> vec4<#{T}> {
    let row = b * #{NEW_STRIDE}u + kv_head * #{HEAD_SIZE}u + 4u * e;
    return vec4<#{T}>(new_v(row), new_v(row + 1u), new_v(row + 2u), new_v(row + 3u));
}

// Elements 4 e .. 4 e + 3 of batch row b's query head `head`, rotated and scaled (gqa.wgsl's load_query).
fn query4(b: u32, head: u32, e: u32, position: u32) -> vec4<f32> {
    let row = b * #{Q_STRIDE}u + head * #{HEAD_SIZE}u;
    var q: vec4<f32>;
    for (var d = 0u; d < 4u; d++) {
        let h = 4u * e + d;
        q[d] = rotated(f32(in_q[row + h]), f32(in_q[row + partner_of(h)]), h, position) * #{SCALE};
    }
    return q;
}

// vec4 i of extended-cache row j of the head at `base` (vec4s), the new row from workgroup memory.
fn key4(base: u32, j: u32, new_row: u32, i: u32) -> vec4<f32> {
    if (j == new_row) {
        return new_k_row[i];
    }
    return vec4<f32>(cache_k[base + j * ROW4 + i]);
}

fn value4(base: u32, j: u32, new_row: u32, i: u32) -> vec4<f32> {
    if (j == new_row) {
        return new_v_row[i];
    }
    return vec4<f32>(cache_v[base + j * ROW4 + i]);
}

// The quad's sum of x (its 4 lanes hold parts of one dot product).
fn quad_sum(x: f32) -> f32 {
    let pair = x + subgroupShuffleXor(x, 1u);
    return pair + subgroupShuffleXor(pair, 2u);
}

struct Partial {
    run_max: array<f32, #{HEADS}>,
    run_sum: array<f32, #{HEADS}>,
    acc: array<vec4<f32>, CELLS>,
}

// This quad's online softmax over its keys lo + quad, lo + quad + QUADS, ... < hi; lane c's part of each head.
fn attend_keys(lo: u32, hi: u32, base: u32, new_row: u32, quad: u32, c: u32) -> Partial {
    var q: array<vec4<f32>, CELLS>;
#for g in #{HEAD_ITEMS}
#for i in #{DQ4_ITEMS}
    q[#{g}u * DQ4 + #{i}u] = queries[#{g}u * ROW4 + c * DQ4 + #{i}u];
#endfor
#endfor
    // finite stand-in for -inf (as gqa.wgsl): the first key's exp(old - new) underflows to exactly 0
    var part = Partial(array<f32, #{HEADS}>(), array<f32, #{HEADS}>(), array<vec4<f32>, CELLS>());
#for g in #{HEAD_ITEMS}
    part.run_max[#{g}] = -3.0e38;
#endfor
    for (var j = lo + quad; j < hi; j += QUADS) {
        var k: array<vec4<f32>, DQ4>;
        var v: array<vec4<f32>, DQ4>;
#for i in #{DQ4_ITEMS}
        k[#{i}] = key4(base, j, new_row, c * DQ4 + #{i}u);
        v[#{i}] = value4(base, j, new_row, c * DQ4 + #{i}u);
#endfor
#for g in #{HEAD_ITEMS}
        {
            var partial = 0.0;
#for i in #{DQ4_ITEMS}
            partial += dot(q[#{g}u * DQ4 + #{i}u], k[#{i}]);
#endfor
            let x = softcapped(quad_sum(partial));
            // only a new running maximum rescales what was summed: below it exp(old - new) is exp(0), exactly 1,
            // so those multiplications change no bit (logits bit-identical on gemma3-tiny), and past the first keys
            // the maximum seldom moves; the loop is bound by its loads on lavapipe, so it gained ~1% at 1,024 keys
            // (Qwen3-0.6B q4 decode, A/B in one process)
            if (x > part.run_max[#{g}]) {
                let correction = exp(part.run_max[#{g}] - x);
                part.run_sum[#{g}] = part.run_sum[#{g}] * correction;
#for i in #{DQ4_ITEMS}
                part.acc[#{g}u * DQ4 + #{i}u] = part.acc[#{g}u * DQ4 + #{i}u] * correction;
#endfor
                part.run_max[#{g}] = x;
            }
            let p = exp(x - part.run_max[#{g}]);
            part.run_sum[#{g}] = part.run_sum[#{g}] + p;
#for i in #{DQ4_ITEMS}
            part.acc[#{g}u * DQ4 + #{i}u] = part.acc[#{g}u * DQ4 + #{i}u] + p * v[#{i}];
#endfor
        }
#endfor
    }
    return part;
}

// The quads' partials of head g merged: out = sum_q e^(m_q - M) acc_q / sum_q e^(m_q - M) sum_q (zeros when the row
// sees no key). Call in uniform control flow (it holds barriers).
fn merge_head(part: Partial, g: u32, acc: array<vec4<f32>, DQ4>, quad: u32, c: u32, lid: u32, out_base: u32) {
    if (c == 0u) {
        merge_max[quad] = part.run_max[g];
    }
    workgroupBarrier();
    var top = -3.0e38;
    for (var i = 0u; i < QUADS; i++) {
        top = max(top, merge_max[i]);
    }
    let scale = exp(part.run_max[g] - top);
    if (c == 0u) {
        merge_sum[quad] = part.run_sum[g] * scale;
    }
#for i in #{DQ4_ITEMS}
    merge_acc[quad * ROW4 + c * DQ4 + #{i}u] = acc[#{i}] * scale;
#endfor
    workgroupBarrier();
    var total = 0.0;
    for (var i = 0u; i < QUADS; i++) {
        total += merge_sum[i];
    }
    let inv_sum = select(1.0 / total, 0.0, total == 0.0);
    for (var e = lid; e < ROW4; e += #{WORKGROUP_SIZE}u) {
        var sum = vec4<f32>(0.0);
        for (var i = 0u; i < QUADS; i++) {
            sum += merge_acc[i * ROW4 + e];
        }
        let y = sum * inv_sum;
        for (var d = 0u; d < 4u; d++) {
            out_y[out_base + 4u * e + d] = #{T}(y[d]);
        }
    }
    workgroupBarrier();  // the next head reuses the merge arrays
}

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let kv_head = wid.y / #{HEAD_SPLIT}u;
    let first_head = kv_head * #{GROUP}u + (wid.y % #{HEAD_SPLIT}u) * #{HEADS}u;
    let b = wid.z;
    if (#{SEQ} != 1u) {
        return;  // the unfused append and rows kernel serve this step (uniform: the whole workgroup leaves)
    }
    let rows = kv_rows(seqlen(b), 1u, #{PAST_ROWS});
    let range = key_range(rows, 0u, #{WINDOW}u);
    let base = (cache_slot(b) * #{KV_HEADS}u + kv_head) * #{KV_ROWS} * ROW4;
    let new_row = rows.kept;  // the new key's cache row (and its row in key_range's numbering)
    // the new key and value rows, as kv_cache.wgsl writes them; the kv head's first workgroup stores them
    for (var e = lid; e < ROW4; e += #{WORKGROUP_SIZE}u) {
        let k = new_key4(b, kv_head, e, range.position);
        let v = new_value4(b, kv_head, e);
        new_k_row[e] = vec4<f32>(k);
        new_v_row[e] = vec4<f32>(v);
        if (wid.y % #{HEAD_SPLIT}u == 0u) {
            cache_k[base + new_row * ROW4 + e] = k;
            cache_v[base + new_row * ROW4 + e] = v;
        }
    }
    for (var e = lid; e < #{HEADS}u * ROW4; e += #{WORKGROUP_SIZE}u) {
        queries[e] = query4(b, first_head + e / ROW4, e % ROW4, range.position);
    }
    workgroupBarrier();
    let quad = lid / 4u;
    let c = lid % 4u;
    let part = attend_keys(range.lo, range.hi, base, new_row, quad, c);
#for g in #{HEAD_ITEMS}
    {
        var acc: array<vec4<f32>, DQ4>;
#for i in #{DQ4_ITEMS}
        acc[#{i}] = part.acc[#{g}u * DQ4 + #{i}u];
#endfor
        merge_head(part, #{g}u, acc, quad, c, lid, (b * #{NUM_HEADS}u + first_head + #{g}u) * #{HEAD_SIZE}u);
    }
#endfor
}
