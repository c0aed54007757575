// KvAppend: present [B, HEADS, TOTAL_ROWS, HEAD_SIZE] = the past rows, then the new rows (kv_append.py).
// Bindings: 0 new_x (read: [B, HEADS, SEQ, HEAD_SIZE], or [B, SEQ, HEADS, HEAD_SIZE] with NEW_BSNH),
//           with COPY_PAST 1 past (read: [B, HEADS, PAST_ROWS, HEAD_SIZE]), then present (read_write).
// Defs: T (WGSL storage type), F16 (flag), WORKGROUP_SIZE,
//       NEW_BSNH (flag: new is in the projection's layout, heads after the sequence axis),
//       COPY_PAST (flag: write every present element, the past rows copied from past; without it only
//       the new rows are written, after the past rows already there: the in-place append, where
//       present is the past buffer, so past is not bound: one buffer read-only and read-write at once).
// Dims (literal when static, immediates when symbolic): N (elements written: all of present with
//       COPY_PAST, the new rows without), HEADS, HEAD_SIZE, SEQ, PAST_ROWS, TOTAL_ROWS (PAST_ROWS + SEQ).
#ifdef F16
enable f16;
#endif
#import onyxia::entry

@group(0) @binding(0) var<storage, read> new_x: array<#{T}>;
#ifdef COPY_PAST
@group(0) @binding(1) var<storage, read> past: array<#{T}>;
@group(0) @binding(2) var<storage, read_write> present: array<#{T}>;
#else
@group(0) @binding(1) var<storage, read_write> present: array<#{T}>;
#endif

fn element_count() -> u32 { return #{N}; }

// Element h of new row s of (batch, kv head) pair `bn`.
fn new_value(bn: u32, s: u32, h: u32) -> #{T} {
#ifdef NEW_BSNH
    let b = bn / #{HEADS};
    let n = bn % #{HEADS};
    return new_x[((b * #{SEQ} + s) * #{HEADS} + n) * #{HEAD_SIZE} + h];
#else
    return new_x[(bn * #{SEQ} + s) * #{HEAD_SIZE} + h];
#endif
}

fn element(i: u32) {
    let h = i % #{HEAD_SIZE};
    let row = i / #{HEAD_SIZE};
#ifdef COPY_PAST
    let t = row % #{TOTAL_ROWS};
    let bn = row / #{TOTAL_ROWS};
    if (t < #{PAST_ROWS}) {
        present[i] = past[(bn * #{PAST_ROWS} + t) * #{HEAD_SIZE} + h];
    } else {
        present[i] = new_value(bn, t - #{PAST_ROWS}, h);
    }
#else
    let s = row % #{SEQ};
    let bn = row / #{SEQ};
    present[(bn * #{TOTAL_ROWS} + #{PAST_ROWS} + s) * #{HEAD_SIZE} + h] = new_value(bn, s, h);
#endif
}
