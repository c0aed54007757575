// com.microsoft QLinearAdd, QLinearMul (numpy broadcasting), QLinearSigmoid and QLinearLeakyRelu, one invocation per
// output element,
// each as onnxruntime's CPU kernel computes it (MLAS), with every division correctly rounded (onyxia::quant):
//   add:     r_a = a_scale / c_scale, r_b = b_scale / c_scale,
//            fixed = c_zp - (r_a * a_zp + r_b * b_zp),  v = fma(a, r_a, fma(b, r_b, fixed))
//            (MlasQLinearAddKernelAvx2Helper), y = clamp(round_half_even(v))
//   mul:     y = requantize((a - a_zp) * (b - b_zp), a_scale * b_scale / c_scale, c_zp)   (onyxia::requant)
//   sigmoid: y = clamp(round_half_even(sigmoid(f32(x - x_zp) * x_scale) / y_scale) + y_zp)
//            (onnxruntime's 256-entry lookup table of MlasComputeLogistic, computed here per element)
//   leaky_relu: as sigmoid with v >= 0 ? v : v * ALPHA for the logistic function (its table's transform)
// Bindings: 0 a, 1 a_scale, 2 a_zp, [3 b, 4 b_scale, 5 b_zp], then c_scale, c_zp, y (an omitted zero point is bound
//   as a one-element zero buffer by the plan). Bytes are one per u32 (uint8) or i32 (int8), as stored.
// Defs: T (storage type of every byte tensor), S_T (scale type), MODE (add | mul | sigmoid | leaky_relu), ALPHA (f32
//   literal, leaky_relu), LO, HI (i32 literals),
//   BINARY, RANK, WORKGROUP_SIZE.
// Dims: TOTAL; OUT_DIMS, A_STRIDES, B_STRIDES (RANK entries; 0 along a broadcast axis).
#ifdef F16
enable f16;
#endif
#import onyxia::entry
#import onyxia::quant::{div_rn}
#import onyxia::requant::{output_multiplier, requantize}
#import onyxia::dynamic_quant::{round_quotient}

@group(0) @binding(0) var<storage, read> a: array<#{T}>;
@group(0) @binding(1) var<storage, read> a_scale: array<#{S_T}>;
@group(0) @binding(2) var<storage, read> a_zp: array<#{T}>;
#ifdef BINARY
@group(0) @binding(3) var<storage, read> b: array<#{T}>;
@group(0) @binding(4) var<storage, read> b_scale: array<#{S_T}>;
@group(0) @binding(5) var<storage, read> b_zp: array<#{T}>;
@group(0) @binding(6) var<storage, read> c_scale: array<#{S_T}>;
@group(0) @binding(7) var<storage, read> c_zp: array<#{T}>;
@group(0) @binding(8) var<storage, read_write> y: array<#{T}>;
#else
@group(0) @binding(3) var<storage, read> c_scale: array<#{S_T}>;
@group(0) @binding(4) var<storage, read> c_zp: array<#{T}>;
@group(0) @binding(5) var<storage, read_write> y: array<#{T}>;
#endif

fn element_count() -> u32 { return #{TOTAL}; }

// (offset in a, offset in b) of output element i
fn offsets(i: u32) -> vec2<u32> {
    var dims = array<u32, #{RANK}>(#{OUT_DIMS});
    var a_strides = array<u32, #{RANK}>(#{A_STRIDES});
    var b_strides = array<u32, #{RANK}>(#{B_STRIDES});
    var rem = i;
    var out = vec2<u32>(0u, 0u);
    for (var d = i32(#{RANK}) - 1; d >= 0; d--) {
        let coord = rem % dims[d];
        rem = rem / dims[d];
        out += coord * vec2<u32>(a_strides[d], b_strides[d]);
    }
    return out;
}

// x / y correctly rounded for scales of any sign
fn ratio(x: f32, y: f32) -> f32 {
    let q = div_rn(abs(x), abs(y));
    return select(q, -q, (x < 0.0) != (y < 0.0));
}

fn element(i: u32) {
    let at = offsets(i);
    let zc = i32(c_zp[0]);
    let sc = f32(c_scale[0]);
    let za = i32(a_zp[0]);
    let xa = i32(a[at.x]);
#if MODE == sigmoid
    let v = f32(xa - za) * f32(a_scale[0]);
    let s = 1.0 / (1.0 + exp(-v));
    y[i] = #{T}(i32(clamp(round_quotient(s, sc) + f32(zc), f32(#{LO}), f32(#{HI}))));
#endif
#if MODE == leaky_relu
    let v = f32(xa - za) * f32(a_scale[0]);
    let s = select(v * #{ALPHA}, v, v >= 0.0);
    y[i] = #{T}(i32(clamp(round_quotient(s, sc) + f32(zc), f32(#{LO}), f32(#{HI}))));
#endif
#if MODE == mul
    let product = (xa - za) * (i32(b[at.y]) - i32(b_zp[0]));
    let multiplier = output_multiplier(f32(a_scale[0]) * f32(b_scale[0]), sc);
    y[i] = #{T}(requantize(product, multiplier, zc, #{LO}, #{HI}));
#endif
#if MODE == add
    let ra = ratio(f32(a_scale[0]), sc);
    let rb = ratio(f32(b_scale[0]), sc);
    let fixed = f32(zc) - (ra * f32(za) + rb * f32(i32(b_zp[0])));
    let v = fma(f32(xa), ra, fma(f32(i32(b[at.y])), rb, fixed));
    y[i] = #{T}(i32(clamp(round(v), f32(#{LO}), f32(#{HI}))));
#endif
}
