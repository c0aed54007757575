// ConvInteger and QLinearConv, direct (1-D to 3-D, grouped and depthwise): one invocation per output element sums
// (x - x_zp) * (w - w_zp[m]) over its group's input channels and the kernel window exactly in i32. This is the
// conv variant table's `direct` row for the integer ops: it serves what the tiled kernels (vision/conv_gemm.wgsl,
// vision/conv_depthwise.wgsl with INTEGER) cannot, a W computed at run time (the GEMM reads W packed at load)
// and spatial dims that are not compile-time numbers. A tap in the padding adds nothing
// (onnxruntime pads x with x_zp); onyxia::conv_integer_epilogue adds the bias and requantizes.
// Bindings: 0 x, 1 w, then onyxia::conv_integer_epilogue's at their BIND_* defs. Bytes are one per u32 (uint8) or
//   i32 (int8).
// Defs: X_T, W_T, F16, onyxia::conv_integer_epilogue's, WORKGROUP_SIZE.
// Dims: TOTAL output elements; C input channels; M output channels; CG input channels per group; MG output
//   channels per group; per axis D, H, W (outermost first): extent, output OD/OH/OW, kernel KD/KH/KW, strides
//   SD/SH/SW, dilations DD/DH/DW, begin pads PD/PH/PW (vision/geometry.py's `Window.volume`).
#ifdef F16
enable f16;
#endif
#import onyxia::entry
#import onyxia::conv_integer_epilogue

@group(0) @binding(0) var<storage, read> x: array<#{X_T}>;
@group(0) @binding(1) var<storage, read> w: array<#{W_T}>;

fn element_count() -> u32 { return #{TOTAL}; }

// The input coordinate output coordinate `o` reads through kernel tap `k`, or -1 in the padding
fn tap(o: u32, k: u32, stride: u32, dilation: u32, pad: u32, size: u32) -> i32 {
    let p = i32(o * stride + k * dilation) - i32(pad);
    return select(-1, p, p >= 0 && p < i32(size));
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
    store(i, acc, bias(m));
}
