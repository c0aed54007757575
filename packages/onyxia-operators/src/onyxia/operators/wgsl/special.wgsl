#define_import_path onyxia::special
// Inverse-hyperbolic, hyperbolic and activation math in f32 (f16 callers convert), written to keep
// the accuracy of C's functions (which onnxruntime calls) where WGSL builtins or textbook formulas
// lose it: log(1 + t) cancels for small t, x * x overflows past 1.8e19, and e^x overflows (at 88.7)
// before sinh and cosh do (at 89.4). The unary, binary and fused shaders import it with onyxia::math.
#import onyxia::math

const SPECIAL_LN2: f32 = 0.69314718055994531;
// past 2^12, sqrt(x * x +- 1) is |x| to f32 precision, so asinh and acosh are log(2|x|)
const SPECIAL_LARGE: f32 = 4096.0;

fn special_nan() -> f32 {
    return bitcast<f32>(0x7fc00000u);
}

// log(1 + t) with the rounding of u = 1 + t corrected by t / (u - 1) (Goldberg); exact for tiny t,
// and u = inf (t = inf) stays inf instead of inf * inf / inf = NaN.
fn log1p_f32(t: f32) -> f32 {
    let u = 1.0 + t;
    let d = u - 1.0;
    if (d == 0.0) {
        return t;
    }
    if (isinf_f32(u)) {
        return u;
    }
    return log(u) * (t / d);
}

fn asinh_f32(x: f32) -> f32 {
    let a = abs(x);
    var r = log(a) + SPECIAL_LN2;
    if (!(a > SPECIAL_LARGE)) {  // NaN takes this branch and stays NaN
        r = log1p_f32(a + a * a / (1.0 + sqrt(a * a + 1.0)));
    }
    return select(r, -r, x < 0.0);
}

// NaN below 1, as C's acosh; near 1, log1p of t + sqrt(t * (t + 2)) with t = x - 1 keeps the digits
fn acosh_f32(x: f32) -> f32 {
    if (x < 1.0) {
        return special_nan();
    }
    if (x > SPECIAL_LARGE) {
        return log(x) + SPECIAL_LN2;
    }
    let t = x - 1.0;
    return log1p_f32(t + sqrt(t * (x + 1.0)));
}

// 0.5 * log((1 + a) / (1 - a)) as 0.5 * log1p(2a / (1 - a)): +-inf at +-1, NaN beyond
fn atanh_f32(x: f32) -> f32 {
    let a = abs(x);
    if (a > 1.0) {
        return special_nan();
    }
    let r = 0.5 * log1p_f32(2.0 * a / (1.0 - a));
    return select(r, -r, x < 0.0);
}

// ln 2 rounded up to a multiple of 2^-17, so h - SPECIAL_LN2_UP is exact for the h = a / 2 of half_exp_f32,
// and e^(SPECIAL_LN2_UP - ln 2) that puts the difference back (within 0.02 ULP)
const SPECIAL_LN2_UP: f32 = 0.6931533813476562;
const SPECIAL_LN2_UP_EXP: f32 = 1.0000062008069;

// e^a / 2 = e^(a/2) * e^(a/2 - ln 2), finite up to sinh's and cosh's own overflow (e^-a is below f32 precision
// of e^a once a > 9). Each factor, and the product of any two, stays below the result, so no order a compiler
// picks (reassociating the product, or merging the two exps into e^(a - ln 2)) overflows early; the former
// (e^(a/2) / 2) * e^(a/2) gave inf at a = 89 on NVIDIA's Vulkan driver (an H200), where e^(a/2) * e^(a/2) is
// 4.5e38. a / 2 and the subtraction are exact, so this stays within 4 ULP of C's cosh where exp is exact to 1.
fn half_exp_f32(a: f32) -> f32 {
    let h = 0.5 * a;
    return exp(h) * exp(h - SPECIAL_LN2_UP) * SPECIAL_LN2_UP_EXP;
}

