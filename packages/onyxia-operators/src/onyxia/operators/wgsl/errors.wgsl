#define_import_path onyxia::errors
// Run-time checks that cost the hot path nothing but a compare: a kernel that finds an input it
// cannot compute (an index out of range, an int64 result outside i32, a uint64 one outside u32)
// reports it in its node's slot of the plan's error word, and carries on with a value that keeps
// every access in bounds. The runtime copies the word into the staging buffer it reads the outputs
// from (no extra readback) and raises an InputError naming the node (core/plan.py: ErrorSlot,
// ErrorCode; runtime/run_errors.py).
//
// The importing shader binds the word as its last write binding and declares
//   ERRORS_BINDING  def: that binding's index
//   ERROR_SLOT      immediate (PlanCtx.error_slot(...).immediates): this node's slot
// A slot is two words: the code (atomicMax: the larger code wins) and the offending value (some
// invocation's; any one is offending).

@group(0) @binding(#{ERRORS_BINDING}) var<storage, read_write> onyxia_errors: array<atomic<u32>>;

const ERROR_INDEX_OUT_OF_RANGE: u32 = 1u;
const ERROR_INT64_OUT_OF_RANGE: u32 = 2u;
const ERROR_UINT64_OUT_OF_RANGE: u32 = 3u;
const ONYXIA_I32_MIN: i32 = -2147483647 - 1;

fn report_error(code: u32, value: i32) {
    let word = #{ERROR_SLOT} * 2u;
    atomicMax(&onyxia_errors[word], code);
    atomicStore(&onyxia_errors[word + 1u], bitcast<u32>(value));
}

// An index into a dim of size n: negative indices count from the end once (ONNX, and onnxruntime,
// which rejects anything outside [-n, n)); an index out of range is reported and clamped.
fn checked_index(k: i32, n: i32) -> u32 {
    var v = k;
    if (v < 0) {
        v += n;
    }
    if (v < 0 || v >= n) {
        report_error(ERROR_INDEX_OUT_OF_RANGE, k);
        return u32(clamp(v, 0, n - 1));
    }
    return u32(v);
}

// int64 arithmetic carried as i32: the exact result when it fits, else a report (and the wrapped value).
fn add_i64(a: i32, b: i32) -> i32 {
    let r = a + b;
    if (((a ^ r) & (b ^ r)) < 0) {  // both operands' signs differ from the result's
        report_error(ERROR_INT64_OUT_OF_RANGE, 0);
    }
    return r;
}

fn sub_i64(a: i32, b: i32) -> i32 {
    let r = a - b;
    if (((a ^ b) & (a ^ r)) < 0) {  // operands of different signs, and the result's sign is b's
        report_error(ERROR_INT64_OUT_OF_RANGE, 0);
    }
    return r;
}

fn mul_i64(a: i32, b: i32) -> i32 {
    let r = a * b;
    // The product fits iff dividing it back gives the other factor (-1 * ONYXIA_I32_MIN is the one case
    // where that division itself overflows).
    if ((a == -1 && b == ONYXIA_I32_MIN) || (b == -1 && a == ONYXIA_I32_MIN) || (a != 0 && r / a != b)) {
        report_error(ERROR_INT64_OUT_OF_RANGE, 0);
    }
    return r;
}

fn neg_i64(a: i32) -> i32 {
    if (a == ONYXIA_I32_MIN) {
        report_error(ERROR_INT64_OUT_OF_RANGE, 0);
    }
    return -a;
}

fn abs_i64(a: i32) -> i32 {
    if (a == ONYXIA_I32_MIN) {
        report_error(ERROR_INT64_OUT_OF_RANGE, 0);
    }
    return abs(a);
}

// Float -> int64: values outside [-2^31, 2^31) (and NaN, which onnxruntime casts to INT64_MIN) do not fit.
fn f32_to_i64(x: f32) -> i32 {
    if (!(x >= -2147483648.0 && x < 2147483648.0)) {
        report_error(ERROR_INT64_OUT_OF_RANGE, 0);
    }
    return i32(x);
}

fn u32_to_i64(x: u32) -> i32 {
    if (x > 2147483647u) {
        report_error(ERROR_INT64_OUT_OF_RANGE, 0);
    }
    return bitcast<i32>(x);
}

// uint64 arithmetic carried as u32: the exact result when it lies in [0, 2^32), else a report (and the
// wrapped value). onnxruntime computes in 64 bits, so a result past 2^32 - 1 (or below 0, which it
// would wrap to near 2^64) is one Onyxia cannot hold.
fn add_u64(a: u32, b: u32) -> u32 {
    let r = a + b;
    if (r < a) {
        report_error(ERROR_UINT64_OUT_OF_RANGE, 0);
    }
    return r;
}

fn sub_u64(a: u32, b: u32) -> u32 {
    if (b > a) {
        report_error(ERROR_UINT64_OUT_OF_RANGE, 0);
    }
    return a - b;
}

fn mul_u64(a: u32, b: u32) -> u32 {
    let r = a * b;
    if (a != 0u && r / a != b) {
        report_error(ERROR_UINT64_OUT_OF_RANGE, 0);
    }
    return r;
}

// Signed -> uint64: a negative value becomes 2^64 - |x| in onnxruntime, beyond u32.
fn i32_to_u64(x: i32) -> u32 {
    if (x < 0) {
        report_error(ERROR_UINT64_OUT_OF_RANGE, 0);
    }
    return bitcast<u32>(x);
}

// Float -> uint64: truncated values outside [0, 2^32) (and NaN) do not fit.
fn f32_to_u64(x: f32) -> u32 {
    if (!(x > -1.0 && x < 4294967296.0)) {
        report_error(ERROR_UINT64_OUT_OF_RANGE, 0);
        return 0u;
    }
    return u32(max(x, 0.0));
}
