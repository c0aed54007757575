// Resize of the spatial axes of an [outer, (D,) H, W] tensor, one invocation per output element: NCHW
// (rank 4), NCW (rank 3: H is 1 and mapped to itself) and NCDHW (rank 5: DEPTH, D resized too).
// nearest: each axis's input index comes from a host table or an exact integer map (`resize_nearest.py`), never
// from float arithmetic here, where a compiler's contraction or a 2.5-ULP division may move a tie.
// linear: each axis maps an output coordinate to the input through the affine form
// x_in = (x_out + P) * NUM / DEN - Q, which covers every coordinate_transformation_mode but
// tf_crop_and_resize with the operations in the order ORT evaluates them.
// taps: cubic, antialiased and tf_crop_and_resize filters read host-computed per-axis tap tables
// (`resize_taps.py`): the H table (OH x TH entries), the W table (OW x TW), then with DEPTH the D table
// (OD x TD); separable weights.
// Bindings: 0 in_x (read), [1 tap_index, 2 tap_weight when MODE == taps; 1 tap_index when INDEX_TABLE] (read),
//           then out_y (write).
// Defs: X_T, Y_T          WGSL storage types (interpolation is f32)
//       MODE              nearest | linear | taps
//       H_TABLE, W_TABLE, D_TABLE   (nearest) where the axis's indices start in tap_index (one per output
//                         coordinate); an axis without one has H_MAP (W_MAP, D_MAP): "A, B, C, ceil", its
//                         index floor (ceil: ceil) of (A x + B) / C in i32; INDEX_TABLE: some axis has a table
//       H_P, H_NUM, H_DEN, H_Q, W_P, W_NUM, W_DEN, W_Q   (linear) f32 literals of the per-axis map
//       D_P, D_NUM, D_DEN, D_Q                           (linear with DEPTH) the depth axis's map
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
#ifdef INDEX_TABLE
@group(0) @binding(1) var<storage, read> tap_index: array<i32>;
@group(0) @binding(2) var<storage, read_write> out_y: array<#{Y_T}>;
#else
@group(0) @binding(1) var<storage, read_write> out_y: array<#{Y_T}>;
#endif
#endif

#if MODE == linear
fn source(x: u32, p: f32, num: f32, den: f32, q: f32) -> f32 {
    return (f32(x) + p) * num / den - q;
}
#endif

#if MODE == nearest
// floor (up: ceil) of (a x + b) / c for c > 0, clamped into an axis of `size`: integer arithmetic, exact on every
// adapter (i32 `/` truncates toward zero; `%` is avoided, NVIDIA's being wrong for negative operands)
fn rational_index(x: u32, a: i32, b: i32, c: i32, up: bool, size: u32) -> u32 {
    let n = a * i32(x) + b;
    var q = n / c;
    if (q * c != n && (n < 0) != up) {
        q += select(-1, 1, up);
    }
    return u32(clamp(q, 0, i32(size) - 1));
}

fn h_index(y: u32) -> u32 {
#ifdef H_TABLE
    return u32(tap_index[#{H_TABLE}u + y]);
#else
    return rational_index(y, #{H_MAP}, #{H});
#endif
}

fn w_index(x: u32) -> u32 {
#ifdef W_TABLE
    return u32(tap_index[#{W_TABLE}u + x]);
#else
    return rational_index(x, #{W_MAP}, #{W});
#endif
}

#ifdef DEPTH
fn d_index(z: u32) -> u32 {
#ifdef D_TABLE
    return u32(tap_index[#{D_TABLE}u + z]);
#else
    return rational_index(z, #{D_MAP}, #{D});
#endif
}
#endif
#endif

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
#endif
#if MODE == nearest
#ifdef DEPTH
    let plane = base + d_index(oz) * #{H} * #{W};
#else
    let plane = base;
#endif
    let value = f32(in_x[plane + h_index(oy) * #{W} + w_index(ox)]);
#endif
#if MODE == linear
    let cy = source(oy, #{H_P}, #{H_NUM}, #{H_DEN}, #{H_Q});
    let cx = source(ox, #{W_P}, #{W_NUM}, #{W_DEN}, #{W_Q});
#ifdef DEPTH
    let cz = source(oz, #{D_P}, #{D_NUM}, #{D_DEN}, #{D_Q});
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
