// GroupQueryAttention for steps of more than one token: causal softmax(q k^T * scale) v over the extended KV
// cache kv_cache.wgsl wrote (keys already rotated; rows placed by onyxia::kv_rows; q rotated here).
// A workgroup serves the items (query row, head) of BLOCK consecutive query rows and of every query head
// of one kv head's group, which all read the same keys and values: item f (0 <= f < BLOCK * GROUP) is
// query row wid.x * BLOCK + f % BLOCK of head wid.y * GROUP + f / BLOCK. Keys are taken over the union of
// the block's rows' ranges (tiles past the block's last query or before its first window never load);
// each item masks the keys it may not see (causal, right padding, WINDOW). Softmax is online per item (a
// running max and sum, the accumulator rescaled once per step of keys); scores and sums are f32 whatever
// the storage type. An item that sees no key outputs zeros, as onnxruntime's CPU kernel does.
// Sums run in onnxruntime's order (its GEMMs): a score adds q[d] * k[d] for d = 0, 1, ..., an output adds
// p[j] * v[j] for j = 0, 1, ...; never dot() of 4 then a sum. Int8-quantized activations downstream
// (MatMulNBits accuracy_level 4) turn a last-bit difference into a visible one: phi3-tiny-genai int4's
// prefill logits moved 0.10 from onnxruntime's with dot() (the fixtures' bar is 0.06).
// Two kernels, by SPREAD:
// - tiles (no SPREAD; GPUs): one item per invocation; TILE key and value rows at a time are staged in
//   workgroup memory as f32 (keys transposed, so a score update is a vec4 FMA per q element) and read by
//   every item, so the cache is loaded once per workgroup instead of once per query row and head.
// - spread (SPREAD; CPU rasterisers with subgroups, lavapipe): lavapipe runs every storage or workgroup
//   load inside a loop lane by lane, whatever the address, so a tile in workgroup memory that 8 lanes
//   read alike still costs 8 loads per element. Here lane l of each subgroup loads key t + l % 8 (each
//   lane a different key, every load useful) and subgroupBroadcast hands the 8 keys to every lane; each
//   invocation serves the ITEMS items lid + i * WORKGROUP_SIZE, so each broadcast element feeds ITEMS
//   rows. Lavapipe's subgroups have 8 lanes on AVX but it promises 4: a subgroup of fewer than 8 lanes
//   steps 4 keys at a time instead (STEPS "4 8"; "8" where every subgroup has 8 lanes).
// Bindings (numbers from the BIND_* defs): in_q, in_k, in_v (the extended caches, BNSH, or the resident
//       slots), seqlens_k, [cos_cache, sin_cache with ROTARY], [the slots table with RESIDENT] (read), then
//       out_y (write), then with CHECKED the error word (ERRORS_BINDING; ERROR_SLOT immediate: onyxia::errors).
// Defs: T (storage type of q/k/v/out), SEQLENS_T (i32), F16 (flag), BIND_*, HEAD_SIZE (a multiple of 4),
//       NUM_HEADS, GROUP (query heads per kv head), Q_STRIDE (elements between tokens' q rows), SCALE (f32
//       literal), SOFTCAP (optional f32 literal), WINDOW (local_window_size, 0 for none), ROTARY (optional:
//       rotated elements of each q head), INTERLEAVED, RESIDENT (flag: onyxia::kv_rows' slots), BIND_SLOTS,
//       BLOCK (query rows per workgroup), WORKGROUP_SIZE; tiles: TILE (keys per tile, a multiple of 4;
//       WORKGROUP_SIZE = BLOCK * GROUP); spread: SPREAD (flag), ITEMS (item indices "0 1 ..";
//       WORKGROUP_SIZE * ITEMS >= BLOCK * GROUP, the items beyond idle), STEPS (the key steps compiled:
//       "4 8", the subgroup size choosing; "8"; "4" for tests of that step), QUADS_4 ("0"), QUADS_8 ("0 1").
// Dims: SEQ, KV_ROWS (cache rows per kv head), PAST_ROWS (rows per head of the past buffer); MAX_POS with ROTARY.
// Dispatch: (ceil(SEQ / BLOCK), NUM_HEADS / GROUP, batch).
// q is [B, SEQ, Q_STRIDE] (its first NUM_HEADS * HEAD_SIZE columns read), out [B, SEQ, NUM_HEADS * HEAD_SIZE].
#ifdef F16
enable f16;
#endif
#import onyxia::kv_rows
#import onyxia::gqa_io

