// TopK: one invocation per input element counts the elements of its line that come before it
// (onnxruntime's order: the better value first, the lower index first among equal values); an
// element whose rank is below K is written at that rank. O(AXIS_DIM) per element: no sort, no
// workgroup memory, and every element's place is independent of the others'.
// Bindings: 0 in_x (read), 1 out_values (write, T), 2 out_indices (write, i32: the int64 output
//           travels as i32), 3 the error word (onyxia::errors: a K larger than the axis, known only
//           at run time, is reported as onnxruntime rejects it).
// Defs: T               WGSL storage type of x and the values
//       F16             flag: T is f16
//       BETTER          `>` (largest) or `<` (smallest): `w BETTER v` puts w before v
//       WORKGROUP_SIZE, ERRORS_BINDING (3)
// Dims: N (input elements, > 0), AXIS_DIM (> 0), INNER (product of the dims after the axis), K.
#ifdef F16
enable f16;
#endif
#import onyxia::entry
#import onyxia::errors

@group(0) @binding(0) var<storage, read> in_x: array<#{T}>;
@group(0) @binding(1) var<storage, read_write> out_values: array<#{T}>;
@group(0) @binding(2) var<storage, read_write> out_indices: array<i32>;

fn element_count() -> u32 { return #{N}; }

fn element(i: u32) {
    let k = #{K};
    if (i == 0u && k > #{AXIS_DIM}) {
        report_error(ERROR_INDEX_OUT_OF_RANGE, i32(k));
    }
    let inner = i % #{INNER};
    let j = (i / #{INNER}) % #{AXIS_DIM};
    let outer = i / (#{INNER} * #{AXIS_DIM});
    let base = outer * #{AXIS_DIM} * #{INNER} + inner;
    let v = in_x[i];
    var rank = 0u;
    for (var t = 0u; t < #{AXIS_DIM} && rank < k; t++) {
        let w = in_x[base + t * #{INNER}];
        if ((w #{BETTER} v) || (w == v && t < j)) {
            rank++;
        }
    }
    if (rank < k) {
        let at = (outer * k + rank) * #{INNER} + inner;
        out_values[at] = v;
        out_indices[at] = i32(j);
    }
}
