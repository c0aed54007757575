// Gather along one axis: y[outer, j, inner] = x[outer, wrap(indices[j]), inner].
// Bindings: 0 in_x (read, data), 1 in_idx (read, indices), 2 out_y (write), 3 the error word
//           (onyxia::errors: an index outside [-AXIS_DIM, AXIS_DIM) is reported, as onnxruntime rejects it).
// Defs: T               WGSL storage type of data and output
//       I_T             storage type of indices: i32 (int64 indices travel as i32, int32 as is)
//       F16             flag: T is f16
//       CHUNKED         flag: in_x binds only data rows [FIRST_ROW, FIRST_ROW + ROWS) (a table over the
//                       storage-binding limit, gathered on axis 0 in one dispatch per range); outputs
//                       whose index falls outside them are left to the other dispatches
//       OUTER_CHUNKED   flag: in_x binds only outer rows [FIRST_ROW, FIRST_ROW + ROWS) of a table gathered
//                       on axis 1 (a tied [hidden, vocab] weight read by columns); outputs of other outer
//                       rows are left to the other dispatches
//       WORKGROUP_SIZE
// Dims (literal when static, immediates when symbolic):
//       N         output element count (> 0)
//       INNER     product of the data dims after the axis
//       NIDX      number of indices
//       AXIS_DIM  data dim along the axis
//       FIRST_ROW, ROWS  (CHUNKED, OUTER_CHUNKED only) the bound range of rows
#ifdef F16
enable f16;
#endif
#import onyxia::entry
#import onyxia::errors

@group(0) @binding(0) var<storage, read> in_x: array<#{T}>;
@group(0) @binding(1) var<storage, read> in_idx: array<#{I_T}>;
@group(0) @binding(2) var<storage, read_write> out_y: array<#{T}>;

fn element_count() -> u32 { return #{N}; }

fn element(i: u32) {
    let inner = i % #{INNER};
    let rest = i / #{INNER};
    let j = rest % #{NIDX};
    let outer = rest / #{NIDX};
    let axis_dim = i32(#{AXIS_DIM});
    // Negative indices count from the end; one out of range is reported and clamped inside the buffer.
    let src = i32(checked_index(in_idx[j], axis_dim));
#ifdef CHUNKED
    let row = src - i32(#{FIRST_ROW});  // outer is 0: only tables with nothing before the axis are split
    if (row < 0 || row >= i32(#{ROWS})) {
        return;
    }
    out_y[i] = in_x[u32(row) * #{INNER} + inner];
#else
#ifdef OUTER_CHUNKED
    if (outer < #{FIRST_ROW} || outer >= #{FIRST_ROW} + #{ROWS}) {
        return;
    }
    out_y[i] = in_x[((outer - #{FIRST_ROW}) * #{AXIS_DIM} + u32(src)) * #{INNER} + inner];
#else
    out_y[i] = in_x[(outer * #{AXIS_DIM} + u32(src)) * #{INNER} + inner];
#endif
#endif
}
