// MatMulTransB for a few rows of a (decode steps' GEMVs, one row per stream; the tied lm head): y[m, Y_COL0 + n] =
// dot(a[m, :], b[n, :]) with b stored [N, K] and read in place. Each invocation takes COLS adjacent rows of b and
// walks them as vec4s, so the 8 invocations of a lavapipe SIMD row stream 8 * COLS neighbouring rows, one
// contiguous block; it keeps the sums of ROWS rows of a, so every load of b serves them all (a decode step is
// bound by reading b: 8 rows cost about 2x one, against 4.4x with matmul.wgsl's 4-row blocks). Measured on lavapipe
// against matmul.wgsl's 4-column blocks at one row (32 rows per SIMD row, read per element): 1.3-1.4x faster at
// COLS 2; 1 row of b keeps too few loads in flight, 4 too many streams for the prefetchers (with more rows of a,
// 4 pay: each load of a serves more of b).
// Each sum adds four k at a time as `acc + (a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w)`, matmul.wgsl's
// order: whatever the tile (and matmul.wgsl for larger M), row m of y is bit-identical to the product of row m
// alone, so a stream in a batch gets exactly the tokens it gets alone.
// Bindings: 0 in_a [M, K] (read, vec4s), 1 in_b [N, K] (read, vec4s; may be a range of b's rows), 2 out_y [M, Y_ROW]
//       (write).
// Defs: T     f32 | f16 (storage type of a, b and y; the sums are f32); F16 flag with f16
//       ROWS  rows of a per invocation; ROW_ITEMS: 0 .. ROWS - 1 (`#for`: the row loops unrolled, so the sums
//             stay in registers)
//       COLS  rows of b per invocation; COL_ITEMS: 0 .. COLS - 1 (`#for`: the column loops written out too:
//             lavapipe keeps a constant-bound loop a loop and blends every value it carries each pass, so
//             `for c < COLS` over arrays of sums cost the rows tiles a sixth of their time; the arithmetic and
//             its order are unchanged)
//       WG    workgroup size
//       SHARED_A  flag: lane 0 of each subgroup loads a (the same for every lane) and subgroupBroadcast hands it
//             on (the `simd8_shared` variant, as matmul_group.wgsl: lavapipe loads lane by lane, so a's loads
//             were a third of the kernel's at COLS 2)
//       SPREAD_A  flag (with SHARED_A; ROWS a multiple of 4): lane l of each subgroup loads row l % 4 of every 4
//             rows and subgroupBroadcast hands each row to every lane: one load per lane per 4 rows, where
//             SHARED_A's costs a load per row (8 rows: 265 ms against 375 for the lm head); QUADS: the first row
//             of each 4, "0" or "0 4"
//       SPREAD8  flag (with SPREAD_A, ROWS 8): on a subgroup of 8 lanes or more lane l loads row l, one load per
//             lane per step of k where the quads take two (the Gemma 3 270m lm head at 8 rows, process CPU ms on
//             lavapipe: 126 against 141; 1 row 70 either way); the subgroup size is known only at run time, so
//             A_READS ("q", or "q 8" with SPREAD8) names a copy of the sums per way of reading a and main picks
//             one per invocation
//       CELLS ROWS * COLS
// Dims: K4 (K / 4: rows of a and b are whole vec4s), N (rows of b this dispatch covers), Y_COL0 (y's first column),
//       M (rows of a), Y_ROW (y's row length: b's rows in all dispatches).
// Dispatch: (ceil(N / (COLS * WG)), 1, ceil(M / ROWS)) workgroups; rows of b past N read row N - 1, rows of a past
// M read whatever WebGPU's bounds checks give; neither is stored.
#ifdef F16
enable f16;
#endif

@group(0) @binding(0) var<storage, read> in_a: array<vec4<#{T}>>;
@group(0) @binding(1) var<storage, read> in_b: array<vec4<#{T}>>;
@group(0) @binding(2) var<storage, read_write> out_y: array<#{T}>;

const ROWS: u32 = #{ROWS}u;
const COLS: u32 = #{COLS}u;
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

