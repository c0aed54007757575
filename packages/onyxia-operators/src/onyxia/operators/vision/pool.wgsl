// Pooling over a 2-D plane, one invocation per output element (a 1-D pool is a height-1 plane; a
// global pool is one window covering the flattened spatial axes).
// Bindings: 0 in_x (read), 1 out_y (write), [2 out_indices when INDICES] (write, i32 storage of int64).
// Defs: X_T, Y_T         WGSL storage types (accumulation is f32)
//       REDUCE           max | avg | lp
//       COUNT_INCLUDE_PAD flag (avg): divide by the window's positions inside the padded plane,
//                        not only the real elements
//       P                (lp) the norm's order, an f32 literal
//       INDICES          flag (max): also write the argmax's flat index into x
//       STORAGE_ORDER    (INDICES) 0 row-major | 1 column-major index within the plane
//       F16              flag: some storage type is f16
//       WORKGROUP_SIZE
// Dims (literal when static, immediates when symbolic): TOTAL output elements; plane H, W, OH, OW,
//       kernel KH, KW, strides SH, SW, dilations DH, DW, begin pads PH, PW, end pads PHE, PWE.
#ifdef F16
enable f16;
#endif
#import onyxia::indexing

@group(0) @binding(0) var<storage, read> in_x: array<#{X_T}>;
@group(0) @binding(1) var<storage, read_write> out_y: array<#{Y_T}>;
#ifdef INDICES
@group(0) @binding(2) var<storage, read_write> out_indices: array<i32>;
#endif

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = flat_invocation(wid, nwg, lid, #{WORKGROUP_SIZE}u);
    if (i >= #{TOTAL}) {
        return;
    }
    let ow = i % #{OW};
    let oh = (i / #{OW}) % #{OH};
    let plane = i / (#{OW} * #{OH});
    let h0 = i32(oh * #{SH}) - i32(#{PH});
    let w0 = i32(ow * #{SW}) - i32(#{PW});
    let h_limit = i32(#{H} + #{PHE});
    let w_limit = i32(#{W} + #{PWE});
    var acc = 0.0;
    var found = false;
    var best = 0u;
    var count = 0u;
    var padded = 0u;
    for (var kh = 0u; kh < #{KH}; kh++) {
        let h = h0 + i32(kh * #{DH});
        for (var kw = 0u; kw < #{KW}; kw++) {
            let w = w0 + i32(kw * #{DW});
            // ceil_mode windows may overhang the end padding; those positions never count
            padded += select(0u, 1u, h < h_limit && w < w_limit);
            if (h < 0 || h >= i32(#{H}) || w < 0 || w >= i32(#{W})) {
                continue;
            }
            let at = u32(h) * #{W} + u32(w);
            let v = f32(in_x[plane * #{H} * #{W} + at]);
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
    best = (best % #{W}) * #{H} + best / #{W};
#endif
    out_indices[i] = i32(plane * #{H} * #{W} + best);
#endif
}
