#define_import_path onyxia::kv_rows
// Where a batch row's keys sit in a GroupQueryAttention KV cache, onnxruntime's CPU convention
// (checked against onnxruntime 1.31). Shared by the cache writers and the attention kernels, so
// they agree on every row. Reads defs RESIDENT (flag) and, with it, BIND_SLOTS.
//
// seqlens_k[b] + 1 is the row's valid length after this step (`total`); the new SEQ keys take
// absolute positions total - SEQ .. total - 1 (a first prompt with right padding, total < SEQ,
// starts at 0). The past buffer's first `kept` rows hold the keys just before them: all of them
// for a growing cache, the last `capacity` for onnxruntime-genai's windowed cache
// (sliding_window_cache=1), whose buffer is left-aligned. The "extended" cache the kernels read
// is the kept past rows followed by the new rows, so its row r is absolute position
// past - kept + r: for a growing cache that is r itself (the present cache).

// With RESIDENT the cache is the LLM session's resident buffer (onyxia.core.resident_kv):
// [slots, kv_heads, capacity, head_size], batch row b in slot rows[b, 0] of the session's int32
// [batch, 2] table (bound read-only at BIND_SLOTS); callers pass PAST_ROWS = capacity, so every row
// before the new ones is kept and the extended cache is the slot itself. Otherwise row b is slot b.
#ifdef RESIDENT
@group(0) @binding(#{BIND_SLOTS}) var<storage, read> kv_slots: array<i32>;
#endif

// The slot (the outermost cache index) holding batch row b's rows.
fn cache_slot(b: u32) -> u32 {
#ifdef RESIDENT
    return u32(kv_slots[2u * b]);
#else
    return b;
#endif
}

struct KvRows {
    total: u32,  // valid keys after this step
    past: u32,   // absolute position of the first new key
    kept: u32,   // past keys the past buffer holds, in its first rows
}

// `past_rows`: rows per head of the past buffer (its length, or a windowed cache's capacity).
fn kv_rows(seqlen_k: i32, seq: u32, past_rows: u32) -> KvRows {
    let total = u32(max(seqlen_k + 1, 0));
    let past = select(0u, total - seq, total > seq);
    return KvRows(total, past, min(past, past_rows));
}

struct KeyRange {
    lo: u32,        // first extended-cache row query `s` sees
    hi: u32,        // one past the last
    position: u32,  // the query's absolute position (its rotary position)
}

// Keys visible to new query `s`: causal (absolute key position j <= the query's p), valid
// (j < total, which hides right padding), and with `window` > 0 also p - j < window.
fn key_range(rows: KvRows, s: u32, window: u32) -> KeyRange {
    let p = rows.past + s;
    let base = rows.past - rows.kept;
    var lo = base;
    if (window > 0u && p + 1u > window) {
        lo = max(lo, p + 1u - window);
    }
    let hi = max(min(p + 1u, rows.total), lo);
    return KeyRange(lo - base, hi - base, p);
}
