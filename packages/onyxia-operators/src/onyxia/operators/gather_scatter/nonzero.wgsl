// NonZero: the coordinates of x's non-zero elements, in row-major order, as y[RANK, COUNT] (i32:
// int64 lives as i32 on the GPU). Two dispatches of one workgroup each: the first (COUNT_ONLY)
// writes the count, which the runtime reads back to bind COUNT; the second writes the coordinates.
// Each of the 256 invocations owns one contiguous chunk of x, so the order of the output is the
// order of the chunks: a workgroup prefix sum over the chunk counts gives each its first column.
// Bindings: 0 in_x (read), 1 out_count (COUNT_ONLY: one u32) or out_y (i32[RANK * COUNT]).
// Defs: X_T (storage type of x; bool is u32), F16 (flag), RANK (>= 1), COUNT_ONLY (flag).
// Dims: N (elements of x), DIMS (x's dims, RANK of them), COUNT (without COUNT_ONLY: non-zeros).
#ifdef F16
enable f16;
#endif

const THREADS: u32 = 256u;

@group(0) @binding(0) var<storage, read> in_x: array<#{X_T}>;
#ifdef COUNT_ONLY
@group(0) @binding(1) var<storage, read_write> out_count: array<u32>;
#else
@group(0) @binding(1) var<storage, read_write> out_y: array<i32>;
#endif

var<workgroup> firsts: array<u32, THREADS>;

fn is_nonzero(i: u32) -> bool {
    return in_x[i] != #{X_T}(0);  // NaN counts as non-zero, -0.0 as zero: numpy's rule
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32) {
    let n = #{N};
    let chunk = (n + THREADS - 1u) / THREADS;
    let begin = min(lid * chunk, n);
    let end = min(begin + chunk, n);
    var mine = 0u;
    for (var i = begin; i < end; i++) {
        if (is_nonzero(i)) {
            mine++;
        }
    }
    firsts[lid] = mine;
    workgroupBarrier();
    if (lid == 0u) {
        var total = 0u;
        for (var t = 0u; t < THREADS; t++) {
            let c = firsts[t];
            firsts[t] = total;
            total += c;
        }
#ifdef COUNT_ONLY
        out_count[0] = total;
#endif
    }
    workgroupBarrier();
#ifndef COUNT_ONLY
    var dims = array<u32, #{RANK}>(#{DIMS});
    var column = firsts[lid];
    for (var i = begin; i < end; i++) {
        if (!is_nonzero(i)) {
            continue;
        }
        var rest = i;
        for (var r = i32(#{RANK}) - 1; r >= 0; r--) {
            out_y[u32(r) * #{COUNT} + column] = i32(rest % dims[r]);
            rest = rest / dims[r];
        }
        column++;
    }
#endif
}
