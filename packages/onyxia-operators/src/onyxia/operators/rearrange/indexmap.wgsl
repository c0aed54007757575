// Index-map copy: y[i] = x[map(i)] where map is per-axis affine, with tiling or padding.
// Serves Transpose, Slice, Expand, Tile, Pad, DepthToSpace and SpaceToDepth.
// Bindings: 0 in_x (read), [1 in_pad (read): Pad's constant_value known only at run time], then out_y
//           (write) at OUT_BINDING.
// Defs: X_T (storage type of x and y), RANK (>= 1), MODE (copy | tile | constant | edge | reflect | wrap),
//       PAD_VALUE (MODE constant: a literal of type X_T, or in_pad[0]), OUT_BINDING, F16 (flag),
//       WORKGROUP_SIZE.
// Dims: N output elements; per output axis (RANK entries each): OUT_DIMS, IN_DIMS (extent of the input
//       axis read), IN_STRIDES (elements), STARTS and STEPS (i32 bit patterns: pads and reversed
//       slices are negative).
#ifdef F16
enable f16;
#endif
#import onyxia::entry
#if MODE == reflect
#import onyxia::math::{mod_floor_i32}
#endif
#if MODE == wrap
#import onyxia::math::{mod_floor_i32}
#endif

@group(0) @binding(0) var<storage, read> in_x: array<#{X_T}>;
#if OUT_BINDING == 2
@group(0) @binding(1) var<storage, read> in_pad: array<#{X_T}>;
#endif
@group(0) @binding(#{OUT_BINDING}) var<storage, read_write> out_y: array<#{X_T}>;

fn element_count() -> u32 { return #{N}; }

fn element(i: u32) {
    var out_dims = array<u32, #{RANK}>(#{OUT_DIMS});
    var in_dims = array<u32, #{RANK}>(#{IN_DIMS});
    var in_strides = array<u32, #{RANK}>(#{IN_STRIDES});
    var starts = array<u32, #{RANK}>(#{STARTS});
    var steps = array<u32, #{RANK}>(#{STEPS});
    var rem = i;
    var offset = 0u;
    var inside = true;
    for (var d = i32(#{RANK}) - 1; d >= 0; d--) {
        let coord = rem % out_dims[d];
        rem = rem / out_dims[d];
        let n = i32(in_dims[d]);
        var c = i32(coord) * bitcast<i32>(steps[d]) + bitcast<i32>(starts[d]);
#if MODE == tile
        c = i32(u32(c) % in_dims[d]);  // Tile's starts are 0 and steps 1: c >= 0, so u32 `%` is exact
#endif
#if MODE == constant
        inside = inside && c >= 0 && c < n;
#endif
#if MODE == edge
        c = clamp(c, 0, n - 1);
#endif
#if MODE == reflect
        if (n > 1) {
            let period = 2 * n - 2;
            c = mod_floor_i32(c, period);  // not i32 `%`, wrong for negative c on some drivers
            c = select(c, period - c, c >= n);
        } else {
            c = 0;
        }
#endif
#if MODE == wrap
        c = mod_floor_i32(c, n);
#endif
        offset += u32(max(c, 0)) * in_strides[d];
    }
#if MODE == constant
    out_y[i] = select(#{PAD_VALUE}, in_x[offset], inside);
#else
    out_y[i] = in_x[offset];
#endif
}
