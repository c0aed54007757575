// BatchNormalization training mode, first step: each channel's batch statistics over the batch and
// spatial axes (one invocation per channel walks its BATCH x INNER elements twice: the mean, then the
// squared deviations, in f32), and the running statistics' update the spec outputs:
// running = input * MOMENTUM + batch * (1 - MOMENTUM). The variance is the biased one (divided by the
// element count), as the ONNX spec and onnxruntime use for both the normalisation and the update.
// Bindings: 0 in_x, [IN_MEAN_BINDING in_mean, IN_VAR_BINDING in_var: the input running statistics]
//           (read); BATCH_MEAN_BINDING out_batch_mean, BATCH_VAR_BINDING out_batch_var (f32 scratch),
//           [OUT_MEAN_BINDING out_mean, OUT_VAR_BINDING out_var: the updated running statistics] (write).
// Defs: X_T, IN_MEAN_T, IN_VAR_T, OUT_MEAN_T, OUT_VAR_T (storage types); RUNNING_MEAN, RUNNING_VAR
//       (flags: that output is present); MOMENTUM (f32 literal); F16 (flag); WORKGROUP_SIZE.
// Dims: C channels, BATCH (dim 0), INNER (product of the dims after the channel).
#ifdef F16
enable f16;
#endif
#import onyxia::entry

@group(0) @binding(0) var<storage, read> in_x: array<#{X_T}>;
#ifdef RUNNING_MEAN
@group(0) @binding(#{IN_MEAN_BINDING}) var<storage, read> in_mean: array<#{IN_MEAN_T}>;
#endif
#ifdef RUNNING_VAR
@group(0) @binding(#{IN_VAR_BINDING}) var<storage, read> in_var: array<#{IN_VAR_T}>;
#endif
@group(0) @binding(#{BATCH_MEAN_BINDING}) var<storage, read_write> out_batch_mean: array<f32>;
@group(0) @binding(#{BATCH_VAR_BINDING}) var<storage, read_write> out_batch_var: array<f32>;
#ifdef RUNNING_MEAN
@group(0) @binding(#{OUT_MEAN_BINDING}) var<storage, read_write> out_mean: array<#{OUT_MEAN_T}>;
#endif
#ifdef RUNNING_VAR
@group(0) @binding(#{OUT_VAR_BINDING}) var<storage, read_write> out_var: array<#{OUT_VAR_T}>;
#endif

fn element_count() -> u32 { return #{C}; }

fn element(c: u32) {
    let count = f32(#{BATCH} * #{INNER});
    var sum = 0.0;
    for (var b = 0u; b < #{BATCH}; b++) {
        let base = (b * #{C} + c) * #{INNER};
        for (var j = 0u; j < #{INNER}; j++) {
            sum += f32(in_x[base + j]);
        }
    }
    let mean = sum / count;
    var squares = 0.0;
    for (var b = 0u; b < #{BATCH}; b++) {
        let base = (b * #{C} + c) * #{INNER};
        for (var j = 0u; j < #{INNER}; j++) {
            let d = f32(in_x[base + j]) - mean;
            squares += d * d;
        }
    }
    let variance = squares / count;
    out_batch_mean[c] = mean;
    out_batch_var[c] = variance;
    let momentum = f32(#{MOMENTUM});
#ifdef RUNNING_MEAN
    out_mean[c] = #{OUT_MEAN_T}(f32(in_mean[c]) * momentum + mean * (1.0 - momentum));
#endif
#ifdef RUNNING_VAR
    out_var[c] = #{OUT_VAR_T}(f32(in_var[c]) * momentum + variance * (1.0 - momentum));
#endif
}
