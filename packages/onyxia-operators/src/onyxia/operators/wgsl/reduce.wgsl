#define_import_path onyxia::reduce
// Workgroup-wide f32 reductions for shaders that give one workgroup a whole row (Softmax,
// normalisations). Every invocation must call them (they contain barriers), and each returns the
// result to all invocations. Reads def WORKGROUP_SIZE, which must be a power of two.

var<workgroup> reduce_scratch: array<f32, #{WORKGROUP_SIZE}>;

fn workgroup_sum(lid: u32, value: f32) -> f32 {
    reduce_scratch[lid] = value;
    workgroupBarrier();
    for (var step = #{WORKGROUP_SIZE}u / 2u; step > 0u; step >>= 1u) {
        if (lid < step) {
            reduce_scratch[lid] += reduce_scratch[lid + step];
        }
        workgroupBarrier();
    }
    let result = reduce_scratch[0];
    workgroupBarrier();  // the next call may overwrite the scratch before every invocation has read it
    return result;
}

fn workgroup_max(lid: u32, value: f32) -> f32 {
    reduce_scratch[lid] = value;
    workgroupBarrier();
    for (var step = #{WORKGROUP_SIZE}u / 2u; step > 0u; step >>= 1u) {
        if (lid < step) {
            reduce_scratch[lid] = max(reduce_scratch[lid], reduce_scratch[lid + step]);
        }
        workgroupBarrier();
    }
    let result = reduce_scratch[0];
    workgroupBarrier();
    return result;
}
