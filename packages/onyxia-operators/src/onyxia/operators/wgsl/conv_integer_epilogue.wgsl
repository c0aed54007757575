#define_import_path onyxia::conv_integer_epilogue
// The integer convolutions' (ConvInteger, QLinearConv) zero points and what they do to a finished int32 sum, shared
// by the three kernels that run them (vision/conv_gemm.wgsl and vision/conv_depthwise.wgsl with INTEGER, and
// quantized/conv_integer.wgsl, the direct one), as onyxia::conv_epilogue is the float convolutions'.
// Sums are exact in i32 (wrapping as onnxruntime's accumulator): each kernel subtracts x_zero() from every x it
// loads, so a padded tap (onnxruntime pads x with x_zp) reads 0, and w_zero(m) from output channel m's weights.
// QLinearConv then adds its int32 bias and requantizes (onyxia::requant, multiplier x_scale * w_scale[m] /
// y_scale).
// Declares, at their BIND_* defs: x_zp (XZP), w_zp (WZP), x_scale, w_scale, y_scale, y_zp (REQUANT), bias
// (BIAS), out_y. Reads defs X_T, W_T, Y_T (storage types), S_T (scale type), XZP, WZP, WZP_CHANNELS (one w_zp
// per output channel), WS_CHANNELS (one w_scale per output channel), BIAS, REQUANT with LO, HI (i32 literals).
#ifdef REQUANT
#import onyxia::requant::{output_multiplier, requantize}
#endif

#ifdef XZP
@group(0) @binding(#{BIND_XZP}) var<storage, read> x_zp: array<#{X_T}>;
#endif
#ifdef WZP
@group(0) @binding(#{BIND_WZP}) var<storage, read> w_zp: array<#{W_T}>;
#endif
#ifdef REQUANT
@group(0) @binding(#{BIND_X_SCALE}) var<storage, read> x_scale: array<#{S_T}>;
@group(0) @binding(#{BIND_W_SCALE}) var<storage, read> w_scale: array<#{S_T}>;
@group(0) @binding(#{BIND_Y_SCALE}) var<storage, read> y_scale: array<#{S_T}>;
@group(0) @binding(#{BIND_YZP}) var<storage, read> y_zp: array<#{Y_T}>;
#endif
#ifdef BIAS
@group(0) @binding(#{BIND_BIAS}) var<storage, read> bias_in: array<i32>;
#endif
@group(0) @binding(#{BIND_Y}) var<storage, read_write> out_y: array<#{Y_T}>;

fn x_zero() -> i32 {
#ifdef XZP
    return i32(x_zp[0]);
#else
    return 0i;
#endif
}

fn w_zero(m: u32) -> i32 {
#ifdef WZP
#ifdef WZP_CHANNELS
    return i32(w_zp[m]);
#else
    return i32(w_zp[0]);
#endif
#else
    return 0i;
#endif
}

// What output channel m's sums go through: its bias, and its requantization multiplier (REQUANT)
struct Channel {
    bias: i32,
    multiplier: f32,
}

fn bias(m: u32) -> Channel {
    var c = Channel(0i, 1.0);
#ifdef BIAS
    c.bias = bias_in[m];
#endif
#ifdef REQUANT
#ifdef WS_CHANNELS
    let ws = f32(w_scale[m]);
#else
    let ws = f32(w_scale[0]);
#endif
    c.multiplier = output_multiplier(f32(x_scale[0]) * ws, f32(y_scale[0]));
#endif
    return c;
}

// Output element i from the exact sum `acc` of its channel `c`
fn store(i: u32, acc: i32, c: Channel) {
#ifdef REQUANT
    out_y[i] = #{Y_T}(requantize(acc + c.bias, c.multiplier, i32(y_zp[0]), #{LO}, #{HI}));
#else
    out_y[i] = acc + c.bias;
#endif
}
