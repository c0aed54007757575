// ArgMax / ArgMin: one invocation per output element walks its line along the axis.
// Bindings: 0 in_x (read), 1 out_y (write, i32: the int64 output travels as i32).
// Defs: T               WGSL storage type of x
//       F16             flag: T is f16
//       BETTER          comparison of `v` (candidate) against `best`: `>` / `<` keep the first
//                       extreme (ONNX's default tie rule), `>=` / `<=` the last (select_last_index)
//       WORKGROUP_SIZE
// Dims: N_OUT (lines, > 0), AXIS_DIM (> 0), INNER (product of the dims after the axis).
#ifdef F16
enable f16;
#endif
#import onyxia::entry

@group(0) @binding(0) var<storage, read> in_x: array<#{T}>;
@group(0) @binding(1) var<storage, read_write> out_y: array<i32>;

fn element_count() -> u32 { return #{N_OUT}; }

fn element(i: u32) {
    let base = (i / #{INNER}) * #{AXIS_DIM} * #{INNER} + i % #{INNER};
    var best = in_x[base];
    var best_j = 0u;
    for (var j = 1u; j < #{AXIS_DIM}; j++) {
        let v = in_x[base + j * #{INNER}];
        if (v #{BETTER} best) {
            best = v;
            best_j = j;
        }
    }
    out_y[i] = i32(best_j);
}
