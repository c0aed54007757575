// Index-driven gather and scatter: GatherElements, GatherND, ScatterElements, ScatterND.
// Element e of the iteration space (gather: output, scatter: updates) addresses the data at
//   sum_d coord_d * BASE_STRIDES[d] + sum_t wrap(in_idx[row * K + t]) * INDEXED_STRIDES[t],
//   row = sum_d coord_d * TUPLE_STRIDES[d]   (see addressing.py).
// Bindings: 0 in_x (read: data when gathering, updates when scattering), 1 in_idx (read, i32: int64
//           indices travel as i32), 2 out_y (write; a scatter's out_y already holds a copy of the data),
//           3 the error word (onyxia::errors: an index outside [-n, n) is reported, as onnxruntime rejects it).
// Defs: T               WGSL storage type of data, updates and output
//       F16             flag: T is f16
//       MODE            gather | scatter (one invocation per update, unordered: reduction none) |
//                       serial (one invocation per line walking its STEPS in order: reductions)
//       COMBINE         MODE serial: WGSL in `a` (current output) and `b` (update): a + b, max(a, b) ...
//       RANK, K         iteration rank (>= 1) and index tuple length (>= 1)
//       WORKGROUP_SIZE
// Dims (literal when static, immediates when symbolic):
//       N               iteration elements (> 0; MODE gather | scatter)
//       LINES, STEPS, INNER  MODE serial: line l walks e = (l / INNER * STEPS + s) * INNER + l % INNER
//       DIMS, BASE_STRIDES, TUPLE_STRIDES (RANK each), INDEXED_DIMS, INDEXED_STRIDES (K each)
#ifdef F16
enable f16;
#endif
#import onyxia::entry
#import onyxia::errors

@group(0) @binding(0) var<storage, read> in_x: array<#{T}>;
@group(0) @binding(1) var<storage, read> in_idx: array<i32>;
@group(0) @binding(2) var<storage, read_write> out_y: array<#{T}>;

fn data_offset(e: u32) -> u32 {
    var dims = array<u32, #{RANK}>(#{DIMS});
    var base_strides = array<u32, #{RANK}>(#{BASE_STRIDES});
    var tuple_strides = array<u32, #{RANK}>(#{TUPLE_STRIDES});
    var rem = e;
    var offset = 0u;
    var row = 0u;
    for (var d = i32(#{RANK}) - 1; d >= 0; d--) {
        let c = rem % dims[d];
        rem = rem / dims[d];
        offset += c * base_strides[d];
        row += c * tuple_strides[d];
    }
    var indexed_dims = array<u32, #{K}>(#{INDEXED_DIMS});
    var indexed_strides = array<u32, #{K}>(#{INDEXED_STRIDES});
    for (var t = 0u; t < #{K}u; t++) {
        // Negative indices count from the end; one out of range is reported and clamped inside the buffer.
        offset += checked_index(in_idx[row * #{K}u + t], i32(indexed_dims[t])) * indexed_strides[t];
    }
    return offset;
}

fn element_count() -> u32 {
#if MODE == serial
    return #{LINES};
#else
    return #{N};
#endif
}

fn element(i: u32) {
#if MODE == serial
    // Updates that can hit the same output element share a line, so walking it in order combines
    // duplicate indices deterministically without atomics (WGSL has none for floats).
    let first = (i / #{INNER}) * #{STEPS} * #{INNER} + i % #{INNER};
    for (var s = 0u; s < #{STEPS}; s++) {
        let e = first + s * #{INNER};
        let o = data_offset(e);
        let a = out_y[o];
        let b = in_x[e];
        out_y[o] = #{COMBINE};
    }
#else
#if MODE == gather
    out_y[i] = in_x[data_offset(i)];
#else
    out_y[data_offset(i)] = in_x[i];
#endif
#endif
}
