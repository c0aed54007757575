// Elementwise op over two or three inputs with numpy (multidirectional) broadcasting.
// Bindings: 0 in_a, 1 in_b, [2 in_c when TERNARY] (read), then out_y (write), [then the error word
//           when CHECKED: EXPR calls onyxia::errors' checked int64 functions, at ERRORS_BINDING].
// Defs: A_T, B_T, C_T, Y_T  WGSL storage types
//       EXPR             the op, in terms of `a`, `b` (and `c`), from the family row
//       TERNARY          flag: a third input `c`
//       RANK             output rank (>= 1)
//       BROADCAST        flag: index inputs through strides (absent: all shapes equal, i == ia == ib)
//       F16              flag: some storage type is f16
//       WORKGROUP_SIZE
// Dims (literal when static, immediates when symbolic): N output elements, OUT_DIMS, A_STRIDES,
//       B_STRIDES, C_STRIDES (RANK entries; stride 0 marks an axis the input is broadcast over).
#ifdef F16
enable f16;
#endif
#import onyxia::entry
#import onyxia::math
#import onyxia::special
#ifdef CHECKED
#import onyxia::errors
#endif

@group(0) @binding(0) var<storage, read> in_a: array<#{A_T}>;
@group(0) @binding(1) var<storage, read> in_b: array<#{B_T}>;
#ifdef TERNARY
@group(0) @binding(2) var<storage, read> in_c: array<#{C_T}>;
@group(0) @binding(3) var<storage, read_write> out_y: array<#{Y_T}>;
#else
@group(0) @binding(2) var<storage, read_write> out_y: array<#{Y_T}>;
#endif

fn element_count() -> u32 { return #{N}; }

fn element(i: u32) {
#ifdef BROADCAST
    var out_dims = array<u32, #{RANK}>(#{OUT_DIMS});
    var a_strides = array<u32, #{RANK}>(#{A_STRIDES});
    var b_strides = array<u32, #{RANK}>(#{B_STRIDES});
#ifdef TERNARY
    var c_strides = array<u32, #{RANK}>(#{C_STRIDES});
    var ic = 0u;
#endif
    var rem = i;
    var ia = 0u;
    var ib = 0u;
    for (var d = i32(#{RANK}) - 1; d >= 0; d--) {
        // the outermost axis takes what is left (i < N): no division by it, a symbolic batch's included
        let coord = select(rem % out_dims[d], rem, d == 0);
        rem = select(rem / out_dims[d], 0u, d == 0);
        ia += coord * a_strides[d];
        ib += coord * b_strides[d];
#ifdef TERNARY
        ic += coord * c_strides[d];
#endif
    }
#else
    let ia = i;
    let ib = i;
    let ic = i;
#endif
    let a = in_a[ia];
    let b = in_b[ib];
#ifdef TERNARY
    let c = in_c[ic];
#endif
    out_y[i] = #{EXPR};
}
