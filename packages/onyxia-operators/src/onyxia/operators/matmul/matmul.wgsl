// Batched matrix product y[z] = a[z] @ b[z]: each invocation accumulates a ROWS x 4 block of y in
// registers, reading a and b straight from storage. On lavapipe (the CPU rasteriser this project
// targets first) the CPU caches already provide the reuse that a shared-memory tile would, and
// the tile's copies and barriers measured 2-3x slower than this direct form.
// Bindings: 0 in_a (read), 1 in_b (read; may be a range of b), 2 out_y (write).
// Defs: A_T, B_T, Y_T   WGSL storage types
//       ACC_T           accumulator type: f32 for f32/f16 (f16 sums lose precision fast), else the int type
//       F16             flag: some storage type is f16
//       ACCUMULATE      flag: add to y instead of storing (the second and later K-ranges of a b too big
//                       for one binding)
//       ROWS            rows of the output block per invocation (columns are always 4)
//       WG_X, WG_Y      workgroup shape: a workgroup covers (WG_Y * ROWS) rows x (WG_X * 4) columns
//       BATCH_RANK      rank of the (broadcast) batch dims (>= 1; a 1 with dim 1 when there are none)
// Dims: M, N, K         this dispatch's product (after folding a batch-free right operand's batch into M)
//       A_ROW, Y_ROW    row strides of a and y (K and N, unless b is split into ranges)
//       A_COL0, Y_COL0  first column of a and y this dispatch covers (0 unless b is split)
//       B_K_STRIDE, B_N_STRIDE   element strides of b along k and n: (N, 1), or (1, K) when b is
//                       stored transposed as [N, K] (MatMulTransB)
//       BATCH_DIMS, A_BATCH_STRIDES, B_BATCH_STRIDES (BATCH_RANK entries each; stride 0 = broadcast;
//       the strides already include the M*K and K*N matrix sizes)
// Dispatch: (ceil(N / (4 * WG_X)), ceil(M / (ROWS * WG_Y)), batch count). Reads past the last row or
// column are clamped to it (their sums are computed and dropped), so no size needs to be a multiple
// of the block and the inner loop has no branches; stores are bounds-checked.
#ifdef F16
enable f16;
#endif
#import onyxia::batch_offsets::{batch_offsets}

@group(0) @binding(0) var<storage, read> in_a: array<#{A_T}>;
@group(0) @binding(1) var<storage, read> in_b: array<#{B_T}>;
@group(0) @binding(2) var<storage, read_write> out_y: array<#{Y_T}>;

const ROWS: u32 = #{ROWS}u;

// `cols` are already scaled by B_N_STRIDE
fn b_row(base: u32, cols: vec4<u32>) -> vec4<#{ACC_T}> {
    return vec4<#{ACC_T}>(
        #{ACC_T}(in_b[base + cols.x]),
        #{ACC_T}(in_b[base + cols.y]),
        #{ACC_T}(in_b[base + cols.z]),
        #{ACC_T}(in_b[base + cols.w]),
    );
}

@compute @workgroup_size(#{WG_X}, #{WG_Y})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let offsets = batch_offsets(wid.z);
    let row0 = (wid.y * #{WG_Y}u + lid.y) * ROWS;
    let col0 = (wid.x * #{WG_X}u + lid.x) * 4u;
    let cols = min(vec4<u32>(col0) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(#{N} - 1u)) * #{B_N_STRIDE};
    var a_rows: array<u32, ROWS>;
    for (var i = 0u; i < ROWS; i++) {
        a_rows[i] = offsets.x + min(row0 + i, #{M} - 1u) * #{A_ROW} + #{A_COL0};
    }
    var acc: array<vec4<#{ACC_T}>, ROWS>;
    var k = 0u;
    for (; k + 4u <= #{K}; k += 4u) {  // four k at a time: fewer loop trips, each b row reused ROWS times
        let b_base = offsets.y + k * #{B_K_STRIDE};
        let b0 = b_row(b_base, cols);
        let b1 = b_row(b_base + #{B_K_STRIDE}, cols);
        let b2 = b_row(b_base + 2u * #{B_K_STRIDE}, cols);
        let b3 = b_row(b_base + 3u * #{B_K_STRIDE}, cols);
        for (var i = 0u; i < ROWS; i++) {
            let a = a_rows[i] + k;
            acc[i] += #{ACC_T}(in_a[a]) * b0 + #{ACC_T}(in_a[a + 1u]) * b1
                + #{ACC_T}(in_a[a + 2u]) * b2 + #{ACC_T}(in_a[a + 3u]) * b3;
        }
    }
    for (; k < #{K}; k++) {
        let b = b_row(offsets.y + k * #{B_K_STRIDE}, cols);
        for (var i = 0u; i < ROWS; i++) {
            acc[i] += #{ACC_T}(in_a[a_rows[i] + k]) * b;
        }
    }
    let y_base = wid.z * #{M} * #{Y_ROW} + #{Y_COL0};
    for (var i = 0u; i < ROWS; i++) {
        if (row0 + i < #{M}) {
            for (var j = 0u; j < 4u; j++) {
                if (col0 + j < #{N}) {
                    let y = y_base + (row0 + i) * #{Y_ROW} + col0 + j;
#ifdef ACCUMULATE
                    out_y[y] = #{Y_T}(#{ACC_T}(out_y[y]) + acc[i][j]);
#else
                    out_y[y] = #{Y_T}(acc[i][j]);
#endif
                }
            }
        }
    }
}
