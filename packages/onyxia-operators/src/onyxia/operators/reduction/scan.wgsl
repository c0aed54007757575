// CumSum: one invocation per line along the axis, summing in order (forward or reversed).
// Lines are short next to the element count in the models that use CumSum (position ids from an
// attention mask), so a serial walk beats a parallel scan's extra passes.
// Bindings: 0 in_x (read), 1 out_y (write), [2 the error word when CHECKED: int64 data, whose running
//           sum is checked against the i32 range it is carried in (ERRORS_BINDING 2)].
// Defs: T               WGSL storage type of x and y
//       ACC_T           accumulator type: f32 for f16 data (fewer roundings), else T
//       F16             flag: T is f16
//       EXCLUSIVE       flag: y excludes the element itself (the first element of a line gets 0)
//       REVERSE         flag: sum from the end of the line
//       WORKGROUP_SIZE
// Dims: LINES (outer * inner, > 0), AXIS_DIM, INNER (product of the dims after the axis).
#ifdef F16
enable f16;
#endif
#import onyxia::entry
#ifdef CHECKED
#import onyxia::errors
#endif

@group(0) @binding(0) var<storage, read> in_x: array<#{T}>;
@group(0) @binding(1) var<storage, read_write> out_y: array<#{T}>;

fn element_count() -> u32 { return #{LINES}; }

fn add(a: #{ACC_T}, b: #{ACC_T}) -> #{ACC_T} {
#ifdef CHECKED
    return add_i64(a, b);
#else
    return a + b;
#endif
}

fn element(i: u32) {
    let base = (i / #{INNER}) * #{AXIS_DIM} * #{INNER} + i % #{INNER};
    var acc = #{ACC_T}(0);
    for (var s = 0u; s < #{AXIS_DIM}; s++) {
#ifdef REVERSE
        let at = base + (#{AXIS_DIM} - 1u - s) * #{INNER};
#else
        let at = base + s * #{INNER};
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
