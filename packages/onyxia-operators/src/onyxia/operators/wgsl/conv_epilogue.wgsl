#define_import_path onyxia::conv_epilogue
// What the tiled convolutions (vision/conv_gemm.wgsl, vision/conv_depthwise.wgsl) do to a finished sum: add the
// bias, apply the activation the graph had after the Conv, add the residual the graph added after that, store.
// The fused ops run in f32 exactly as their unfused kernels compute them (the fusion pass only fuses f32 convs,
// so no intermediate rounding is skipped); see vision/conv_fusion.py for the graph patterns.
// Declares in_b (HAS_BIAS) at BIND_B, in_r (RESIDUAL, same shape as y) at BIND_R, out_y at BIND_Y.
// Reads defs B_T, Y_T, HAS_BIAS, RESIDUAL, BIND_*, ACTIVATION (none | relu | silu | sigmoid | hardswish |
// leaky_relu | clip), ALPHA (leaky_relu), LO and HI (clip; f32 literals), and dim M.
#import onyxia::math

#ifdef HAS_BIAS
@group(0) @binding(#{BIND_B}) var<storage, read> in_b: array<#{B_T}>;
#endif
#ifdef RESIDUAL
@group(0) @binding(#{BIND_R}) var<storage, read> in_r: array<#{Y_T}>;
#endif
@group(0) @binding(#{BIND_Y}) var<storage, read_write> out_y: array<#{Y_T}>;

fn bias(m: u32) -> f32 {
#ifdef HAS_BIAS
    return f32(in_b[m]);
#else
    return 0.0;
#endif
}

// relu and clip keep a NaN as the unfused Relu and Clip rows do (elementwise/unary.py): a bit test, since a
// driver may assume no NaN and turn a float compare-and-select into max or min.
fn activation(x: f32) -> f32 {
    var y = x;
#if ACTIVATION == relu
    y = select(x, 0.0, x < 0.0 && !isnan_f32(x));
#endif
#if ACTIVATION == silu
    y = x * sigmoid_f32(x);
#endif
#if ACTIVATION == sigmoid
    y = sigmoid_f32(x);
#endif
#if ACTIVATION == hardswish
    y = x * max(min(0.16666666666666666 * x + 0.5, 1.0), 0.0);
#endif
#if ACTIVATION == leaky_relu
    y = select(#{ALPHA} * x, x, x >= 0.0);
#endif
#if ACTIVATION == clip
    y = select(min(max(x, #{LO}), #{HI}), x, isnan_f32(x));
#endif
    return y;
}

// Output element i from the sum `acc` of its channel with bias `b`.
fn store(i: u32, acc: f32, b: f32) {
    var v = activation(acc + b);
#ifdef RESIDUAL
    v += f32(in_r[i]);
#endif
    out_y[i] = #{Y_T}(v);
}
