// Resize of the two spatial axes of an NCHW tensor, one invocation per output element.
// nearest and linear: each axis maps an output coordinate to the input through the affine form
// x_in = (x_out + P) * NUM / DEN - Q, which covers every coordinate_transformation_mode but
// tf_crop_and_resize with the operations in the order ORT evaluates them (so nearest ties round alike).
// taps: cubic, antialiased and tf_crop_and_resize filters read host-computed per-axis tap tables
// (`resize_taps.py`): the H table (OH x TH entries) then the W table (OW x TW), separable weights.
// Bindings: 0 in_x (read), [1 tap_index, 2 tap_weight when MODE == taps] (read), then out_y (write).
// Defs: X_T, Y_T          WGSL storage types (interpolation is f32)
//       MODE              nearest | linear | taps
//       NEAREST_MODE      (nearest) round_prefer_floor | round_prefer_ceil | floor | ceil
//       H_P, H_NUM, H_DEN, H_Q, W_P, W_NUM, W_DEN, W_Q   (nearest, linear) f32 literals of the per-axis map
//       EXTRAPOLATION_VALUE  (taps) f32 expression for outputs whose first tap index is -1
//       F16               flag: some storage type is f16
//       WORKGROUP_SIZE
// Dims (literal when static, immediates when symbolic): TOTAL output elements; H, W input plane;
//       OH, OW output plane; (taps) TH, TW taps per output row and column.
#ifdef F16
enable f16;
#endif
#import onyxia::entry

@group(0) @binding(0) var<storage, read> in_x: array<#{X_T}>;
#if MODE == taps
@group(0) @binding(1) var<storage, read> tap_index: array<i32>;
@group(0) @binding(2) var<storage, read> tap_weight: array<f32>;
@group(0) @binding(3) var<storage, read_write> out_y: array<#{Y_T}>;
#else
@group(0) @binding(1) var<storage, read_write> out_y: array<#{Y_T}>;
#endif

fn source(x: u32, p: f32, num: f32, den: f32, q: f32) -> f32 {
    return (f32(x) + p) * num / den - q;
}

fn nearest(c: f32, size: u32) -> u32 {
#if NEAREST_MODE == round_prefer_floor
    let r = ceil(c - 0.5);
#endif
#if NEAREST_MODE == round_prefer_ceil
    let r = floor(c + 0.5);
#endif
#if NEAREST_MODE == floor
    let r = floor(c);
#endif
#if NEAREST_MODE == ceil
    let r = ceil(c);
#endif
    return u32(clamp(r, 0.0, f32(size - 1u)));
}

fn element_count() -> u32 { return #{TOTAL}; }

fn element(i: u32) {
    let ox = i % #{OW};
    let oy = (i / #{OW}) % #{OH};
    let base = (i / (#{OW} * #{OH})) * #{H} * #{W};
#if MODE == taps
    let ry = oy * #{TH};
    let rx = #{OH} * #{TH} + ox * #{TW};
    var value = #{EXTRAPOLATION_VALUE};
    if (tap_index[ry] >= 0 && tap_index[rx] >= 0) {
        value = 0.0;
        for (var ty = 0u; ty < #{TH}; ty++) {
            let row = base + u32(tap_index[ry + ty]) * #{W};
            var acc = 0.0;
            for (var tx = 0u; tx < #{TW}; tx++) {
                acc += tap_weight[rx + tx] * f32(in_x[row + u32(tap_index[rx + tx])]);
            }
            value += tap_weight[ry + ty] * acc;
        }
    }
#else
    let cy = source(oy, #{H_P}, #{H_NUM}, #{H_DEN}, #{H_Q});
    let cx = source(ox, #{W_P}, #{W_NUM}, #{W_DEN}, #{W_Q});
#endif
#if MODE == nearest
    let value = f32(in_x[base + nearest(cy, #{H}) * #{W} + nearest(cx, #{W})]);
#endif
#if MODE == linear
    // linear: clamp into the plane first, so the border repeats (as ORT does)
    let y = clamp(cy, 0.0, f32(#{H} - 1u));
    let x = clamp(cx, 0.0, f32(#{W} - 1u));
    let y0 = u32(y);
    let x0 = u32(x);
    let y1 = min(y0 + 1u, #{H} - 1u);
    let x1 = min(x0 + 1u, #{W} - 1u);
    let ty = y - f32(y0);
    let tx = x - f32(x0);
    let top = mix(f32(in_x[base + y0 * #{W} + x0]), f32(in_x[base + y0 * #{W} + x1]), tx);
    let bottom = mix(f32(in_x[base + y1 * #{W} + x0]), f32(in_x[base + y1 * #{W} + x1]), tx);
    let value = mix(top, bottom, ty);
#endif
    out_y[i] = #{Y_T}(value);
}
