// KvAppend: per pair p, present_p [B, HEADS, TOTAL_ROWS, HEAD_SIZE] = past_p's rows, then new_p's (kv_append.py).
// Bindings (numbers from the BIND_* defs), per pair: new_p (read: [B, HEADS, SEQ, HEAD_SIZE], or
//       [B, SEQ, HEADS, HEAD_SIZE] with NEW_BSNH<p>), past_p (read, with COPY_PAST: [B, HEADS, PAST_ROWS,
//       HEAD_SIZE]); with RESIDENT then kv_rows (read: i32 [B, 2]); then present_p (read_write) for every
//       pair; with RESIDENT last the error word (ERRORS_BINDING).
// Defs: T (WGSL storage type), F16 (flag), WORKGROUP_SIZE, BIND_* (binding numbers),
//       PAIRS (the pairs as a `#for` list: "0" or "0 1"),
//       NEW_BSNH<p> (flag: new_p is in the projection's layout, heads after the sequence axis),
//       COPY_PAST (flag: write every present element, the past rows copied from past; without it only
//       the new rows are written, after the past rows already there: the in-place append, where
//       present is the past buffer, so past is not bound: one buffer read-only and read-write at once),
//       RESIDENT (flag: the session's resident layout, onyxia.core.resident_kv: present is
//       [slots, HEADS, CAPACITY, HEAD_SIZE] and batch row b's new rows go to rows kv_rows[b, 1] + s of
//       slot kv_rows[b, 0]; a batch row whose new rows do not all fit CAPACITY, or whose slot lies past
//       the buffer, is reported (ERROR_SLOT) and none of its rows is written),
//       CAPACITY (with RESIDENT: rows per (slot, kv head)).
// Dims (literal when static, immediates when symbolic): N (elements written per pair: all of present
//       with COPY_PAST, the new rows without), HEADS, HEAD_SIZE, SEQ, PAST_ROWS, TOTAL_ROWS (PAST_ROWS + SEQ).
#ifdef F16
enable f16;
#endif
#import onyxia::entry
#ifdef RESIDENT
#import onyxia::errors
#endif

#for p in #{PAIRS}
@group(0) @binding(#{BIND_NEW#{p}}) var<storage, read> new#{p}: array<#{T}>;
#ifdef COPY_PAST
@group(0) @binding(#{BIND_PAST#{p}}) var<storage, read> past#{p}: array<#{T}>;
#endif
@group(0) @binding(#{BIND_PRESENT#{p}}) var<storage, read_write> present#{p}: array<#{T}>;

// Present element `dst`: row t (new row s when t >= PAST_ROWS), element h of (batch, kv head) pair `bn`.
fn append#{p}(dst: u32, bn: u32, t: u32, s: u32, h: u32) {
#ifdef COPY_PAST
    if (t < #{PAST_ROWS}) {
        present#{p}[dst] = past#{p}[(bn * #{PAST_ROWS} + t) * #{HEAD_SIZE} + h];
        return;
    }
#endif
#ifdef NEW_BSNH#{p}
    let src = (((bn / #{HEADS}) * #{SEQ} + s) * #{HEADS} + bn % #{HEADS}) * #{HEAD_SIZE} + h;
#else
    let src = (bn * #{SEQ} + s) * #{HEAD_SIZE} + h;
#endif
    present#{p}[dst] = new#{p}[src];
}
#endfor
#ifdef RESIDENT
@group(0) @binding(#{BIND_ROWS}) var<storage, read> kv_rows: array<i32>;
#endif

fn element_count() -> u32 { return #{N}; }

fn element(i: u32) {
    let h = i % #{HEAD_SIZE};
    let row = i / #{HEAD_SIZE};
#ifdef COPY_PAST
    let t = row % #{TOTAL_ROWS};
    let bn = row / #{TOTAL_ROWS};
    let s = t - #{PAST_ROWS};
    let dst = (bn * #{TOTAL_ROWS} + t) * #{HEAD_SIZE} + h;
#else
    let s = row % #{SEQ};
    let bn = row / #{SEQ};
#ifdef RESIDENT
    let b = bn / #{HEADS};
    let slot = kv_rows[2u * b];
    let cached = kv_rows[2u * b + 1u];
    let t = u32(max(cached, 0)) + s;
    if (cached < 0 || u32(cached) + #{SEQ} > #{CAPACITY}) {
        report_error(ERROR_INDEX_OUT_OF_RANGE, cached);  // rows would land in another head's or slot's rows
        return;
    }
    let dst = ((u32(max(slot, 0)) * #{HEADS} + bn % #{HEADS}) * #{CAPACITY} + t) * #{HEAD_SIZE} + h;
    if (slot < 0 || dst >= arrayLength(&present0)) {
        report_error(ERROR_INDEX_OUT_OF_RANGE, slot);  // a slot the buffer does not hold
        return;
    }
#else
    let t = #{PAST_ROWS} + s;
    let dst = (bn * #{TOTAL_ROWS} + t) * #{HEAD_SIZE} + h;
#endif
#endif
#for p in #{PAIRS}
    append#{p}(dst, bn, t, s, h);
#endfor
}
