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

#ifdef SPAN
// Row reductions over virtual lanes (`layer_norm.row_lanes`): the tree is TREE = WORKGROUP_SIZE * SPAN wide,
// each invocation holding SPAN partial sums, parts[t] being virtual lane lid + WORKGROUP_SIZE * t's (it
// accumulates elements lid + WORKGROUP_SIZE * t, + TREE, + 2 * TREE, ... in that order). `lanes_sum` adds exactly
// the pairs a workgroup of TREE invocations adds in `workgroup_sum`, in the same order: the levels whose pairs
// lie within one invocation (a stride of WORKGROUP_SIZE or more) inside it, without a barrier, the last
// log2(WORKGROUP_SIZE) across the workgroup; so a row's sum has the same bits whatever the split. lavapipe runs
// each 8 invocations of a workgroup as a coroutine and switches through all of them at every barrier: a
// 256-wide tree of 256 invocations paid 32 switches at each of its 10 barriers per row.
const TREE: u32 = #{WORKGROUP_SIZE}u * #{SPAN}u;

fn lanes_sum(lid: u32, parts: ptr<function, array<f32, #{SPAN}>>) -> f32 {
    for (var half = #{SPAN}u / 2u; half > 0u; half >>= 1u) {
        for (var t = 0u; t < half; t++) {
            (*parts)[t] += (*parts)[t + half];
        }
    }
    return workgroup_sum(lid, (*parts)[0]);
}
#endif

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