// (e^a - e^-a) / 2 cancels for small a: its Taylor series there (next term below 2^-40 relative)
fn sinh_f32(x: f32) -> f32 {
    let a = abs(x);
    var r = half_exp_f32(a);
    if (a < 0.125) {
        let s = a * a;
        r = a * (1.0 + s / 6.0 * (1.0 + s / 20.0 * (1.0 + s / 42.0)));
    } else if (a < 9.0) {
        let e = exp(a);
        r = 0.5 * (e - 1.0 / e);
    }
    return select(r, -r, x < 0.0);
}

fn cosh_f32(x: f32) -> f32 {
    let a = abs(x);
    if (a < 9.0) {
        let e = exp(a);
        return 0.5 * (e + 1.0 / e);
    }
    return half_exp_f32(a);
}

// log(1 + e^x) as max(x, 0) + log1p(e^-|x|): no overflow for large x, no cancellation for small
fn softplus_f32(x: f32) -> f32 {
    return max(x, 0.0) + log1p_f32(exp(-abs(x)));
}

// x * tanh(softplus(x)); tanh of a softplus below 2^-8 is its series (WGSL's tanh cancels there)
fn mish_f32(x: f32) -> f32 {
    let s = softplus_f32(x);
    let t = select(tanh_f32(s), s * (1.0 - s * s / 3.0), s < 0.00390625);
    return select(x * t, x, isnan_f32(x));
}

// WGSL's asin and acos are coarse polynomials on lavapipe (4e-4 relative error); through atan, which
// is not: asin(x) = atan(x / sqrt(1 - x^2)), acos(x) = 2 atan(sqrt((1 - x) / (1 + x))), with
// (1 - x)(1 + x) exact near +-1 where 1 - x * x is not; NaN outside [-1, 1]
fn asin_f32(x: f32) -> f32 {
    if (abs(x) > 1.0) {
        return special_nan();
    }
    return atan(x / sqrt((1.0 - x) * (1.0 + x)));
}

fn acos_f32(x: f32) -> f32 {
    if (abs(x) > 1.0) {
        return special_nan();
    }
    return 2.0 * atan(sqrt((1.0 - x) / (1.0 + x)));
}

// onnxruntime: x >= 0 ? x : alpha * (e^x - 1)
fn elu_f32(x: f32, alpha: f32) -> f32 {
    return select(alpha * (exp(x) - 1.0), x, x >= 0.0);
}

// max(0, x) + min(0, alpha * (e^(x / alpha) - 1)), the spec's formula, with NaN kept (WGSL's max
// and min leave NaN to the GPU)
fn celu_f32(x: f32, alpha: f32) -> f32 {
    return select(min(0.0, alpha * (exp(x / alpha) - 1.0)), x, x > 0.0 || isnan_f32(x));
}

// gamma * (x > 0 ? x : alpha * e^x - alpha)
fn selu_f32(x: f32, alpha: f32, gamma: f32) -> f32 {
    return gamma * select(alpha * exp(x) - alpha, x, x > 0.0);
}

// onnxruntime compares and adds in float, then converts to the element type
fn shrink_f32(x: f32, lambd: f32, bias: f32) -> f32 {
    return select(select(0.0, x - bias, x > lambd), x + bias, x < -lambd);
}

#ifdef CHECKED
// int64 left shift carried as i32 (BitShift): the exact result when it fits, else a report through
// onyxia::errors (imported by the shader with CHECKED) and 0. A shift outside [0, 64) gives 0.
fn shl_i64(a: i32, b: i32) -> i32 {
    if (b < 0 || b >= 64 || a == 0) {
        return 0;
    }
    let r = select(0, a << u32(b), b < 32);
    if (b >= 32 || (r >> u32(b)) != a) {
        report_error(ERROR_INT64_OUT_OF_RANGE, 0);
    }
    return r;
}

// uint64 left shift carried as u32, as shl_i64: bits shifted past 32 are reported, not dropped.
fn shl_u64(a: u32, b: u32) -> u32 {
    if (b >= 64u || a == 0u) {
        return 0u;
    }
    let r = select(0u, a << b, b < 32u);
    if (b >= 32u || (r >> b) != a) {
        report_error(ERROR_UINT64_OUT_OF_RANGE, 0);
    }
    return r;
}
#endif
