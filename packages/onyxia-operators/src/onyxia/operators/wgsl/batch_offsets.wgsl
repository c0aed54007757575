#define_import_path onyxia::batch_offsets
// A batched matmul's broadcast batch dims: batch index z -> (offset into A, offset into B), one stride
// per batch dim and operand (0 where that operand broadcasts). Shared by MatMul, MatMulInteger and
// QLinearMatMul. Reads defs BATCH_RANK (>= 1), BATCH_DIMS, A_BATCH_STRIDES, B_BATCH_STRIDES (comma lists).

fn batch_offsets(z: u32) -> vec2<u32> {
    var dims = array<u32, #{BATCH_RANK}>(#{BATCH_DIMS});
    var a_strides = array<u32, #{BATCH_RANK}>(#{A_BATCH_STRIDES});
    var b_strides = array<u32, #{BATCH_RANK}>(#{B_BATCH_STRIDES});
    var rem = z;
    var offsets = vec2<u32>(0u, 0u);
    for (var d = i32(#{BATCH_RANK}) - 1; d >= 0; d--) {
        let coord = rem % dims[d];
        rem = rem / dims[d];
        offsets += coord * vec2<u32>(a_strides[d], b_strides[d]);
    }
    return offsets;
}
