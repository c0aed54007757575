// com.microsoft QLinearSoftmax as onnxruntime's CPU kernel computes it, one invocation per row of D elements
// (element k of row r at (r / INNER) * D * INNER + r % INNER + k * INNER):
//   e[k] = table[x[k] - max(x) + 255]               (the plan's 256 f32 exps, built in double as onnxruntime does)
//   sum  = e[0] + e[1] + ... + e[D - 1]              (f32, in this order)
//   y[k] = clamp(round_half_even((e[k] * floor(1 / y_scale)) / sum) + y_zp, LO, HI)
//          (onnxruntime 1.32 saturates int8 too). Every division correctly rounded (div_rn).
// Bindings: 0 x, 1 table, 2 y_scale, 3 y_zp, 4 y (bytes one per u32 (uint8) or i32 (int8), as stored).
// Defs: T (storage type of the bytes), S_T (scale type), LO, HI (i32 literals), WORKGROUP_SIZE.
// Dims: ROWS, D, INNER.
#ifdef F16
enable f16;
#endif
#import onyxia::entry
#import onyxia::quant::{div_rn}

@group(0) @binding(0) var<storage, read> x: array<#{T}>;
@group(0) @binding(1) var<storage, read> table: array<f32>;
@group(0) @binding(2) var<storage, read> y_scale: array<#{S_T}>;
@group(0) @binding(3) var<storage, read> y_zp: array<#{T}>;
@group(0) @binding(4) var<storage, read_write> y: array<#{T}>;

fn element_count() -> u32 { return #{ROWS}; }

fn element(r: u32) {
    let base = (r / #{INNER}) * #{D} * #{INNER} + r % #{INNER};
    var top = -256i;
    for (var k = 0u; k < #{D}; k++) {
        top = max(top, i32(x[base + k * #{INNER}]));
    }
    var sum = 0.0;
    for (var k = 0u; k < #{D}; k++) {
        sum += table[u32(i32(x[base + k * #{INNER}]) - top + 255)];
    }
    let scale = floor(div_rn(1.0, f32(y_scale[0])));
    let zp = i32(y_zp[0]);
    for (var k = 0u; k < #{D}; k++) {
        let at = base + k * #{INNER};
        let e = table[u32(i32(x[at]) - top + 255)];
        y[at] = #{T}(clamp(i32(round(div_rn(e * scale, sum))) + zp, #{LO}, #{HI}));
    }
}
