// CumSum: one invocation per line along the axis, summing in order (forward or reversed).
// Lines are short next to the element count in the models that use CumSum (position ids from an
// attention mask), so a serial walk beats a parallel scan's extra passes.
// Bindings: 0 in_x (read), [1 in_axis (read) when AXIS_INPUT], then out_y (write), [then the error word
//           when CHECKED (at ERRORS_BINDING): int64/uint64 data, whose running sum is checked against
//           the 32-bit range it is carried in, and a run-time axis, checked against [-RANK, RANK)].
// Defs: T               WGSL storage type of x and y
//       ACC_T           accumulator type: f32 for f16 data (fewer roundings), else T
//       F16             flag: T is f16
//       EXCLUSIVE       flag: y excludes the element itself (the first element of a line gets 0)
//       REVERSE         flag: sum from the end of the line
//       CHECKED_ADD     int64/uint64 data: the sum as onyxia::errors' checked call, ``add_i64(a, b)`` or
//                       ``add_u64(a, b)`` (CHECKED is set with it)
//       AXIS_INPUT      flag: the axis is read from in_axis (int64 as i32) at run time; RANK its range
//       WORKGROUP_SIZE
// Dims: LINES (outer * inner, > 0), AXIS_DIM, INNER (product of the dims after the axis);
//       with AXIS_INPUT instead N (elements, > 0) and DIMS (RANK entries), from which those follow.
#ifdef F16
enable f16;
#endif
#import onyxia::entry
#ifdef CHECKED
#import onyxia::errors
#endif

@group(0) @binding(0) var<storage, read> in_x: array<#{T}>;
#ifdef AXIS_INPUT
@group(0) @binding(1) var<storage, read> in_axis: array<i32>;
@group(0) @binding(2) var<storage, read_write> out_y: array<#{T}>;

// (AXIS_DIM, INNER) of the axis read at run time; checked_index reports an axis out of range.
fn axis_extent() -> vec2<u32> {
    var dims = array<u32, #{RANK}>(#{DIMS});
    let axis = checked_index(in_axis[0], #{RANK});
    var inner = 1u;
    for (var d = axis + 1u; d < #{RANK}u; d++) {
        inner *= dims[d];
    }
    return vec2<u32>(dims[axis], inner);
}

fn element_count() -> u32 { return #{N} / axis_extent().x; }
#else
@group(0) @binding(1) var<storage, read_write> out_y: array<#{T}>;

fn element_count() -> u32 { return #{LINES}; }
#endif

fn add(a: #{ACC_T}, b: #{ACC_T}) -> #{ACC_T} {
#ifdef CHECKED_ADD
    return #{CHECKED_ADD};
#else
    return a + b;
#endif
}

fn element(i: u32) {
#ifdef AXIS_INPUT
    let extent = axis_extent();
    let axis_dim = extent.x;
    let inner = extent.y;
#else
    let axis_dim = #{AXIS_DIM};
    let inner = #{INNER};
#endif
    let base = (i / inner) * axis_dim * inner + i % inner;
    var acc = #{ACC_T}(0);
    for (var s = 0u; s < axis_dim; s++) {
#ifdef REVERSE
        let at = base + (axis_dim - 1u - s) * inner;
#else
        let at = base + s * inner;
#endif
        let x = #{ACC_T}(in_x[at]);
#ifdef EXCLUSIVE
        out_y[at] = #{T}(acc);
        acc = add(acc, x);
#else
        acc = add(acc, x);
        out_y[at] = #{T}(acc);
#endif
    }
}
