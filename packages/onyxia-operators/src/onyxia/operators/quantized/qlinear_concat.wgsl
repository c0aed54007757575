// com.microsoft QLinearConcat, one dispatch per input: each writes its slab of y, requantizing its bytes to y's
// scale and zero point as onnxruntime's lookup table does (QlinearBuildLookupTable with the identity):
//   y = clamp(round_half_even((f32(x - x_zp) * x_scale) / y_scale) + y_zp)   (the quotient correctly rounded)
// Bindings: 0 x, 1 x_scale, 2 x_zp, 3 y_scale, 4 y_zp, 5 y (bytes one per u32 (uint8) or i32 (int8), as stored).
// Defs: T (storage type of the bytes), S_T (scale type), LO, HI (f32 literals), WORKGROUP_SIZE.
// Dims: TOTAL (x's elements), SLAB (x's dim at the axis times the elements after it), ROW (y's dim at the axis
//   times the elements after it), OFFSET (where x's slab starts within a row of y).
#ifdef F16
enable f16;
#endif
#import onyxia::entry
#import onyxia::dynamic_quant::{round_quotient}

@group(0) @binding(0) var<storage, read> x: array<#{T}>;
@group(0) @binding(1) var<storage, read> x_scale: array<#{S_T}>;
@group(0) @binding(2) var<storage, read> x_zp: array<#{T}>;
@group(0) @binding(3) var<storage, read> y_scale: array<#{S_T}>;
@group(0) @binding(4) var<storage, read> y_zp: array<#{T}>;
@group(0) @binding(5) var<storage, read_write> y: array<#{T}>;

fn element_count() -> u32 { return #{TOTAL}; }

fn element(i: u32) {
    let v = f32(i32(x[i]) - i32(x_zp[0])) * f32(x_scale[0]);
    let q = clamp(round_quotient(v, f32(y_scale[0])) + f32(i32(y_zp[0])), #{LO}, #{HI});
    y[(i / #{SLAB}) * #{ROW} + #{OFFSET} + i % #{SLAB}] = #{T}(i32(q));
}
