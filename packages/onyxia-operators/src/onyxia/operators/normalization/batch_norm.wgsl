// BatchNormalization in inference mode: a per-channel affine map with the running statistics,
// y = (x - mean[c]) * scale[c] / sqrt(var[c] + epsilon) + bias[c], computed in f32.
// Bindings: 0 in_x, 1 in_scale, 2 in_bias, 3 in_mean, 4 in_var (read), 5 out_y (write).
// Defs: X_T, SCALE_T, BIAS_T, MEAN_T, VAR_T, Y_T  WGSL storage types (opset 15 lets the parameters
//       and the statistics differ from X); F16 (flag); WORKGROUP_SIZE; EPSILON (float literal).
// Dims (literal when static, immediates when symbolic): N elements, C channels (dim 1), INNER the
//       product of the dims after the channel (element i is in channel (i / INNER) % C).
#ifdef F16
enable f16;
#endif
#import onyxia::entry

@group(0) @binding(0) var<storage, read> in_x: array<#{X_T}>;
@group(0) @binding(1) var<storage, read> in_scale: array<#{SCALE_T}>;
@group(0) @binding(2) var<storage, read> in_bias: array<#{BIAS_T}>;
@group(0) @binding(3) var<storage, read> in_mean: array<#{MEAN_T}>;
@group(0) @binding(4) var<storage, read> in_var: array<#{VAR_T}>;
@group(0) @binding(5) var<storage, read_write> out_y: array<#{Y_T}>;

fn element_count() -> u32 { return #{N}; }

fn element(i: u32) {
    let c = (i / #{INNER}) % #{C};
    let gain = f32(in_scale[c]) / sqrt(f32(in_var[c]) + f32(#{EPSILON}));
    out_y[i] = #{Y_T}((f32(in_x[i]) - f32(in_mean[c])) * gain + f32(in_bias[c]));
}
