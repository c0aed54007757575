// Cast from or to a packed 4-bit type (int4/uint4: onyxia::nibbles' u32 words of 8 nibbles).
// A packed output is written one word per invocation (8 elements), since WGSL cannot store a byte.
// Bindings: 0 in_x (read), 1 out_y (write), [2 the error word when CHECKED: EXPR calls onyxia::errors'
//           checked conversion (int4 -> uint64, whose negative values onnxruntime wraps near 2^64)].
// Defs: X_T, Y_T (storage types; u32 for packed), V_T (one value of x: i32 for int4, u32 for uint4, else X_T),
//       X_PACKED (flag) with X_NIBBLE (nibble_i4 or nibble_u4), Y_PACKED (flag) with BITS (an expression in
//       `x` whose low 4 bits are y), else EXPR (y from `x`), F16 (flag), WORKGROUP_SIZE.
// Dims: N element count, UNITS invocations (N, or ceil(N / 8) words with Y_PACKED).
#ifdef F16
enable f16;
#endif
#import onyxia::entry
#import onyxia::nibbles
#ifdef CHECKED
#import onyxia::errors
#endif

@group(0) @binding(0) var<storage, read> in_x: array<#{X_T}>;
@group(0) @binding(1) var<storage, read_write> out_y: array<#{Y_T}>;

fn element_count() -> u32 { return #{UNITS}; }

fn x_at(i: u32) -> #{V_T} {
#ifdef X_PACKED
    return #{X_NIBBLE}(in_x[i / 8u], i);
#else
    return in_x[i];
#endif
}

// onnxruntime rounds a float half away from zero (std::round) before keeping 4 bits
fn round_half_away(v: f32) -> f32 {
    let t = trunc(v);
    return select(t, t + sign(v), abs(v - t) >= 0.5);
}

#ifdef Y_PACKED
fn element(w: u32) {
    var word = 0u;
    for (var k = 0u; k < 8u; k++) {
        let i = w * 8u + k;
        if (i < #{N}) {
            let x = x_at(i);
            word |= nibble_bits(#{BITS}, i);
        }
    }
    out_y[w] = word;
}
#else
fn element(i: u32) {
    let x = x_at(i);
    out_y[i] = #{EXPR};
}
#endif
