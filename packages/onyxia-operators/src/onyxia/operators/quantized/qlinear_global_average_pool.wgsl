// com.microsoft QLinearGlobalAveragePool as onnxruntime's MLAS computes it: per (image, channel) the exact i32
// sum of x minus x_zp * IMAGE, requantized (onyxia::requant) with multiplier x_scale / (y_scale * f32(IMAGE)).
// One invocation per output element (n, c); the output is [N, C] flat in both layouts.
// Bindings: 0 x, 1 x_scale, 2 x_zp, 3 y_scale, 4 y_zp, 5 y (bytes one per u32 (uint8) or i32 (int8), as stored).
// Defs: T (storage type of the bytes), S_T (scale type), LO, HI (i32 literals), CHANNELS_LAST, WORKGROUP_SIZE.
// Dims: TOTAL (N * C), C, IMAGE (spatial elements per channel).
#ifdef F16
enable f16;
#endif
#import onyxia::entry
#import onyxia::requant::{output_multiplier, requantize}

@group(0) @binding(0) var<storage, read> x: array<#{T}>;
@group(0) @binding(1) var<storage, read> x_scale: array<#{S_T}>;
@group(0) @binding(2) var<storage, read> x_zp: array<#{T}>;
@group(0) @binding(3) var<storage, read> y_scale: array<#{S_T}>;
@group(0) @binding(4) var<storage, read> y_zp: array<#{T}>;
@group(0) @binding(5) var<storage, read_write> y: array<#{T}>;

fn element_count() -> u32 { return #{TOTAL}; }

fn element(i: u32) {
#ifdef CHANNELS_LAST
    let base = (i / #{C}) * #{IMAGE} * #{C} + i % #{C};
    let step = #{C};
#else
    let base = i * #{IMAGE};
    let step = 1u;
#endif
    var acc = -i32(x_zp[0]) * i32(#{IMAGE});
    for (var p = 0u; p < #{IMAGE}; p++) {
        acc += i32(x[base + p * step]);
    }
    let multiplier = output_multiplier(f32(x_scale[0]), f32(y_scale[0]) * f32(#{IMAGE}));
    y[i] = #{T}(requantize(acc, multiplier, i32(y_zp[0]), #{LO}, #{HI}));
}
