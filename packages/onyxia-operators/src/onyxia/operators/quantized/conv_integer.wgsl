// ConvInteger and QLinearConv (1-D to 3-D, grouped and depthwise): one invocation per output element sums
// (x - x_zp) * (w - w_zp[m]) over its group's input channels and the kernel window exactly in i32 (wrapping like
// onnxruntime's accumulator). A tap in the padding adds nothing, as onnxruntime pads x with x_zp. QLinearConv then
// adds its int32 bias and requantizes (onyxia::requant, multiplier x_scale * w_scale[m] / y_scale).
// Bindings (numbers from BIND_* defs): x, [x_scale with REQUANT], [x_zp with XZP], w, [w_scale with REQUANT],
//   [w_zp with WZP], [y_scale, y_zp with REQUANT], [bias with BIAS], y. Bytes are one per u32 (uint8) or i32 (int8).
// Defs: X_T, W_T, Y_T (storage types), S_T (scale type: f32 or f16 with F16), XZP, WZP, WZP_CHANNELS (one w_zp
//   per output channel), WS_CHANNELS (one w_scale per output channel), BIAS, REQUANT with LO, HI (i32 literals),
//   WORKGROUP_SIZE.
// Dims: TOTAL output elements; C input channels; M output channels; CG input channels per group; MG output
//   channels per group; per axis D, H, W (outermost first): extent, output OD/OH/OW, kernel KD/KH/KW, strides
//   SD/SH/SW, dilations DD/DH/DW, begin pads PD/PH/PW (vision/geometry.py's `Window.volume`).
#ifdef F16
enable f16;
#endif
#import onyxia::entry
#ifdef REQUANT
#import onyxia::requant::{output_multiplier, requantize}
#endif

@group(0) @binding(#{BIND_X}) var<storage, read> x: array<#{X_T}>;
#ifdef REQUANT
@group(0) @binding(#{BIND_X_SCALE}) var<storage, read> x_scale: array<#{S_T}>;
#endif
#ifdef XZP
@group(0) @binding(#{BIND_XZP}) var<storage, read> x_zp: array<#{X_T}>;
#endif
@group(0) @binding(#{BIND_W}) var<storage, read> w: array<#{W_T}>;
#ifdef REQUANT
@group(0) @binding(#{BIND_W_SCALE}) var<storage, read> w_scale: array<#{S_T}>;
#endif
#ifdef WZP
@group(0) @binding(#{BIND_WZP}) var<storage, read> w_zp: array<#{W_T}>;
#endif
#ifdef REQUANT
@group(0) @binding(#{BIND_Y_SCALE}) var<storage, read> y_scale: array<#{S_T}>;
@group(0) @binding(#{BIND_YZP}) var<storage, read> y_zp: array<#{Y_T}>;
#endif
#ifdef BIAS
@group(0) @binding(#{BIND_BIAS}) var<storage, read> bias: array<i32>;
#endif
@group(0) @binding(#{BIND_Y}) var<storage, read_write> y: array<#{Y_T}>;

fn element_count() -> u32 { return #{TOTAL}; }

// The input coordinate output coordinate `o` reads through kernel tap `k`, or -1 in the padding
fn tap(o: u32, k: u32, stride: u32, dilation: u32, pad: u32, size: u32) -> i32 {
    let p = i32(o * stride + k * dilation) - i32(pad);
    return select(-1, p, p >= 0 && p < i32(size));
}

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

fn element(i: u32) {
    let ow = i % #{OW};
    var rest = i / #{OW};
    let oh = rest % #{OH};
    rest = rest / #{OH};
    let od = rest % #{OD};
    rest = rest / #{OD};
    let m = rest % #{M};
    let n = rest / #{M};
    let group = m / #{MG};
    let zx = x_zero();
    let zw = w_zero(m);
    var acc = 0i;
    for (var c = 0u; c < #{CG}; c++) {
        let x_volume = (n * #{C} + group * #{CG} + c) * #{D} * #{H} * #{W};
        let w_base = (m * #{CG} + c) * #{KD} * #{KH} * #{KW};
        for (var kd = 0u; kd < #{KD}; kd++) {
            let id = tap(od, kd, #{SD}, #{DD}, #{PD}, #{D});
            if (id < 0) {
                continue;
            }
            for (var kh = 0u; kh < #{KH}; kh++) {
                let ih = tap(oh, kh, #{SH}, #{DH}, #{PH}, #{H});
                if (ih < 0) {
                    continue;
                }
                let x_row = x_volume + (u32(id) * #{H} + u32(ih)) * #{W};
                let w_row = w_base + (kd * #{KH} + kh) * #{KW};
                for (var kw = 0u; kw < #{KW}; kw++) {
                    let iw = tap(ow, kw, #{SW}, #{DW}, #{PW}, #{W});
                    if (iw >= 0) {
                        acc += (i32(x[x_row + u32(iw)]) - zx) * (i32(w[w_row + kw]) - zw);
                    }
                }
            }
        }
    }
#ifdef BIAS
    acc += bias[m];
#endif
#ifdef REQUANT
#ifdef WS_CHANNELS
    let ws = f32(w_scale[m]);
#else
    let ws = f32(w_scale[0]);
#endif
    let multiplier = output_multiplier(f32(x_scale[0]) * ws, f32(y_scale[0]));
    y[i] = #{Y_T}(requantize(acc, multiplier, i32(y_zp[0]), #{LO}, #{HI}));
#else
    y[i] = acc;
#endif
}
