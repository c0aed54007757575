#define_import_path onyxia::math
// Scalar math WGSL lacks, in f32 (f16 callers convert). Each function says how ONNX differs.

// Abramowitz-Stegun 7.1.26 is too coarse (1.5e-7 abs is fine, but relative error near 0 is not);
// this is the Numerical Recipes erfc Chebyshev fit: |rel err| < 1.2e-7 everywhere.
fn erf_f32(x: f32) -> f32 {
    let z = abs(x);
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
        t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
        t * (-0.82215223 + t * 0.17087277)))))))));
    return select(r - 1.0, 1.0 - r, x >= 0.0);
}

// WGSL's tanh may overflow to NaN for large |x| on some drivers; it is +-1 to f32 precision past 10.
// The clamp must not swallow a NaN input, which ONNX propagates.
fn tanh_f32(x: f32) -> f32 {
    return select(tanh(clamp(x, -10.0, 10.0)), x, isnan_f32(x));
}

fn sigmoid_f32(x: f32) -> f32 {
    return select(exp(x) / (1.0 + exp(x)), 1.0 / (1.0 + exp(-x)), x >= 0.0);
}

fn gelu_none(x: f32) -> f32 {
    return 0.5 * x * (1.0 + erf_f32(x * 0.70710678118654752));
}

fn gelu_tanh(x: f32) -> f32 {
    return 0.5 * x * (1.0 + tanh_f32(0.79788456080286536 * (x + 0.044715 * x * x * x)));
}

// WGSL pow is undefined for a negative base; ONNX (like C pow) defines it for integral exponents.
// onnxruntime special-cases the exponents 2 and 3 as products (Gelu's tanh form cubes its input),
// so do the same to round identically.
fn pow_f32(a: f32, b: f32) -> f32 {
    if (b == 2.0) {
        return a * a;
    }
    if (b == 3.0) {
        return a * a * a;
    }
    let magnitude = pow(abs(a), b);
    let odd = b == floor(b) && (abs(b) % 2.0) == 1.0;
    if (a >= 0.0) {
        return magnitude;
    }
    if (b != floor(b)) {
        return bitcast<f32>(0x7fc00000u);
    }
    return select(magnitude, -magnitude, odd);
}

// A negative exponent: 1 / a^-b truncates to 0 unless |a| is 1 (then 1, or -1 to an odd power). The parity is
// read with `&`, not `%`, which some drivers get wrong for a negative i32 (see rem_i32).
fn pow_i32(a: i32, b: i32) -> i32 {
    if (b < 0) {
        return select(0, select(-1, 1, (b & 1) == 0), a == -1) + select(0, 1, a == 1);
    }
    var result = 1;
    var base = a;
    var e = u32(b);
    while (e > 0u) {
        if ((e & 1u) == 1u) {
            result *= base;
        }
        base *= base;
        e >>= 1u;
    }
    return result;
}

// `x != x` may be folded away by the shader compiler; test the bit pattern instead.
fn isnan_f32(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

fn isinf_f32(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u;
}

// C remainder of i32 (the dividend's sign; ONNX Mod fmod=1), 0 for a zero divisor as WGSL's `%` and numpy's
// fmod give. Spelled with `/` because NVIDIA's Vulkan driver (580, on an H200) evaluates i32 `%` as if both
// operands were u32 (7 % -3 gave 7, -7 % 3 gave 0) while its i32 `/` truncates correctly; lavapipe, CI's
// adapter, gets both right, so only a GPU run shows it. A shader `%` whose i32 operands may be negative
// calls this instead. i32::MIN over -1 is i32::MIN in WGSL, and the wrapping product leaves 0, as C's
// remainder would be.
fn rem_i32(a: i32, b: i32) -> i32 {
    let d = select(b, 1, b == 0);
    return a - d * (a / d);
}

// ONNX Mod with fmod=0 takes the sign of the divisor (Python %); integer inputs only.
fn mod_floor_i32(a: i32, b: i32) -> i32 {
    let r = rem_i32(a, b);
    return select(r, r + b, r != 0 && ((r < 0) != (b < 0)));
}

// C fmod (ONNX Mod fmod=1). A finite `a` over an infinite `b` has quotient 0 and remainder `a`;
// `a - b * trunc(a / b)` would compute inf * 0 = NaN there, so a zero quotient returns `a` itself.
fn fmod_f32(a: f32, b: f32) -> f32 {
    let q = trunc(a / b);
    return select(a - b * q, a, q == 0.0);
}

// Python % (ONNX Mod fmod=0): the fmod remainder moved to the divisor's sign (-3 % inf is inf).
fn mod_floor_f32(a: f32, b: f32) -> f32 {
    let r = fmod_f32(a, b);
    return select(r, r + b, r != 0.0 && ((r < 0.0) != (b < 0.0)));
}
