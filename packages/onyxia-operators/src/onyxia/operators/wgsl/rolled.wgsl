#define_import_path onyxia::rolled
// Loop bounds that keep a loop a loop: a shader whose loop over a static dim has few enough trips for Mesa to unroll
// it (`rolled_loops.short_loop`, which says why and what it measured) bounds the loop by `rolled(n, length)`.
// Reads no defs.

// `n`, in a form no compiler can evaluate: `length` is a binding's arrayLength, never 0 (WebGPU binds no empty
// runtime-sized array), so the result is always n.
fn rolled(n: u32, length: u32) -> u32 {
    return select(n, 0u, length == 0u);
}
