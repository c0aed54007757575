#define_import_path onyxia::indexing
// Shared index helpers.
//
// Contract with the runtime: a 1-D dispatch whose workgroup count exceeds the adapter's per-dimension
// limit is split into (x, y, 1); `flat_invocation` linearises it back. Shaders with one invocation per
// element get it, and the bounds check, from onyxia::entry; the others call it themselves.

fn flat_invocation(wid: vec3<u32>, nwg: vec3<u32>, lid: u32, workgroup_size: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * workgroup_size + lid;
}
