#define_import_path onyxia::nbits_shared_rows
// MatMulNBits' reads of a and a_scales for the rows its workgroup shares (matmul_nbits.wgsl's defs: SHARED_A, INT8,
// Q_SHARED, MP). With SHARED_A lane 0 of each subgroup loads them and subgroupBroadcast hands them to the other
// lanes: lavapipe runs every storage load lane by lane, whatever the address, so 8 lanes loading one value cost 8
// loads, and an elected load and a broadcast about one. main sets subgroup_lane.
#import onyxia::nbits_activations

var<private> subgroup_lane: u32;  // this invocation's lane in its subgroup (SHARED_A)

// Row m's elements k0 .. k0 + 7 (a_eight), the same for every thread of the workgroup.
fn a_shared(m: u32, k0: u32) -> Eight {
#ifdef SHARED_A
    var x = Eight(vec4<f32>(0.0), vec4<f32>(0.0));
    if (subgroup_lane == 0u) {
        x = a_eight(m, k0);
    }
    return Eight(subgroupBroadcast(x.lo, 0u), subgroupBroadcast(x.hi, 0u));
#else
    return a_eight(m, k0);
#endif
}

#ifdef INT8
#ifndef Q_SHARED
// Row m's int8 scale in block blk (block-major, 4 rows to a vec4, M padded to 4; rows past M read the padding
// or the next block, and are never stored), the same for every thread of the workgroup.
fn row_scale(blk: u32, m: u32) -> f32 {
    let i = blk * #{MP} + m;
#ifdef SHARED_A
    var v = vec4<f32>(0.0);
    if (subgroup_lane == 0u) {
        v = a_scales[i / 4u];
    }
    return subgroupBroadcast(v, 0u)[i % 4u];
#else
    return a_scales[i / 4u][i % 4u];
#endif
}
#endif
#endif