// vec4 k of rows m0 .. m0 + ROWS - 1 of a, the same for every lane.
fn a_rows_q(m0: u32, k: u32) -> array<vec4<f32>, ROWS> {
    var x: array<vec4<f32>, ROWS>;
#ifdef SPREAD_A
#for q in #{QUADS}
    let mine#{q} = vec4<f32>(in_a[(m0 + #{q}u + subgroup_lane % 4u) * #{K4} + k]);
#for l in 0 1 2 3
    x[#{q} + #{l}] = subgroupBroadcast(mine#{q}, #{l}u);
#endfor
#endfor
#else
#for i in #{ROW_ITEMS}
    x[#{i}] = a_at((m0 + #{i}u) * #{K4} + k);
#endfor
#endif
    return x;
}

#ifdef SPREAD8
// a_rows_q on a subgroup of at least 8 lanes (ROWS 8): lane l loads row m0 + l % 8, one load per lane where
// a_rows_q's quads take two (lanes 4 .. 7 repeat the rows of lanes 0 .. 3): the same values.
fn a_rows_8(m0: u32, k: u32) -> array<vec4<f32>, ROWS> {
    var x: array<vec4<f32>, ROWS>;
    let mine = vec4<f32>(in_a[(m0 + subgroup_lane % 8u) * #{K4} + k]);
#for i in #{ROW_ITEMS}
    x[#{i}] = subgroupBroadcast(mine, #{i}u);
#endfor
    return x;
}
#endif

// The sums of rows m0 .. m0 + ROWS - 1 of a by b's rows cols0 .. (COLS of them, each times K4), cell i * COLS + c,
// reading a through `a_rows_<via>` (one copy per A_READS item, so the choice between them is made once per
// invocation, outside the loop: a branch inside it would blend every sum each pass).
#for via in #{A_READS}
fn sums_#{via}(m0: u32, cols: array<u32, COLS>) -> array<f32, #{CELLS}> {
#for c in #{COL_ITEMS}
    let cols#{c} = cols[#{c}];
#endfor
#for i in #{ROW_ITEMS}
#for c in #{COL_ITEMS}
    var acc#{i}_#{c} = 0.0;
#endfor
#endfor
    for (var k = 0u; k < #{K4}; k++) {
#for c in #{COL_ITEMS}
        let b#{c} = vec4<f32>(in_b[cols#{c} + k]);
#endfor
        let x = a_rows_#{via}(m0, k);
#for i in #{ROW_ITEMS}
        let x#{i} = x[#{i}];
#for c in #{COL_ITEMS}
        acc#{i}_#{c} += x#{i}.x * b#{c}.x + x#{i}.y * b#{c}.y + x#{i}.z * b#{c}.z + x#{i}.w * b#{c}.w;
#endfor
#endfor
    }
    return array<f32, #{CELLS}>(
#for i in #{ROW_ITEMS}
#for c in #{COL_ITEMS}
        acc#{i}_#{c},
#endfor
#endfor
    );
}
#endfor

@compute @workgroup_size(#{WG})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
#ifdef SHARED_A
    @builtin(subgroup_invocation_id) sid: u32,
#endif
#ifdef SPREAD8
    @builtin(subgroup_size) lanes: u32,
#endif
) {
#ifdef SHARED_A
    subgroup_lane = sid;
#endif
    // x (and y, when the runtime splits a long x) count workgroups; z counts blocks of ROWS rows of a
    let col0 = ((wid.x + wid.y * nwg.x) * #{WG}u + lid) * COLS;
    let m0 = wid.z * ROWS;
    let cols = array<u32, COLS>(
#for c in #{COL_ITEMS}
        min(col0 + #{c}u, #{N} - 1u) * #{K4},
#endfor
    );
#ifdef SPREAD8
    var acc: array<f32, #{CELLS}>;
    if (lanes >= 8u) {
        acc = sums_8(m0, cols);
    } else {
        acc = sums_q(m0, cols);
    }
#else
    let acc = sums_q(m0, cols);
#endif
#for i in #{ROW_ITEMS}
    if (m0 + #{i}u < #{M}) {
#for c in #{COL_ITEMS}
        if (col0 + #{c}u < #{N}) {
            out_y[(m0 + #{i}u) * #{Y_ROW} + #{Y_COL0} + col0 + #{c}u] = #{T}(acc[#{i}u * COLS + #{c}u]);
        }
#endfor
    }
#endfor
}
