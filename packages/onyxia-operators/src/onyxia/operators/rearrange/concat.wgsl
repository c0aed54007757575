// Concat, one dispatch per input: copy input k into its slab of every outer block of the output.
// Bindings: 0 in_x (read, input k), 1 out_y (write, the whole output).
// Defs: T               WGSL storage type (shared by input and output)
//       F16             flag: T is f16
//       WORKGROUP_SIZE
// Dims (literal when static, immediates when symbolic):
//       N         input k's element count (> 0)
//       IN_SLAB   input k's elements per outer block (dim_k * inner)
//       OUT_SLAB  output elements per outer block (sum of dims on the axis * inner)
//       OFFSET    where input k's slab starts inside an output block (sum of earlier slabs)
#ifdef F16
enable f16;
#endif
#import onyxia::entry

@group(0) @binding(0) var<storage, read> in_x: array<#{T}>;
@group(0) @binding(1) var<storage, read_write> out_y: array<#{T}>;

fn element_count() -> u32 { return #{N}; }

fn element(i: u32) {
    let outer = i / #{IN_SLAB};
    let within = i % #{IN_SLAB};
    out_y[outer * #{OUT_SLAB} + #{OFFSET} + within] = in_x[i];
}
