// com.onyxia MatMulGroup: y<s> = a @ w<s> for up to 4 weights w<s> [K, N<s>] sharing a [M, K] (q/k/v, gate/up
// projections), in one dispatch. Slot s owns the column workgroups G<s> .. G<s+1> - 1 (G0 = 0), so a workgroup
// never straddles two weights; the accessors switch on the slot and main calls `product` with a constant slot
// per case, so after inlining each case reads its own binding with no branch per load. GATED (GatedMatMul):
// slots 0 and 1 cover the same columns and one output y0 = gelu(a @ w0) * (a @ w1), rounded through T where
// the unfused MatMul, Gelu and Mul would store.
// Each invocation accumulates a ROWS x 4 block exactly as matmul.wgsl does (same order of the sums), reading a
// and w straight from storage; reads past the last row or column are clamped, stores are bounds-checked.
// Bindings (numbers from the BIND_* defs): a, w0 [, w1, w2, w3] (read), then y0 [, y1, y2, y3] (write; y0 only
//       with GATED).
// Defs: T               f32 | f16 (storage type of a, w and y); F16 flag with f16 (sums are f32 either way)
//       SLOT1, SLOT2, SLOT3  flags: those slots exist
//       GATED           flag (with SLOT1); GELU: none | tanh (Gelu's approximate)
//       ROWS            rows of the output block per invocation (columns are always 4)
//       WG_X, WG_Y      workgroup shape: a workgroup covers (WG_Y * ROWS) rows x (WG_X * 4) columns
// Dims: M, K, N0 .. N3 (columns per slot), G1 .. G3 (first column workgroup of each slot).
// Dispatch: (column workgroups over all slots, or over N0 with GATED, ceil(M / (ROWS * WG_Y)), 1).
#ifdef F16
enable f16;
#endif
#ifdef GATED
#import onyxia::math
#import onyxia::rounding
#endif

