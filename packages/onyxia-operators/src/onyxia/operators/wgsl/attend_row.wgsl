#define_import_path onyxia::attend_row
// The tail of GroupQueryAttention's one-token decode kernels (gqa.wgsl and gqa_decode_append.wgsl): the
// softmax of the scores the workgroup wrote for keys [lo, hi) of one query row, then the probability-
// weighted sum of the values, DIM_LANES output dims at a time with KEY_GROUPS slices of the keys added
// through `partial`. Call in uniform control flow (it holds barriers).
// Reads defs T, HEAD_SIZE, WORKGROUP_SIZE, DIM_LANES, KEY_GROUPS. The importer imports onyxia::reduce,
// declares `scores` (read_write storage, f32), `partial` (workgroup, f32 [WORKGROUP_SIZE]) and `out_y`,
// and defines `fn row_value(base: u32, j: u32, new_row: u32, h: u32) -> f32`: element h of the value in
// extended-cache row j (`new_row`: the row a fused append keeps in workgroup memory, if any).

fn attend_row(lid: u32, lo: u32, hi: u32, base: u32, new_row: u32, score_base: u32, out_base: u32, local_max: f32) {
    let row_max = workgroup_max(lid, local_max);
    var local_sum = 0.0;
    for (var j = lo + lid; j < hi; j += #{WORKGROUP_SIZE}u) {
        let p = exp(scores[score_base + j] - row_max);
        scores[score_base + j] = p;
        local_sum += p;
    }
    let row_sum = workgroup_sum(lid, local_sum);
    storageBarrier();  // every p is written before any invocation reads another's
    let inv_sum = select(1.0 / row_sum, 0.0, row_sum == 0.0);
    let lane = lid % #{DIM_LANES}u;
    let slice = lid / #{DIM_LANES}u;
    for (var chunk = 0u; chunk < (#{HEAD_SIZE}u + #{DIM_LANES}u - 1u) / #{DIM_LANES}u; chunk++) {
        let h = chunk * #{DIM_LANES}u + lane;
        var acc = 0.0;
        if (h < #{HEAD_SIZE}u && slice < #{KEY_GROUPS}u) {
            for (var j = lo + slice; j < hi; j += #{KEY_GROUPS}u) {
                acc += scores[score_base + j] * row_value(base, j, new_row, h);
            }
        }
        partial[lid] = acc;
        workgroupBarrier();
        if (slice == 0u && h < #{HEAD_SIZE}u) {
            var sum = 0.0;
            for (var g = 0u; g < #{KEY_GROUPS}u; g++) {
                sum += partial[g * #{DIM_LANES}u + lane];
            }
            out_y[out_base + h] = #{T}(sum * inv_sum);
        }
        workgroupBarrier();
    }
}
