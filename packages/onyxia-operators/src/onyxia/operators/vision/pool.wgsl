// Pooling over a 3-D volume, one invocation per output element (a 2-D pool is a depth-1 volume, a
// 1-D pool also height-1; a global pool is one window covering the flattened spatial axes).
// Bindings: 0 in_x (read), 1 out_y (write), [2 out_indices when INDICES] (write, i32 storage of int64).
// Defs: X_T, Y_T         WGSL storage types (accumulation is f32: exact for the 8-bit ints MaxPool takes)
//       REDUCE           max | avg | lp
//       COUNT_INCLUDE_PAD flag (avg): divide by the window's positions inside the padded volume,
//                        not only the real elements
//       P                (lp) the norm's order, an f32 literal
//       INDICES          flag (max): also write the argmax's flat index into x
//       STORAGE_ORDER    (INDICES) 0 row-major | 1 column-major index within the volume
//       F16              flag: some storage type is f16
//       WORKGROUP_SIZE
// Dims (literal when static, immediates when symbolic): TOTAL output elements; per axis D, H, W
//       (outermost first): extent D, H, W, output OD, OH, OW, kernel KD, KH, KW, strides SD, SH, SW,
//       dilations DD, DH, DW, begin pads PD, PH, PW, end pads PDE, PHE, PWE.
#ifdef F16
enable f16;
#endif
#import onyxia::entry

@group(0) @binding(0) var<storage, read> in_x: array<#{X_T}>;
@group(0) @binding(1) var<storage, read_write> out_y: array<#{Y_T}>;
#ifdef INDICES
@group(0) @binding(2) var<storage, read_write> out_indices: array<i32>;
#endif

fn element_count() -> u32 { return #{TOTAL}; }

fn element(i: u32) {
    let ow = i % #{OW};
    let oh = (i / #{OW}) % #{OH};
    let od = (i / (#{OW} * #{OH})) % #{OD};
    let volume = i / (#{OW} * #{OH} * #{OD});
    let x_base = volume * #{D} * #{H} * #{W};
    let d0 = i32(od * #{SD}) - i32(#{PD});
    let h0 = i32(oh * #{SH}) - i32(#{PH});
    let w0 = i32(ow * #{SW}) - i32(#{PW});
    let d_limit = i32(#{D} + #{PDE});
    let h_limit = i32(#{H} + #{PHE});
    let w_limit = i32(#{W} + #{PWE});
    var acc = 0.0;
    var found = false;
    var best = 0u;
    var count = 0u;
    var padded = 0u;
    for (var kd = 0u; kd < #{KD}; kd++) {
        let d = d0 + i32(kd * #{DD});
        for (var kh = 0u; kh < #{KH}; kh++) {
            let h = h0 + i32(kh * #{DH});
            for (var kw = 0u; kw < #{KW}; kw++) {
                let w = w0 + i32(kw * #{DW});
                // ceil_mode windows may overhang the end padding; those positions never count
                padded += select(0u, 1u, d < d_limit && h < h_limit && w < w_limit);
                if (d < 0 || d >= i32(#{D}) || h < 0 || h >= i32(#{H}) || w < 0 || w >= i32(#{W})) {
                    continue;
                }
                let at = (u32(d) * #{H} + u32(h)) * #{W} + u32(w);
                let v = f32(in_x[x_base + at]);
                count += 1u;
#if REDUCE == max
                if (!found || v > acc) {
                    acc = v;
                    best = at;
                }
                found = true;
#endif
#if REDUCE == avg
                acc += v;
#endif
#if REDUCE == lp
                acc += pow(abs(v), #{P});
#endif
            }
        }
    }
#if REDUCE == avg
#ifdef COUNT_INCLUDE_PAD
    acc = acc / f32(padded);
#else
    acc = acc / f32(count);
#endif
#endif
#if REDUCE == lp
    acc = pow(acc, 1.0 / #{P});
#endif
    out_y[i] = #{Y_T}(acc);
#ifdef INDICES
#if STORAGE_ORDER == 1
    // column-major: the innermost axis of the volume varies slowest
    let bw = best % #{W};
    let bh = (best / #{W}) % #{H};
    let bd = best / (#{W} * #{H});
    best = (bw * #{H} + bh) * #{D} + bd;
#endif
    out_indices[i] = i32(x_base + best);
#endif
}
