// Direct convolution, one invocation per output element, gathering over its group's input channels
// and the kernel window. Conv reads forward taps; ConvTranspose gathers the input positions whose
// scattered window covers this output position, so no atomics or scratch buffers are needed.
// Bindings: 0 in_x, 1 in_w, then conv_epilogue's (bias, residual, out_y) at BIND_B, BIND_R, BIND_Y.
// Defs: X_T, W_T, B_T, Y_T  WGSL storage types (accumulation is f32); conv_epilogue's ACTIVATION & co.
//       MODE             direct (Conv: W is [M, C/group, KD, KH, KW]) | transpose (ConvTranspose: W
//                        is [C, M/group, KD, KH, KW])
//       HAS_BIAS         flag: input 2 is the per-output-channel bias
//       F16              flag: some storage type is f16
//       WORKGROUP_SIZE
// Dims (literal when static, immediates when symbolic): TOTAL output elements; C input channels;
//       M output channels; CG input channels per group; MG output channels per group; per axis
//       D, H, W (outermost first): extent D, H, W, output OD, OH, OW, kernel KD, KH, KW, strides
//       SD, SH, SW, dilations DD, DH, DW, begin pads PD, PH, PW (a 2-D op is a depth-1 volume, a 1-D
//       op also height-1). PDE, PHE and PWE (end pads) are unused here.
#ifdef F16
enable f16;
#endif
#import onyxia::entry
#import onyxia::conv_epilogue

@group(0) @binding(0) var<storage, read> in_x: array<#{X_T}>;
@group(0) @binding(1) var<storage, read> in_w: array<#{W_T}>;

// The input coordinate output coordinate `o` reads through kernel tap `k`, or -1 when it falls in
// the padding (direct) or between strided input positions (transpose).
fn tap(o: u32, k: u32, stride: u32, dilation: u32, pad: u32, size: u32) -> i32 {
#if MODE == direct
    let p = i32(o * stride + k * dilation) - i32(pad);
    return select(-1, p, p >= 0 && p < i32(size));
#else
    let t = i32(o + pad) - i32(k * dilation);
    if (t < 0 || u32(t) % stride != 0u) {  // t >= 0 by then: u32, as i32 `%` is wrong on some drivers
        return -1;
    }
    let p = t / i32(stride);
    return select(-1, p, p < i32(size));
#endif
}

fn element_count() -> u32 { return #{TOTAL}; }

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
    var acc = 0.0;
    for (var c = 0u; c < #{CG}; c++) {
        let ci = group * #{CG} + c;
        let x_volume = (n * #{C} + ci) * #{D} * #{H} * #{W};
#if MODE == direct
        let w_base = (m * #{CG} + c) * #{KD} * #{KH} * #{KW};
#else
        let w_base = (ci * #{MG} + m % #{MG}) * #{KD} * #{KH} * #{KW};
#endif
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
                    if (iw < 0) {
                        continue;
                    }
                    acc += f32(in_x[x_row + u32(iw)]) * f32(in_w[w_row + kw]);
                }
            }
        }
    }
    store(i, acc, bias(m));
}
