// QuantizeLinear and DequantizeLinear with one scale (and zero point) per tensor, per axis or per block,
// 4-bit operands packed as onyxia::nibbles reads them. A packed output is written one u32 word (8 elements)
// per invocation, since WGSL cannot store a byte.
//   QUANTIZE:  y = clamp(round_half_even(x / scale) + zero_point, LO, HI)  (the quotient correctly rounded)
//   else:      y = Y_T(f32(x - zero_point) * scale)                          (onnxruntime's order)
// Bindings: 0 in_x, 1 in_scale, [2 in_zero with ZERO_POINT], then out_y at OUT_BINDING.
// Defs: X_T, S_T, Z_T, Y_T (storage types; u32 for packed), XV_T, ZV_T (one value of x / the zero point),
//       X_PACKED + X_NIBBLE, Z_PACKED + Z_NIBBLE (onyxia::nibbles readers), Y_PACKED (flag), ZERO_POINT (flag),
//       QUANTIZE (flag) with LO, HI (f32 literals), PARAMS (tensor | axis | block), F16, WORKGROUP_SIZE.
// Dims: N element count, UNITS invocations (N, or ceil(N / 8) with Y_PACKED), INNER (elements after the axis),
//       AXIS (x's dim at the axis), BLOCK (block size), SCALE_AXIS (the scale's dim at the axis).
#ifdef F16
enable f16;
#endif
#import onyxia::entry
#import onyxia::nibbles
#ifdef QUANTIZE
#import onyxia::dynamic_quant::{round_quotient}
#endif

@group(0) @binding(0) var<storage, read> in_x: array<#{X_T}>;
@group(0) @binding(1) var<storage, read> in_scale: array<#{S_T}>;
#ifdef ZERO_POINT
@group(0) @binding(2) var<storage, read> in_zero: array<#{Z_T}>;
#endif
@group(0) @binding(#{OUT_BINDING}) var<storage, read_write> out_y: array<#{Y_T}>;

fn element_count() -> u32 { return #{UNITS}; }

fn x_at(i: u32) -> #{XV_T} {
#ifdef X_PACKED
    return #{X_NIBBLE}(in_x[i / 8u], i);
#else
    return in_x[i];
#endif
}

// the index of element i's scale and zero point
fn param_index(i: u32) -> u32 {
#if PARAMS == tensor
    return 0u;
#endif
#if PARAMS == axis
    return (i / #{INNER}) % #{AXIS};
#endif
#if PARAMS == block
    let a = (i / #{INNER}) % #{AXIS};
    let outer = i / (#{INNER} * #{AXIS});
    return (outer * #{SCALE_AXIS} + a / #{BLOCK}) * #{INNER} + i % #{INNER};
#endif
}

fn zero_at(p: u32) -> #{ZV_T} {
#ifdef ZERO_POINT
#ifdef Z_PACKED
    return #{Z_NIBBLE}(in_zero[p / 8u], p);
#else
    return in_zero[p];
#endif
#else
    return #{ZV_T}(0);
#endif
}

#ifdef QUANTIZE
// element i quantized, a whole number in [LO, HI]
fn quantized(i: u32) -> f32 {
    let p = param_index(i);
    let q = round_quotient(f32(x_at(i)), f32(in_scale[p])) + f32(zero_at(p));
    return clamp(q, #{LO}, #{HI});
}
#endif

#ifdef Y_PACKED
fn element(w: u32) {
    var word = 0u;
    for (var k = 0u; k < 8u; k++) {
        let i = w * 8u + k;
        if (i < #{N}) {
            word |= nibble_bits(u32(i32(quantized(i))), i);
        }
    }
    out_y[w] = word;
}
#else
fn element(i: u32) {
#ifdef QUANTIZE
    out_y[i] = #{Y_T}(quantized(i));
#else
    let p = param_index(i);
    out_y[i] = #{Y_T}(f32(i32(x_at(i)) - i32(zero_at(p))) * f32(in_scale[p]));
#endif
}
#endif
