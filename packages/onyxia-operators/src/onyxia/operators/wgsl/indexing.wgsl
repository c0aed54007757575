#define_import_path onyxia::indexing
// Shared index helpers.
//
// Contract with the runtime: a 1-D dispatch whose workgroup count exceeds the adapter's per-dimension
// limit is split into (x, y, 1); `flat_invocation` linearises it back, and every shader bounds-checks
// the result against its element count.

fn flat_invocation(wid: vec3<u32>, nwg: vec3<u32>, lid: u32, workgroup_size: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * workgroup_size + lid;
}
