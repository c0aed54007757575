// CumSum: one invocation per line along the axis, summing in order (forward or reversed).
// Lines are short next to the element count in the models that use CumSum (position ids from an
// attention mask), so a serial walk beats a parallel scan's extra passes.
// Bindings: 0 in_x (read), 1 out_y (write).
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

@group(0) @binding(0) var<storage, read> in_x: array<#{T}>;
@group(0) @binding(1) var<storage, read_write> out_y: array<#{T}>;

fn element_count() -> u32 { return #{LINES}; }

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
        acc += x;
#else
        acc += x;
        out_y[at] = #{T}(acc);
#endif
    }
}