@group(0) @binding(#{BIND_A}) var<storage, read> in_a: array<#{T}>;
@group(0) @binding(#{BIND_W0}) var<storage, read> w0: array<#{T}>;
#ifdef SLOT1
@group(0) @binding(#{BIND_W1}) var<storage, read> w1: array<#{T}>;
#endif
#ifdef SLOT2
@group(0) @binding(#{BIND_W2}) var<storage, read> w2: array<#{T}>;
#endif
#ifdef SLOT3
@group(0) @binding(#{BIND_W3}) var<storage, read> w3: array<#{T}>;
#endif
@group(0) @binding(#{BIND_Y0}) var<storage, read_write> y0: array<#{T}>;
#ifndef GATED
#ifdef SLOT1
@group(0) @binding(#{BIND_Y1}) var<storage, read_write> y1: array<#{T}>;
#endif
#endif
#ifdef SLOT2
@group(0) @binding(#{BIND_Y2}) var<storage, read_write> y2: array<#{T}>;
#endif
#ifdef SLOT3
@group(0) @binding(#{BIND_Y3}) var<storage, read_write> y3: array<#{T}>;
#endif

const ROWS: u32 = #{ROWS}u;

fn slot_n(slot: u32) -> u32 {
    var n = #{N0};
    switch slot {
#ifdef SLOT1
        case 1u: { n = #{N1}; }
#endif
#ifdef SLOT2
        case 2u: { n = #{N2}; }
#endif
#ifdef SLOT3
        case 3u: { n = #{N3}; }
#endif
        default: {}
    }
    return n;
}

fn w_at(slot: u32, i: u32) -> f32 {
    var v: #{T};
    switch slot {
#ifdef SLOT1
        case 1u: { v = w1[i]; }
#endif
#ifdef SLOT2
        case 2u: { v = w2[i]; }
#endif
#ifdef SLOT3
        case 3u: { v = w3[i]; }
#endif
        default: { v = w0[i]; }
    }
    return f32(v);
}

// Row k of w<slot> at the 4 (clamped) columns `cols`.
fn w_row(slot: u32, base: u32, cols: vec4<u32>) -> vec4<f32> {
    return vec4<f32>(w_at(slot, base + cols.x), w_at(slot, base + cols.y), w_at(slot, base + cols.z), w_at(slot, base + cols.w));
}

// Rows row0 .. row0 + ROWS - 1, columns col0 .. col0 + 3 of a @ w<slot> (matmul.wgsl's loop).
fn product(slot: u32, row0: u32, col0: u32) -> array<vec4<f32>, ROWS> {
    let n = slot_n(slot);
    let cols = min(vec4<u32>(col0) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(n - 1u));
    var a_rows: array<u32, ROWS>;
    for (var i = 0u; i < ROWS; i++) {
        a_rows[i] = min(row0 + i, #{M} - 1u) * #{K};
    }
    var acc: array<vec4<f32>, ROWS>;
    var k = 0u;
    for (; k + 4u <= #{K}; k += 4u) {  // four k at a time: fewer loop trips, each w row reused ROWS times
        let b0 = w_row(slot, k * n, cols);
        let b1 = w_row(slot, (k + 1u) * n, cols);
        let b2 = w_row(slot, (k + 2u) * n, cols);
        let b3 = w_row(slot, (k + 3u) * n, cols);
        for (var i = 0u; i < ROWS; i++) {
            let a = a_rows[i] + k;
            acc[i] += f32(in_a[a]) * b0 + f32(in_a[a + 1u]) * b1 + f32(in_a[a + 2u]) * b2 + f32(in_a[a + 3u]) * b3;
        }
    }
    for (; k < #{K}; k++) {
        let b = w_row(slot, k * n, cols);
        for (var i = 0u; i < ROWS; i++) {
            acc[i] += f32(in_a[a_rows[i] + k]) * b;
        }
    }
    return acc;
}

#ifndef GATED
fn store_y(slot: u32, i: u32, value: #{T}) {
    switch slot {
#ifdef SLOT1
        case 1u: { y1[i] = value; }
#endif
#ifdef SLOT2
        case 2u: { y2[i] = value; }
#endif
#ifdef SLOT3
        case 3u: { y3[i] = value; }
#endif
        default: { y0[i] = value; }
    }
}

fn run(slot: u32, row0: u32, col0: u32) {
    let acc = product(slot, row0, col0);
    let n = slot_n(slot);
    for (var i = 0u; i < ROWS; i++) {
        for (var j = 0u; j < 4u; j++) {
            if (row0 + i < #{M} && col0 + j < n) {
                store_y(slot, (row0 + i) * n + col0 + j, #{T}(acc[i][j]));
            }
        }
    }
}
#else
// a value as the unfused graph stores it in T (see onyxia::rounding for why not `f32(T(x))`)
fn stored(x: f32) -> f32 {
#ifdef F16
    return round_to_f16(x);
#else
    return x;
#endif
}

fn run_gated(row0: u32, col0: u32) {
    let gate = product(0u, row0, col0);
    let up = product(1u, row0, col0);
    for (var i = 0u; i < ROWS; i++) {
        for (var j = 0u; j < 4u; j++) {
            if (row0 + i < #{M} && col0 + j < #{N0}) {
                let activated = stored(gelu_#{GELU}(stored(gate[i][j])));
                y0[(row0 + i) * #{N0} + col0 + j] = #{T}(activated * stored(up[i][j]));
            }
        }
    }
}
#endif

@compute @workgroup_size(#{WG_X}, #{WG_Y})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row0 = (wid.y * #{WG_Y}u + lid.y) * ROWS;
#ifdef GATED
    run_gated(row0, (wid.x * #{WG_X}u + lid.x) * 4u);
#else
    var slot = 0u;
    var first = 0u;
#ifdef SLOT1
    if (wid.x >= #{G1}) {
        slot = 1u;
        first = #{G1};
    }
#endif
#ifdef SLOT2
    if (wid.x >= #{G2}) {
        slot = 2u;
        first = #{G2};
    }
#endif
#ifdef SLOT3
    if (wid.x >= #{G3}) {
        slot = 3u;
        first = #{G3};
    }
#endif
    let col0 = ((wid.x - first) * #{WG_X}u + lid.x) * 4u;
    switch slot {
#ifdef SLOT1
        case 1u: { run(1u, row0, col0); }
#endif
#ifdef SLOT2
        case 2u: { run(2u, row0, col0); }
#endif
#ifdef SLOT3
        case 3u: { run(3u, row0, col0); }
#endif
        default: { run(0u, row0, col0); }
    }
#endif
}