// in_q, seqlens_k, cos_cache, sin_cache and out_y: onyxia::gqa_io
@group(0) @binding(#{BIND_K}) var<storage, read> in_k: array<vec4<#{T}>>;  // HEAD_SIZE / 4 per cache row
@group(0) @binding(#{BIND_V}) var<storage, read> in_v: array<vec4<#{T}>>;

const DIMS4: u32 = #{HEAD_SIZE}u / 4u;
const ITEM_COUNT: u32 = #{BLOCK}u * #{GROUP}u;
const UNSEEN: f32 = -3.0e38;  // finite stand-in for -inf: exp(UNSEEN - max) underflows to 0, no inf arithmetic

struct Item {
    s: u32,           // query row
    head: u32,        // query head
    keys: KeyRange,   // the cache rows it sees (empty for an idle item)
    live: bool,       // a real (row, head): its output is stored
}

// Item f of batch row b's workgroup (wid.x, wid.y).
fn item_of(f: u32, b: u32, wid: vec3<u32>, rows: KvRows) -> Item {
    let s = wid.x * #{BLOCK}u + f % #{BLOCK}u;
    let live = s < #{SEQ} && f < ITEM_COUNT;
    var keys = key_range(rows, min(s, #{SEQ} - 1u), #{WINDOW}u);
    if (!live) {
        keys = KeyRange(0u, 0u, keys.position);
    }
    return Item(min(s, #{SEQ} - 1u), wid.y * #{GROUP}u + min(f / #{BLOCK}u, #{GROUP}u - 1u), keys, live);
}

// The item's q row, rotated and scaled.
fn query_row(b: u32, it: Item) -> array<vec4<f32>, DIMS4> {
    var q: array<vec4<f32>, DIMS4>;
    let q_base = (b * #{SEQ} + it.s) * #{Q_STRIDE}u + it.head * #{HEAD_SIZE}u;
    for (var d = 0u; d < #{HEAD_SIZE}u; d++) {
        q[d / 4u][d % 4u] = query_element(q_base, d, it.keys.position) * #{SCALE};
    }
    return q;
}

// Keys are stepped from a multiple of this, whatever the block's first visible key: each item's online
// softmax then meets its keys in the same steps (the same rescales, the same sums) wherever the prompt's
// chunk started, so a prompt continued over a reused prefix gets the bits of one prefilled whole (a
// windowed layer's first key follows the block's first row, which follows the chunk's start).
#ifdef SPREAD
const KEY_ALIGN: u32 = 8u;
#else
const KEY_ALIGN: u32 = #{TILE}u;
#endif

// The union of the workgroup's items' key ranges (both ends grow with the query row), its start aligned
// down to KEY_ALIGN (the keys before an item's own range are masked): uniform.
fn block_keys(wid: vec3<u32>, rows: KvRows) -> vec2<u32> {
    let first = wid.x * #{BLOCK}u;
    let last = min(first + #{BLOCK}u, #{SEQ}) - 1u;
    let lo = key_range(rows, first, #{WINDOW}u).lo;
    return vec2<u32>(lo - lo % KEY_ALIGN, key_range(rows, last, #{WINDOW}u).hi);
}

// First element (in vec4s) of the workgroup's kv head's cache rows.
fn cache_base(b: u32, kv_head: u32) -> u32 {
    return (cache_slot(b) * (#{NUM_HEADS}u / #{GROUP}u) + kv_head) * #{KV_ROWS} * DIMS4;
}

// Which of the keys j .. j + 3 the item whose keys are `keys` sees.
fn sees(keys: KeyRange, j: u32) -> vec4<bool> {
    let at = vec4<u32>(j) + vec4<u32>(0u, 1u, 2u, 3u);
    return at >= vec4<u32>(keys.lo) & at < vec4<u32>(keys.hi);
}

// Raw scores of keys j .. j + 3 to masked, capped scores.
fn masked(x: vec4<f32>, keys: KeyRange, j: u32) -> vec4<f32> {
#ifdef SOFTCAP
    // tanh saturates long before 15; the clamp keeps exp-based tanh implementations away from inf/inf
    let capped = #{SOFTCAP} * tanh(clamp(x / #{SOFTCAP}, vec4<f32>(-15.0), vec4<f32>(15.0)));
#else
    let capped = x;
#endif
    return select(vec4<f32>(UNSEEN), capped, sees(keys, j));
}

fn store_row(b: u32, it: Item, acc: array<vec4<f32>, DIMS4>, sum: f32) {
    if (!it.live) {
        return;
    }
    let inv_sum = select(1.0 / sum, 0.0, sum == 0.0);
    let out_base = ((b * #{SEQ} + it.s) * #{NUM_HEADS}u + it.head) * #{HEAD_SIZE}u;
    for (var e = 0u; e < DIMS4; e++) {
        let y = acc[e] * inv_sum;
        for (var c = 0u; c < 4u; c++) {
            out_y[out_base + 4u * e + c] = #{T}(y[c]);
        }
    }
}

#ifndef SPREAD
const QUADS: u32 = #{TILE}u / 4u;
// k_tile[d * QUADS + c]: dimension d of the tile's keys 4c .. 4c + 3; v_tile[t * DIMS4 + e]: dimensions
// 4e .. 4e + 3 of its value t. Rows past the block's keys hold zeros (and are masked).
var<workgroup> k_tile: array<vec4<f32>, #{HEAD_SIZE}u * QUADS>;
var<workgroup> v_tile: array<vec4<f32>, #{TILE}u * DIMS4>;

fn load_tile(base: u32, t0: u32, end: u32, lid: u32) {
    for (var i = lid; i < #{TILE}u * DIMS4; i += #{WORKGROUP_SIZE}u) {
        let t = i / DIMS4;
        let e = i % DIMS4;
        var k = vec4<f32>();
        var v = vec4<f32>();
        if (t0 + t < end) {
            k = vec4<f32>(in_k[base + (t0 + t) * DIMS4 + e]);
            v = vec4<f32>(in_v[base + (t0 + t) * DIMS4 + e]);
        }
        v_tile[i] = v;
        for (var c = 0u; c < 4u; c++) {
            k_tile[(4u * e + c) * QUADS + t / 4u][t % 4u] = k[c];
        }
    }
}

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let b = wid.z;
    let rows = kv_rows(seqlen(b), #{SEQ}, #{PAST_ROWS});
    let span = block_keys(wid, rows);
    let it = item_of(lid, b, wid, rows);
    var q = query_row(b, it);
    let base = cache_base(b, wid.y);
    var run_max = UNSEEN;
    var run_sum = 0.0;
    var acc: array<vec4<f32>, DIMS4>;
    var x: array<vec4<f32>, QUADS>;
    for (var t0 = span.x; t0 < span.y; t0 += #{TILE}u) {
        workgroupBarrier();  // the previous tile's readers are done
        load_tile(base, t0, span.y, lid);
        workgroupBarrier();
        var tile_max = UNSEEN;
        for (var c = 0u; c < QUADS; c++) {
            var dots = vec4<f32>();
            for (var e = 0u; e < DIMS4; e++) {
                let qe = q[e];
                let w = 4u * e * QUADS + c;
                dots = dots + qe.x * k_tile[w] + qe.y * k_tile[w + QUADS] + qe.z * k_tile[w + 2u * QUADS]
                    + qe.w * k_tile[w + 3u * QUADS];
            }
            x[c] = masked(dots, it.keys, t0 + 4u * c);
            tile_max = max(tile_max, max(max(x[c].x, x[c].y), max(x[c].z, x[c].w)));
        }
        let new_max = max(run_max, tile_max);
        let correction = exp(run_max - new_max);
        run_max = new_max;
        var tile_sum = vec4<f32>();
        for (var c = 0u; c < QUADS; c++) {
            // a masked key weighs exactly 0, also while the item has seen no key (new_max still UNSEEN)
            x[c] = select(vec4<f32>(), exp(x[c] - new_max), sees(it.keys, t0 + 4u * c));
            tile_sum += x[c];
        }
        run_sum = run_sum * correction + (tile_sum.x + tile_sum.y + tile_sum.z + tile_sum.w);
        for (var e = 0u; e < DIMS4; e++) {
            var a = acc[e] * correction;
            for (var c = 0u; c < QUADS; c++) {
                let w = 4u * c * DIMS4 + e;
                a = a + x[c].x * v_tile[w] + x[c].y * v_tile[w + DIMS4] + x[c].z * v_tile[w + 2u * DIMS4]
                    + x[c].w * v_tile[w + 3u * DIMS4];
            }
            acc[e] = a;
        }
    }
    store_row(b, it, acc, run_sum);
}
#else
#for i in #{ITEMS}
var<private> item#{i}: Item;
var<private> q#{i}: array<vec4<f32>, DIMS4>;
var<private> acc#{i}: array<vec4<f32>, DIMS4>;
var<private> run_max#{i}: f32;
var<private> run_sum#{i}: f32;
#endfor

#for w in #{STEPS}
// Keys t .. t + w - 1 for every item: lane l of each subgroup has loaded the vec4s of key t + l % w at `row`.
fn step_#{w}(t: u32, row: u32) {
#for i in #{ITEMS}
    var x#{i}: array<vec4<f32>, #{w}u / 4u>;
#endfor
    for (var e = 0u; e < DIMS4; e++) {
        let k = vec4<f32>(in_k[row + e]);
#for c in #{QUADS_#{w}}
        let k#{c}0 = subgroupBroadcast(k, 4u * #{c}u);
        let k#{c}1 = subgroupBroadcast(k, 4u * #{c}u + 1u);
        let k#{c}2 = subgroupBroadcast(k, 4u * #{c}u + 2u);
        let k#{c}3 = subgroupBroadcast(k, 4u * #{c}u + 3u);
#for i in #{ITEMS}
        x#{i}[#{c}] = x#{i}[#{c}] + q#{i}[e].x * vec4<f32>(k#{c}0.x, k#{c}1.x, k#{c}2.x, k#{c}3.x)
            + q#{i}[e].y * vec4<f32>(k#{c}0.y, k#{c}1.y, k#{c}2.y, k#{c}3.y)
            + q#{i}[e].z * vec4<f32>(k#{c}0.z, k#{c}1.z, k#{c}2.z, k#{c}3.z)
            + q#{i}[e].w * vec4<f32>(k#{c}0.w, k#{c}1.w, k#{c}2.w, k#{c}3.w);
#endfor
#endfor
    }
#for i in #{ITEMS}
    var p#{i}: array<vec4<f32>, #{w}u / 4u>;
    var correction#{i}: f32;
    {
        var step_max = UNSEEN;
#for c in #{QUADS_#{w}}
        x#{i}[#{c}] = masked(x#{i}[#{c}], item#{i}.keys, t + 4u * #{c}u);
        step_max = max(step_max, max(max(x#{i}[#{c}].x, x#{i}[#{c}].y), max(x#{i}[#{c}].z, x#{i}[#{c}].w)));
#endfor
        let new_max = max(run_max#{i}, step_max);
        correction#{i} = exp(run_max#{i} - new_max);
        run_max#{i} = new_max;
        var step_sum = vec4<f32>();
#for c in #{QUADS_#{w}}
        p#{i}[#{c}] = select(vec4<f32>(), exp(x#{i}[#{c}] - new_max), sees(item#{i}.keys, t + 4u * #{c}u));
        step_sum += p#{i}[#{c}];
#endfor
        run_sum#{i} = run_sum#{i} * correction#{i} + (step_sum.x + step_sum.y + step_sum.z + step_sum.w);
    }
#endfor
    for (var e = 0u; e < DIMS4; e++) {
        let v = vec4<f32>(in_v[row + e]);
#for i in #{ITEMS}
        var a#{i} = acc#{i}[e] * correction#{i};
#endfor
#for c in #{QUADS_#{w}}
        {
            let v0 = subgroupBroadcast(v, 4u * #{c}u);
            let v1 = subgroupBroadcast(v, 4u * #{c}u + 1u);
            let v2 = subgroupBroadcast(v, 4u * #{c}u + 2u);
            let v3 = subgroupBroadcast(v, 4u * #{c}u + 3u);
#for i in #{ITEMS}
            a#{i} = a#{i} + p#{i}[#{c}].x * v0 + p#{i}[#{c}].y * v1 + p#{i}[#{c}].z * v2 + p#{i}[#{c}].w * v3;
#endfor
        }
#endfor
#for i in #{ITEMS}
        acc#{i}[e] = a#{i};
#endfor
    }
}
#endfor

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_invocation_id) sid: u32,
    @builtin(subgroup_size) lanes: u32,
) {
    let b = wid.z;
    let rows = kv_rows(seqlen(b), #{SEQ}, #{PAST_ROWS});
    let span = block_keys(wid, rows);
#for i in #{ITEMS}
    item#{i} = item_of(lid + #{i}u * #{WORKGROUP_SIZE}u, b, wid, rows);
    q#{i} = query_row(b, item#{i});
    run_max#{i} = UNSEEN;
#endfor
    let base = cache_base(b, wid.y);
    // keys past the block's read its last key (in bounds, masked)
#if STEPS == 4
    let wide = false;
#else
#if STEPS == 8
    let wide = true;
#else
    let wide = lanes >= 8u;
#endif
#endif
    if (wide) {
#if STEPS != 4
        for (var t = span.x; t < span.y; t += 8u) {
            step_8(t, base + min(t + sid % 8u, span.y - 1u) * DIMS4);
        }
#endif
    } else {
#if STEPS != 8
        for (var t = span.x; t < span.y; t += 4u) {
            step_4(t, base + min(t + sid % 4u, span.y - 1u) * DIMS4);
        }
#endif
    }
#for i in #{ITEMS}
    store_row(b, item#{i}, acc#{i}, run_sum#{i});
#endfor
}
#endif
