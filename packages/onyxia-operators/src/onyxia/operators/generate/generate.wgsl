// Generator: y[i] = EXPR(i), reading no input (ConstantOfShape, Range), or a triangular mask of x (Trilu).
// Bindings: [0 in_x (read) when TRILU, [1 in_k (read) when K_INPUT: Trilu's k (int64 as i32) known only
//           at run time]], then out_y (write).
// Defs: Y_T (storage type), EXPR (in terms of the flat index `i`; Range's start/delta are literals),
//       TRILU (flag: y = x inside the triangle, 0 outside), UPPER (flag), F16 (flag), WORKGROUP_SIZE.
// Dims: N output elements; with SYMBOLIC_START (Range) START, with DELTA a literal def; with TRILU also ROWS, COLS (last two dims) and K (diagonal offset, i32 bits).
#ifdef F16
enable f16;
#endif
#import onyxia::entry

#ifdef TRILU
@group(0) @binding(0) var<storage, read> in_x: array<#{Y_T}>;
#ifdef K_INPUT
@group(0) @binding(1) var<storage, read> in_k: array<i32>;
@group(0) @binding(2) var<storage, read_write> out_y: array<#{Y_T}>;
#else
@group(0) @binding(1) var<storage, read_write> out_y: array<#{Y_T}>;
#endif
#else
@group(0) @binding(0) var<storage, read_write> out_y: array<#{Y_T}>;
#endif

fn element_count() -> u32 { return #{N}; }

fn element(i: u32) {
#ifdef TRILU
    let col = i32(i % #{COLS});
    let row = i32((i / #{COLS}) % #{ROWS});
#ifdef K_INPUT
    let k = in_k[0];
#else
    let k = bitcast<i32>(#{K});
#endif
#ifdef UPPER
    let keep = col - row >= k;
#else
    let keep = col - row <= k;
#endif
    out_y[i] = select(#{Y_T}(0), in_x[i], keep);
#else
#ifdef SYMBOLIC_START
    // Range from a start known only at run time (optimum: positions past_sequence_length + i)
    out_y[i] = #{Y_T}(bitcast<i32>(#{START})) + #{Y_T}(i) * #{DELTA};
#else
    out_y[i] = #{EXPR};
#endif
#endif
}
