// The present of onnxruntime-genai's windowed KV cache (GroupQueryAttention sliding_window_cache=1):
// a fixed buffer of CAPACITY rows per head holding the last min(valid, CAPACITY) keys of the
// extended cache (kept past rows + new rows, see onyxia::kv_rows), left-aligned, zeros after them.
// onnxruntime 1.31 does exactly this shift when the buffer overflows (capacity = local_window_size).
// Bindings: 0 ext_k, 1 ext_v, 2 seqlens_k (read), 3 present_k, 4 present_v (write).
// Defs: T (WGSL storage type), F16 (flag), SEQLENS_T (i32), WORKGROUP_SIZE.
// Dims: N (elements of one present tensor), KV_HEADS, HEAD_SIZE, SEQ, CAPACITY, EXT_ROWS (CAPACITY + SEQ).
// Dispatch: ceil(N / WORKGROUP_SIZE), 1-D (the runtime may split it into x, y).
#ifdef F16
enable f16;
#endif
#import onyxia::entry
#import onyxia::kv_rows

@group(0) @binding(0) var<storage, read> ext_k: array<#{T}>;
@group(0) @binding(1) var<storage, read> ext_v: array<#{T}>;
@group(0) @binding(2) var<storage, read> seqlens_k: array<#{SEQLENS_T}>;
@group(0) @binding(3) var<storage, read_write> present_k: array<#{T}>;
@group(0) @binding(4) var<storage, read_write> present_v: array<#{T}>;

fn element_count() -> u32 { return #{N}; }

fn element(i: u32) {
    let h = i % #{HEAD_SIZE};
    let row = i / #{HEAD_SIZE};
    let r = row % #{CAPACITY};
    let head = row / #{CAPACITY};  // b * KV_HEADS + n
    let rows = kv_rows(i32(seqlens_k[head / #{KV_HEADS}]), #{SEQ}, #{CAPACITY});
    let valid = rows.kept + #{SEQ};
    let keep = min(valid, #{CAPACITY});
    if (r < keep) {
        let e = (head * #{EXT_ROWS} + r + valid - keep) * #{HEAD_SIZE} + h;
        present_k[i] = ext_k[e];
        present_v[i] = ext_v[e];
    } else {
        present_k[i] = #{T}(0);
        present_v[i] = #{T}(0);
    }
}
