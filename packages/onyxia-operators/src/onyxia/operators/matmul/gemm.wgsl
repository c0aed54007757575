// Gemm: y = alpha * op(a) @ op(b) + beta * c, op = transpose when TRANS_A / TRANS_B; one thread per output.
// Classic vision and encoder models use it for their dense layers; LLM exports use MatMul.
// Bindings: 0 in_a, 1 in_b, [2 in_c when HAS_C] (read), then out_y (write).
// Defs: T (f32 | f16), TRANS_A, TRANS_B, HAS_C (flags), ALPHA, BETA (f32 literals), F16, WORKGROUP_SIZE.
// Dims: M, N, K; with HAS_C also C_ROW_STRIDE and C_COL_STRIDE (0 along a broadcast axis).
#ifdef F16
enable f16;
#endif
#import onyxia::entry

@group(0) @binding(0) var<storage, read> in_a: array<#{T}>;
@group(0) @binding(1) var<storage, read> in_b: array<#{T}>;
#ifdef HAS_C
@group(0) @binding(2) var<storage, read> in_c: array<#{T}>;
@group(0) @binding(3) var<storage, read_write> out_y: array<#{T}>;
#else
@group(0) @binding(2) var<storage, read_write> out_y: array<#{T}>;
#endif

fn element_count() -> u32 { return #{M} * #{N}; }

fn element(i: u32) {
    let row = i / #{N};
    let col = i % #{N};
    var acc = 0.0;
    for (var k = 0u; k < #{K}; k++) {
#ifdef TRANS_A
        let a = in_a[k * #{M} + row];
#else
        let a = in_a[row * #{K} + k];
#endif
#ifdef TRANS_B
        let b = in_b[col * #{K} + k];
#else
        let b = in_b[k * #{N} + col];
#endif
        acc += f32(a) * f32(b);
    }
    var y = #{ALPHA} * acc;
#ifdef HAS_C
    y += #{BETA} * f32(in_c[row * #{C_ROW_STRIDE} + col * #{C_COL_STRIDE}]);
#endif
    out_y[i] = #{T}(y);
}
