// Resize of the spatial axes of an [outer, (D,) H, W] tensor, one invocation per output element: NCHW
// (rank 4), NCW (rank 3: H is 1 and mapped to itself) and NCDHW (rank 5: DEPTH, D resized too).
// nearest and linear: each axis maps an output coordinate to the input through the affine form
// x_in = (x_out + P) * NUM / DEN - Q, which covers every coordinate_transformation_mode but
// tf_crop_and_resize with the operations in the order ORT evaluates them (so nearest ties round alike).
// taps: cubic, antialiased and tf_crop_and_resize filters read host-computed per-axis tap tables
// (`resize_taps.py`): the H table (OH x TH entries), the W table (OW x TW), then with DEPTH the D table
// (OD x TD); separable weights.
// Bindings: 0 in_x (read), [1 tap_index, 2 tap_weight when MODE == taps] (read), then out_y (write).
// Defs: X_T, Y_T          WGSL storage types (interpolation is f32)
//       MODE              nearest | linear | taps
//       NEAREST_MODE      (nearest) round_prefer_floor | round_prefer_ceil | floor | ceil
//       H_P, H_NUM, H_DEN, H_Q, W_P, W_NUM, W_DEN, W_Q   (nearest, linear) f32 literals of the per-axis map
//       D_P, D_NUM, D_DEN, D_Q                           (nearest, linear with DEPTH) the depth axis's map
//       EXTRAPOLATION_VALUE  (taps) f32 expression for outputs whose first tap index is -1
//       DEPTH             flag: a third spatial axis D (rank 5)
//       F16               flag: some storage type is f16
//       WORKGROUP_SIZE
// Dims (literal when static, immediates when symbolic): TOTAL output elements; H, W input plane;
//       OH, OW output plane; (taps) TH, TW taps per output row and column; with DEPTH D, OD (and TD).
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

#if MODE == linear
// bilinear in one input plane starting at `base`: clamp into the plane first, so the border repeats (as ORT does)
fn plane_linear(base: u32, cy: f32, cx: f32) -> f32 {
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
    return mix(top, bottom, ty);
}
#endif

#if MODE == taps
// the separable H x W tap sum in one input plane starting at `base`
fn plane_taps(base: u32, ry: u32, rx: u32) -> f32 {
    var value = 0.0;
    for (var ty = 0u; ty < #{TH}; ty++) {
        let row = base + u32(tap_index[ry + ty]) * #{W};
        var acc = 0.0;
        for (var tx = 0u; tx < #{TW}; tx++) {
            acc += tap_weight[rx + tx] * f32(in_x[row + u32(tap_index[rx + tx])]);
        }
        value += tap_weight[ry + ty] * acc;
    }
    return value;
}
#endif

fn element(i: u32) {
    let ox = i % #{OW};
    let oy = (i / #{OW}) % #{OH};
#ifdef DEPTH
    let oz = (i / (#{OW} * #{OH})) % #{OD};
    let base = (i / (#{OW} * #{OH} * #{OD})) * #{D} * #{H} * #{W};
#else
    let base = (i / (#{OW} * #{OH})) * #{H} * #{W};
#endif
#if MODE == taps
    let ry = oy * #{TH};
    let rx = #{OH} * #{TH} + ox * #{TW};
    var value = #{EXTRAPOLATION_VALUE};
#ifdef DEPTH
    let rz = #{OH} * #{TH} + #{OW} * #{TW} + oz * #{TD};
    if (tap_index[ry] >= 0 && tap_index[rx] >= 0 && tap_index[rz] >= 0) {
        value = 0.0;
        for (var tz = 0u; tz < #{TD}; tz++) {
            value += tap_weight[rz + tz] * plane_taps(base + u32(tap_index[rz + tz]) * #{H} * #{W}, ry, rx);
        }
    }
#else
    if (tap_index[ry] >= 0 && tap_index[rx] >= 0) {
        value = plane_taps(base, ry, rx);
    }
#endif
#else
    let cy = source(oy, #{H_P}, #{H_NUM}, #{H_DEN}, #{H_Q});
    let cx = source(ox, #{W_P}, #{W_NUM}, #{W_DEN}, #{W_Q});
#ifdef DEPTH
    let cz = source(oz, #{D_P}, #{D_NUM}, #{D_DEN}, #{D_Q});
#endif
#endif
#if MODE == nearest
#ifdef DEPTH
    let plane = base + nearest(cz, #{D}) * #{H} * #{W};
#else
    let plane = base;
#endif
    let value = f32(in_x[plane + nearest(cy, #{H}) * #{W} + nearest(cx, #{W})]);
#endif
#if MODE == linear
#ifdef DEPTH
    let z = clamp(cz, 0.0, f32(#{D} - 1u));
    let z0 = u32(z);
    let z1 = min(z0 + 1u, #{D} - 1u);
    let near = plane_linear(base + z0 * #{H} * #{W}, cy, cx);
    let far = plane_linear(base + z1 * #{H} * #{W}, cy, cx);
    let value = mix(near, far, z - f32(z0));
#else
    let value = plane_linear(base, cy, cx);
#endif
#endif
    out_y[i] = #{Y_T}(value);
}
