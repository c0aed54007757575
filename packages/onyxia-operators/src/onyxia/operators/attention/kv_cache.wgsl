// GroupQueryAttention's cache writer: the new keys and values move from the input layout
// [B, SEQ, KV_HEADS * HEAD_SIZE] (BSNH; with PACKED, columns K_OFFSET.. and V_OFFSET.. of the packed
// QKV rows) to the cache layout [B, KV_HEADS, DST_ROWS, HEAD_SIZE] (BNSH), keys rotated with
// do_rotary, so attention reads them from the cache as they are. Rows
// follow onyxia::kv_rows: per batch row the kept past rows, then the new rows at positions
// past .. past + SEQ - 1 (rotary positions too), then zeros (onnxruntime leaves those rows unset).
// Bindings (numbers from the BIND_* defs): new_k, new_v (one new_qkv with PACKED), seqlens_k, [past_k, past_v with PAST],
//       [cos_cache, sin_cache with ROTARY], [the slots table with RESIDENT] (read), then dst_k, dst_v (write).
// Defs: T (WGSL storage type), F16 (flag), SEQLENS_T (i32), WORKGROUP_SIZE, BIND_* (binding numbers),
//       PAST (flag: write every dst row, copying the kept past rows; without it only the new rows are
//       written, after the past rows already in dst: the in-place append, where dst is the past buffer),
//       ROTARY (optional: rotated elements per head, 2 * cos_cache width), INTERLEAVED (with ROTARY),
//       NEW_STRIDE (elements between tokens' new rows), K_OFFSET, V_OFFSET (columns of the first k and v
//       element in a row: 0 for separate inputs), PACKED (flag: k and v come from one binding),
//       RESIDENT (flag, never with PAST: dst is the session's resident cache, each batch row's new rows
//       going into its slot; PAST_ROWS = DST_ROWS = capacity; onyxia::kv_rows), BIND_SLOTS with it.
// Dims: N (elements written: all of dst with PAST, the new rows without), KV_HEADS, HEAD_SIZE, SEQ,
//       PAST_ROWS (rows per head of the past buffer), DST_ROWS (PAST_ROWS + SEQ; the capacity with
//       RESIDENT); MAX_POS with ROTARY.
// Dispatch: ceil(N / WORKGROUP_SIZE), 1-D (the runtime may split it into x, y).
#ifdef F16
enable f16;
#endif
#import onyxia::entry
#import onyxia::kv_rows
#ifdef ROTARY
#import onyxia::rotary
#endif

#ifdef PACKED
@group(0) @binding(#{BIND_NEW_QKV}) var<storage, read> new_qkv: array<#{T}>;
fn new_k(i: u32) -> #{T} { return new_qkv[i + #{K_OFFSET}u]; }
fn new_v(i: u32) -> #{T} { return new_qkv[i + #{V_OFFSET}u]; }
#else
@group(0) @binding(#{BIND_NEW_K}) var<storage, read> in_k: array<#{T}>;
@group(0) @binding(#{BIND_NEW_V}) var<storage, read> in_v: array<#{T}>;
fn new_k(i: u32) -> #{T} { return in_k[i]; }
fn new_v(i: u32) -> #{T} { return in_v[i]; }
#endif
@group(0) @binding(#{BIND_SEQLENS}) var<storage, read> seqlens_k: array<#{SEQLENS_T}>;
#ifdef PAST
@group(0) @binding(#{BIND_PAST_K}) var<storage, read> past_k: array<#{T}>;
@group(0) @binding(#{BIND_PAST_V}) var<storage, read> past_v: array<#{T}>;
#endif
#ifdef ROTARY
@group(0) @binding(#{BIND_COS}) var<storage, read> cos_cache: array<#{T}>;
@group(0) @binding(#{BIND_SIN}) var<storage, read> sin_cache: array<#{T}>;
#endif
@group(0) @binding(#{BIND_DST_K}) var<storage, read_write> dst_k: array<#{T}>;
@group(0) @binding(#{BIND_DST_V}) var<storage, read_write> dst_v: array<#{T}>;

// Element h of new row s (batch b, kv head n) into dst element `i`; the key rotated to `position`.
fn write_new(i: u32, b: u32, n: u32, s: u32, h: u32, position: u32) {
    let head_base = (b * #{SEQ} + s) * #{NEW_STRIDE}u + n * #{HEAD_SIZE};
    var k = new_k(head_base + h);
#ifdef ROTARY
    if (h < #{ROTARY}u) {
        let tap = rotary_tap(h, #{ROTARY}u, #{INTERLEAVED});
        // an id outside the cache is invalid input; clamping reads a real row, never out of bounds
        let c = min(position, #{MAX_POS} - 1u) * (#{ROTARY}u / 2u) + tap.cache;
        let partner = f32(new_k(head_base + tap.partner));
        k = #{T}(rotary_apply(f32(k), partner, tap, f32(cos_cache[c]), f32(sin_cache[c])));
    }
#endif
    dst_k[i] = k;
    dst_v[i] = new_v(head_base + h);
}

fn element_count() -> u32 { return #{N}; }

fn element(i: u32) {
    let h = i % #{HEAD_SIZE};
    let row = i / #{HEAD_SIZE};
#ifdef PAST
    let t = row % #{DST_ROWS};
    let n = (row / #{DST_ROWS}) % #{KV_HEADS};
    let b = row / (#{DST_ROWS} * #{KV_HEADS});
    let rows = kv_rows(i32(seqlens_k[b]), #{SEQ}, #{PAST_ROWS});
    if (t < rows.kept) {
        let p = ((b * #{KV_HEADS} + n) * #{PAST_ROWS} + t) * #{HEAD_SIZE} + h;
        dst_k[i] = past_k[p];
        dst_v[i] = past_v[p];
    } else if (t - rows.kept < #{SEQ}) {
        write_new(i, b, n, t - rows.kept, h, rows.past + t - rows.kept);
    } else {
        dst_k[i] = #{T}(0);
        dst_v[i] = #{T}(0);
    }
#else
    let s = row % #{SEQ};
    let n = (row / #{SEQ}) % #{KV_HEADS};
    let b = row / (#{SEQ} * #{KV_HEADS});
    let rows = kv_rows(i32(seqlens_k[b]), #{SEQ}, #{PAST_ROWS});
    let t = rows.kept + s;
    if (t >= #{DST_ROWS}) {
        return;  // only a resident cache's right padding beyond its capacity: never read, and not ours to write
    }
    write_new(((cache_slot(b) * #{KV_HEADS} + n) * #{DST_ROWS} + t) * #{HEAD_SIZE} + h, b, n, s, h, rows.past + s);
#endif
}
