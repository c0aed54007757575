// Softmax / LogSoftmax along one axis, numerically stable (max, then sum of exp(x - max), then
// normalise), one workgroup per row with workgroup reductions in between; Hardmax (HARD) writes 1 at
// the row's first maximum and 0 elsewhere.
// Bindings: 0 in_x (read), 1 out_y (write).
// Defs: X_T, Y_T (WGSL storage types), F16 (flag), LOG (flag: LogSoftmax), HARD (flag: Hardmax),
//       WORKGROUP_SIZE (power of two).
// Dims: ROWS = OUTER * INNER rows, L elements per row, INNER the stride between a row's elements:
//       element l of row r is at (r / INNER) * L * INNER + r % INNER + l * INNER. (Opset < 13
//       Softmax coerces to 2-D: INNER = 1.)
// Dispatch: ROWS workgroups, 1-D (the runtime may split it into x, y).
#ifdef F16
enable f16;
#endif
#import onyxia::reduce

@group(0) @binding(0) var<storage, read> in_x: array<#{X_T}>;
@group(0) @binding(1) var<storage, read_write> out_y: array<#{Y_T}>;

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= #{ROWS}) {
        return;  // uniform: the whole workgroup leaves together
    }
    let base = (row / #{INNER}) * #{L} * #{INNER} + row % #{INNER};
    var local_max = bitcast<f32>(0xff800000u);
    for (var l = lid; l < #{L}; l += #{WORKGROUP_SIZE}u) {
        local_max = max(local_max, f32(in_x[base + l * #{INNER}]));
    }
    let row_max = workgroup_max(lid, local_max);
#ifdef HARD
    var first = bitcast<f32>(0xff800000u);  // the lowest l holding the maximum, negated (exact below 2^24)
    for (var l = lid; l < #{L}; l += #{WORKGROUP_SIZE}u) {
        if (f32(in_x[base + l * #{INNER}]) == row_max) {
            first = max(first, -f32(l));
        }
    }
    let winner = u32(-workgroup_max(lid, first));
    for (var l = lid; l < #{L}; l += #{WORKGROUP_SIZE}u) {
        out_y[base + l * #{INNER}] = select(#{Y_T}(0.0), #{Y_T}(1.0), l == winner);
    }
#else
    var local_sum = 0.0;
    for (var l = lid; l < #{L}; l += #{WORKGROUP_SIZE}u) {
        local_sum += exp(f32(in_x[base + l * #{INNER}]) - row_max);
    }
    let row_sum = workgroup_sum(lid, local_sum);
#ifdef LOG
    let shift = row_max + log(row_sum);
#endif
    for (var l = lid; l < #{L}; l += #{WORKGROUP_SIZE}u) {
        let i = base + l * #{INNER};
#ifdef LOG
        out_y[i] = #{Y_T}(f32(in_x[i]) - shift);
#else
        out_y[i] = #{Y_T}(exp(f32(in_x[i]) - row_max) / row_sum);
#endif
    }
#endif
}
