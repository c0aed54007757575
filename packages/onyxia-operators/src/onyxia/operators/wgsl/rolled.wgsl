#define_import_path onyxia::rolled
// Loop bounds that keep a loop a loop. Mesa unrolls a loop whose trip count it can compute when the unrolled body
// stays small, so a product over a short K (a literal dim, `onyxia.core.shader_dims`) became straight-line code that
// lavapipe then compiled for seconds: a one-row MatMulGroup of K 48 took 7.8 s (0.2 s as a loop; at K 144, too many
// trips to unroll, 0.2 s), a 4-bit decode tile of K 64 1.0 s (0.4). A fresh machine paid that once per shape, in
// every small model and every test of one. Long loops were never unrolled, so they run as before. Reads no defs.

// `n`, in a form no compiler can evaluate: `length` is a binding's arrayLength, never 0 (WebGPU binds no empty
// runtime-sized array), so the result is always n.
fn rolled(n: u32, length: u32) -> u32 {
    return select(n, 0u, length == 0u);
}
