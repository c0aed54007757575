#define_import_path onyxia::entry
// The compute entry point of every shader that runs one invocation per element of an index space,
// written once so the dispatch contract lives in one place.
//
// The importing shader declares
//   fn element_count() -> u32   how many invocations do work (a dim: a u32 literal or an immediate)
//   fn element(i: u32)          the work of invocation i, called only for i < element_count()
// and the def WORKGROUP_SIZE. The plan dispatches ceil(count / WORKGROUP_SIZE) workgroups along x;
// the runtime splits a count over the adapter's per-dimension limit into (x, y, 1), which
// `flat_invocation` linearises back, and the bounds check drops the last workgroup's tail.
#import onyxia::indexing::{flat_invocation}

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = flat_invocation(wid, nwg, lid, #{WORKGROUP_SIZE}u);
    if (i < element_count()) {
        element(i);
    }
}
