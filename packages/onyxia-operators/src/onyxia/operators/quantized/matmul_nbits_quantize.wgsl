// MatMulNBits at accuracy_level 4: quantize each row of A to int8 per block, as onnxruntime's CPU kernel does
// (MLAS QuantizeARow_CompInt8, the CompInt8 path; the math is onyxia::quant), before matmul_nbits.wgsl with INT8
// multiplies. The prefill kernel reads its output; a decode workgroup quantizes its own row instead (Q_SHARED).
// The int8 values are stored packed, four bytes to a u32 (element 0 lowest): the GEMM loads each lane's 8 values
// as two words, not eight floats (lavapipe loads lane by lane, each load bounds-checked).
//
// One thread per (row, block), reading and writing vec4s (4 elements; K % 4 == 0 with QA_VEC4, else scalar reads
// of a). Bindings: 0 a [M, K] (A_T), 1 qa [M, NB * BLOCK_SIZE] (int8 bytes, 4 to a u32, the tail zeroed), 2 sa [NB, MP] (f32;
//   block-major, so the GEMM reads 4 rows' scales as one vec4).
// Defs: A_T             f32 | f16; F16 flag when f16 (MLAS widens f16 activations to f32 first: exact)
//       QA_VEC4         flag: K % 4 == 0, so a's 4-element groups are aligned vec4s (onyxia::quant_rows)
//       BLOCK_SIZE      elements per block (a power of two, 16 .. 256)
//       WORKGROUP_SIZE
// Dims: K, NB (blocks per row), ROW_BLOCKS (M * NB), MP (M rounded up to a multiple of 4)
#ifdef F16
enable f16;
#endif
#import onyxia::entry
#import onyxia::quant_rows

#ifdef QA_VEC4
@group(0) @binding(0) var<storage, read> a: array<vec4<#{A_T}>>;
#else
@group(0) @binding(0) var<storage, read> a: array<#{A_T}>;
#endif
@group(0) @binding(1) var<storage, read_write> qa: array<u32>;
@group(0) @binding(2) var<storage, read_write> sa: array<f32>;

fn element_count() -> u32 { return #{ROW_BLOCKS}; }

fn element(i: u32) {
    let m = i / #{NB};
    let blk = i % #{NB};
    let k0 = blk * #{BLOCK_SIZE}u;
    let src = m * #{K} + k0;
    let end = src + min(#{BLOCK_SIZE}u, #{K} - k0);
    let block = int8_block_at(src, end, #{BLOCK_SIZE}u);
    sa[blk * #{MP} + m] = block.y;
    let dst = i * #{BLOCK_SIZE}u / 4u;
    for (var j = 0u; j < #{BLOCK_SIZE}u; j += 4u) {
        qa[dst + j / 4u] = int8_packed(int8_round(a_four(src + j, end), block.x));
    }
}
