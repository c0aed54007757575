// Unary elementwise op: y[i] = EXPR(x[i]).
// Bindings: 0 in_x (read), 1 out_y (write), [2 the error word when CHECKED].
// Defs: X_T, Y_T (WGSL storage types), EXPR (the op in terms of `x`), F16 (flag), WORKGROUP_SIZE,
//       CHECKED (flag: EXPR calls onyxia::errors' checked int64 functions; ERRORS_BINDING 2).
// Dims: N element count.
#ifdef F16
enable f16;
#endif
#import onyxia::entry
#import onyxia::math
#import onyxia::special
#ifdef CHECKED
#import onyxia::errors
#endif

@group(0) @binding(0) var<storage, read> in_x: array<#{X_T}>;
@group(0) @binding(1) var<storage, read_write> out_y: array<#{Y_T}>;

fn element_count() -> u32 { return #{N}; }

fn element(i: u32) {
    let x = in_x[i];
    out_y[i] = #{EXPR};
}
