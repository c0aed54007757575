// Softmax / LogSoftmax along one axis, numerically stable (max, then sum of exp(x - max), then
// normalise), one workgroup per row with workgroup reductions in between, or with ROW_LANES one
// invocation per row (short rows: a workgroup reduction's barriers cost lavapipe more than a short row's
// loads); Hardmax (HARD) writes 1 at the row's first maximum and 0 elsewhere.
// Bindings: 0 in_x (read), 1 out_y (write).
// Defs: X_T, Y_T (WGSL storage types), F16 (flag), LOG (flag: LogSoftmax), HARD (flag: Hardmax),
//       WORKGROUP_SIZE (power of two), ROW_LANES (flag: a row per invocation).
// Dims: ROWS = OUTER * INNER rows, L elements per row, INNER the stride between a row's elements:
//       element l of row r is at (r / INNER) * L * INNER + r % INNER + l * INNER. (Opset < 13
//       Softmax coerces to 2-D: INNER = 1.)
// Dispatch: ROWS workgroups (ROW_LANES: ceil(ROWS / WORKGROUP_SIZE)), 1-D (the runtime may split it into x, y).
#ifdef F16
enable f16;
#endif
#import onyxia::reduce

@group(0) @binding(0) var<storage, read> in_x: array<#{X_T}>;
@group(0) @binding(1) var<storage, read_write> out_y: array<#{Y_T}>;

// The row's maximum / sum from each invocation's part: the part itself with ROW_LANES, else a workgroup
// reduction.
fn row_max_of(lid: u32, part: f32) -> f32 {
#ifdef ROW_LANES
    return part;
#else
    return workgroup_max(lid, part);
#endif
}

fn row_sum_of(lid: u32, part: f32) -> f32 {
#ifdef ROW_LANES
    return part;
#else
    return workgroup_sum(lid, part);
#endif
}

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
#ifdef ROW_LANES
    let row = (wid.x + wid.y * nwg.x) * #{WORKGROUP_SIZE}u + lid;
    let start = 0u;  // this invocation walks its whole row
    let step = 1u;
#else
    let row = wid.x + wid.y * nwg.x;
    let start = lid;
    let step = #{WORKGROUP_SIZE}u;
#endif
    if (row >= #{ROWS}) {
        return;  // without ROW_LANES uniform: the whole workgroup leaves together
    }
    let base = (row / #{INNER}) * #{L} * #{INNER} + row % #{INNER};
    var local_max = bitcast<f32>(0xff800000u);
    for (var l = start; l < #{L}; l += step) {
        local_max = max(local_max, f32(in_x[base + l * #{INNER}]));
    }
    let row_max = row_max_of(lid, local_max);
#ifdef HARD
    var first = bitcast<f32>(0xff800000u);  // the lowest l holding the maximum, negated (exact below 2^24)
    for (var l = start; l < #{L}; l += step) {
        if (f32(in_x[base + l * #{INNER}]) == row_max) {
            first = max(first, -f32(l));
        }
    }
    let winner = u32(-row_max_of(lid, first));
    for (var l = start; l < #{L}; l += step) {
        out_y[base + l * #{INNER}] = select(#{Y_T}(0.0), #{Y_T}(1.0), l == winner);
    }
#else
    var local_sum = 0.0;
    for (var l = start; l < #{L}; l += step) {
        local_sum += exp(f32(in_x[base + l * #{INNER}]) - row_max);
    }
    let row_sum = row_sum_of(lid, local_sum);
#ifdef LOG
    let shift = row_max + log(row_sum);
#endif
    for (var l = start; l < #{L}; l += step) {
        let i = base + l * #{INNER};
#ifdef LOG
        out_y[i] = #{Y_T}(f32(in_x[i]) - shift);
#else
        out_y[i] = #{Y_T}(exp(f32(in_x[i]) - row_max) / row_sum);
#endif
    }
#endif
}
