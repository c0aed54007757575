// MatMulTransB for one row of a (a decode step's GEMV; the tied lm head): y[Y_COL0 + n] = dot(a, b[n, :]) with b
// stored [N, K] and read in place. Each invocation takes ROWS adjacent rows of b and walks them as vec4s, so the 8
// invocations of a lavapipe SIMD row stream 8 * ROWS neighbouring rows, one contiguous block. Measured on lavapipe
// against matmul.wgsl's 4-column blocks (32 rows per SIMD row, read per element): 1.3-1.4x faster at ROWS 2; 1 row
// keeps too few loads in flight, 4 rows too many streams for the prefetchers.
// Bindings: 0 in_a [K] (read, vec4s), 1 in_b [N, K] (read, vec4s; may be a range of b's rows), 2 out_y (write).
// Defs: T     f32 | f16 (storage type of a, b and y; the sums are f32); F16 flag with f16
//       ROWS  rows of b per invocation
//       WG    workgroup size
//       SHARED_A  flag: lane 0 of each subgroup loads a (the same for every lane) and subgroupBroadcast hands it
//             on (the `simd8_shared` variant, as matmul_group.wgsl: lavapipe loads lane by lane, so a's loads
//             were a third of the kernel's at ROWS 2)
// Dims: K4 (K / 4: rows of b are whole vec4s), N (rows of b this dispatch covers), Y_COL0 (y's first column).
// Dispatch: ceil(N / (ROWS * WG)) workgroups; rows past N read row N - 1 and are not stored.
#ifdef F16
enable f16;
#endif

@group(0) @binding(0) var<storage, read> in_a: array<vec4<#{T}>>;
@group(0) @binding(1) var<storage, read> in_b: array<vec4<#{T}>>;
@group(0) @binding(2) var<storage, read_write> out_y: array<#{T}>;

const ROWS: u32 = #{ROWS}u;
var<private> subgroup_lane: u32;  // this invocation's lane in its subgroup (SHARED_A)

// a's vec4 k, the same for every lane.
fn a_at(k: u32) -> vec4<f32> {
#ifdef SHARED_A
    var v = vec4<f32>(0.0);
    if (subgroup_lane == 0u) {
        v = vec4<f32>(in_a[k]);
    }
    return subgroupBroadcast(v, 0u);
#else
    return vec4<f32>(in_a[k]);
#endif
}

@compute @workgroup_size(#{WG})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
#ifdef SHARED_A
    @builtin(subgroup_invocation_id) sid: u32,
#endif
) {
#ifdef SHARED_A
    subgroup_lane = sid;
#endif
    // x (and y, when the runtime splits a long x) count workgroups
    let row0 = ((wid.x + wid.y * nwg.x) * #{WG}u + lid) * ROWS;
    var rows: array<u32, ROWS>;
    for (var r = 0u; r < ROWS; r++) {
        rows[r] = min(row0 + r, #{N} - 1u) * #{K4};
    }
    var acc: array<vec4<f32>, ROWS>;
    for (var k = 0u; k < #{K4}; k++) {
        let a = a_at(k);
        for (var r = 0u; r < ROWS; r++) {
            acc[r] += a * vec4<f32>(in_b[rows[r] + k]);
        }
    }
    for (var r = 0u; r < ROWS; r++) {
        if (row0 + r < #{N}) {
            out_y[#{Y_COL0} + row0 + r] = #{T}(dot(acc[r], vec4<f32>(1.0)));
        }
    }
}
