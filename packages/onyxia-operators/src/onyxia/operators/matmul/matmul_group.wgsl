// com.onyxia MatMulGroup: y<s> = a @ w<s> for up to 4 weights w<s> [K, N<s>] sharing a [M, K] (q/k/v, gate/up
// projections), in one dispatch, each slot over its own column workgroups (onyxia::product_slots); MatMul by a
// compile-time weight plans here as a group of one. GATED (GatedMatMul): y0 = act(a @ w0) * (a @ w1), act Gelu
// or SiLU, rounded through T where the unfused MatMul, activation and Mul would store. BIAS: y<s> = a @ w<s> + b<s>,
// the product stored through T before the bias is added, as the unfused MatMul and Add round.
// Each invocation accumulates a ROWS x 4 block (four k per step, in one order for every block shape, so decode,
// prefill, a group and its separate MatMuls all sum alike), reading a and w straight from storage; reads past
// the last row are clamped, stores are bounds-checked.
// Weights: with PANELS, each w<s> is a compile-time weight in column panels (matmul/weights.py: [ceil(N / PANEL)]
// [K][PANEL], the columns past N zero) read as vec4s, so the 8 invocations of a lavapipe SIMD row read 128
// contiguous bytes per k and walk one panel front to back. Without PANELS (a weight only known at run time) w<s>
// is the graph's [K, N], read per element with the columns clamped to N - 1.
// Bindings (numbers from the BIND_* defs): a, w0 [, w1, w2, w3] (read), [with BIAS: bias0 [, bias1 ...] (read,
//       [N<s>] of T)], then y0 [, y1, y2, y3] (write; y0 only with GATED).
// Defs: T, Y_T          f32 | f16 (storage type of a and w, and of y: the same); F16 flag with f16 (sums are f32)
//       PANELS          flag: the weights are in panels (above); PANEL: their columns (a multiple of 4)
//       OTHER_SLOTS     the slots past 0 as a `#for` list: "1 2 3", "1", or "" for a group of one
//       GATED           flag (two slots); ACTIVATION: gelu_none | gelu_tanh | silu
//       BIAS            flag (not with GATED): a bias per slot
//       ROLLED_K        flag (a short static K): the loop over K through onyxia::rolled (rolled_loops.py)
//       ROWS            rows of the output block per invocation (columns are always 4); ROW_ITEMS: 0 .. ROWS - 1
//                       (the row loops unrolled by `#for`: a loop left rolled indexes the sums at run time, which
//                       lavapipe does lane by lane in memory)
//       SHARED_A        flag: a subgroup's lanes share their rows (WG_Y 1), so lane 0 loads each value of a and
//                       subgroupBroadcast hands it to the others (the `simd8_shared` variant: lavapipe runs every
//                       load lane by lane, so 8 lanes loading one address cost 8 loads, an elected load and a
//                       broadcast about one)
//       SPREAD_A        flag (with SHARED_A, ROWS a multiple of 4): lane l loads row l % 4 of every 4 rows for the
//                       whole subgroup (`a_rows`): with 8 rows Gemma 3 270m's products took 6.3 ms against 8.2
//                       with SHARED_A's load per row; QUADS: the first row of each 4, "0" or "0 4"
//       WG_X, WG_Y      workgroup shape: a workgroup covers (WG_Y * ROWS) rows x (WG_X * 4) columns
// Dims: M, K, N0 .. N3 (columns per slot), G1 .. G3 (first column workgroup of each slot).
// Dispatch: (column workgroups over all slots, or over N0 with GATED, ceil(M / (ROWS * WG_Y)), 1).
#ifdef F16
enable f16;
#endif
#import onyxia::product_slots
#import onyxia::rolled
#ifdef PANELS
alias W_T = vec4<#{T}>;
#else
alias W_T = #{T};
#endif

#ifdef A_VEC4
@group(0) @binding(#{BIND_A}) var<storage, read> in_a: array<vec4<#{T}>>;
#else
@group(0) @binding(#{BIND_A}) var<storage, read> in_a: array<#{T}>;
#endif
#for s in 0 #{OTHER_SLOTS}
@group(0) @binding(#{BIND_W#{s}}) var<storage, read> w#{s}: array<W_T>;
#endfor

const ROWS: u32 = #{ROWS}u;
var<private> subgroup_lane: u32;  // this invocation's lane in its subgroup (SHARED_A)
#ifdef PANELS
const PANEL: u32 = #{PANEL}u;  // defined only for panelled weights (a run-time weight has no PANEL def)
#endif

fn w_at(slot: u32, i: u32) -> W_T {
    var v: W_T;
    switch slot {
#for s in #{OTHER_SLOTS}
        case #{s}u: { v = w#{s}[i]; }
#endfor
        default: { v = w0[i]; }
    }
    return v;
}

// Columns col0 .. col0 + 3 (col0 % 4 == 0) of row k of w<slot>; past N: the panel's zeros, or column N - 1.
fn w_row(slot: u32, k: u32, col0: u32) -> vec4<f32> {
#ifdef PANELS
    return vec4<f32>(w_at(slot, ((col0 / PANEL) * #{K} + k) * (PANEL / 4u) + (col0 % PANEL) / 4u));
#else
    let n = slot_n(slot);
    let cols = min(vec4<u32>(col0) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(n - 1u)) + k * n;
    return vec4<f32>(
        f32(w_at(slot, cols.x)), f32(w_at(slot, cols.y)), f32(w_at(slot, cols.z)), f32(w_at(slot, cols.w))
    );
#endif
}

// Four k of one row of a: the vec4 at i (A_VEC4) or the elements i .. i + 3; the same for every lane.
fn a_four(i: u32) -> vec4<f32> {
#ifdef SHARED_A
    var v = vec4<f32>(0.0);
    if (subgroup_lane == 0u) {
        v = a_read(i);
    }
    return subgroupBroadcast(v, 0u);
#else
    return a_read(i);
#endif
}

fn a_read(i: u32) -> vec4<f32> {
#ifdef A_VEC4
    return vec4<f32>(in_a[i]);
#else
    return vec4<f32>(f32(in_a[i]), f32(in_a[i + 1u]), f32(in_a[i + 2u]), f32(in_a[i + 3u]));
#endif
}

// Where four k of row m start in in_a: a vec4 index (A_VEC4, K % 4 == 0) or an element index.
fn a_index(m: u32, k: u32) -> u32 {
#ifdef A_VEC4
    return (m * #{K} + k) / 4u;
#else
    return m * #{K} + k;
#endif
}

#ifdef SPREAD_A
// Four k of rows m0 .. m0 + ROWS - 1, the same for every lane: lane l of the subgroup loads row l % 4 of every 4
// rows and subgroupBroadcast hands each to every lane, one load per lane per 4 rows where a_four's costs a load
// per row. Every lane of the subgroup calls it (the rows are the workgroup's: WG_Y 1).
fn a_rows(m0: u32, k: u32) -> array<vec4<f32>, ROWS> {
    var x: array<vec4<f32>, ROWS>;
#for q in #{QUADS}
    let mine#{q} = a_read(a_index(m0 + #{q}u + subgroup_lane % 4u, k));
#for l in 0 1 2 3
    x[#{q} + #{l}] = subgroupBroadcast(mine#{q}, #{l}u);
#endfor
#endfor
    return x;
}
#endif

#ifndef A_VEC4
// Element i of a, the same for every lane (the K % 4 tail).
fn a_one(i: u32) -> f32 {
#ifdef SHARED_A
    var v = 0.0;
    if (subgroup_lane == 0u) {
        v = f32(in_a[i]);
    }
    return subgroupBroadcast(v, 0u);
#else
    return f32(in_a[i]);
#endif
}
#endif

// Rows row0 .. row0 + ROWS - 1, columns col0 .. col0 + 3 of a @ w<slot>.
// Rows past M are read unclamped: WebGPU bounds-checks every access, so they read some element of a (their sums
// are never stored), and a clamp per row costs ~25% on lavapipe.
fn product(slot: u32, row0: u32, col0: u32) -> array<vec4<f32>, ROWS> {
    var acc: array<vec4<f32>, ROWS>;
    var k = 0u;
#ifdef ROLLED_K
    let k_end = rolled(#{K}, arrayLength(&in_a));  // a short K: a loop, not K / 4 copies of its body (onyxia::rolled)
#else
    let k_end = #{K};
#endif
    for (; k + 4u <= k_end; k += 4u) {  // four k at a time: fewer loop trips, each w row reused ROWS times
        let b0 = w_row(slot, k, col0);
        let b1 = w_row(slot, k + 1u, col0);
        let b2 = w_row(slot, k + 2u, col0);
        let b3 = w_row(slot, k + 3u, col0);
#ifdef SPREAD_A
        let x = a_rows(row0, k);
#endif
#for i in #{ROW_ITEMS}
#ifdef SPREAD_A
        let x#{i} = x[#{i}];
#else
        let x#{i} = a_four(a_index(row0 + #{i}u, k));
#endif
        acc[#{i}] += x#{i}.x * b0 + x#{i}.y * b1 + x#{i}.z * b2 + x#{i}.w * b3;
#endfor
    }
#ifndef A_VEC4
    for (; k < #{K}; k++) {
        let b = w_row(slot, k, col0);
#for i in #{ROW_ITEMS}
        acc[#{i}] += a_one((row0 + #{i}u) * #{K} + k) * b;
#endfor
    }
#endif
    return acc;
}

#ifndef GATED
#ifdef BIAS
#for s in 0 #{OTHER_SLOTS}
@group(0) @binding(#{BIND_BIAS#{s}}) var<storage, read> bias#{s}: array<#{T}>;
#endfor

fn bias_at(slot: u32, n: u32) -> f32 {
    var b = #{T}(0.0);
    switch slot {
#for s in #{OTHER_SLOTS}
        case #{s}u: { b = bias#{s}[n]; }
#endfor
        default: { b = bias0[n]; }
    }
    return f32(b);
}
#endif

// The stored value of a product (with BIAS: the product stored, then the bias added and stored, as MatMul, Add).
fn epilogue(slot: u32, n: u32, acc: f32) -> #{T} {
#ifdef BIAS
    return #{T}(stored(acc) + bias_at(slot, n));
#else
    return #{T}(acc);
#endif
}

fn run(slot: u32, row0: u32, col0: u32) {
    let acc = product(slot, row0, col0);
    let n = slot_n(slot);
#for i in #{ROW_ITEMS}
    for (var j = 0u; j < 4u; j++) {
        if (row0 + #{i}u < #{M} && col0 + j < n) {
            store_y(slot, (row0 + #{i}u) * n + col0 + j, epilogue(slot, col0 + j, acc[#{i}][j]));
        }
    }
#endfor
}
#else
fn run_gated(row0: u32, col0: u32) {
    let gate = product(0u, row0, col0);
    let up = product(1u, row0, col0);
#for i in #{ROW_ITEMS}
    for (var j = 0u; j < 4u; j++) {
        if (row0 + #{i}u < #{M} && col0 + j < #{N0}) {
            y0[(row0 + #{i}u) * #{N0} + col0 + j] = gated(gate[#{i}][j], up[#{i}][j]);
        }
    }
#endfor
}
#endif

@compute @workgroup_size(#{WG_X}, #{WG_Y})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
#ifdef SHARED_A
    @builtin(subgroup_invocation_id) sid: u32,
#endif
) {
#ifdef SHARED_A
    subgroup_lane = sid;
#endif
#if WG_Y == 1
    let row0 = wid.y * ROWS;  // the same for every invocation of the workgroup
#else
    let row0 = (wid.y * #{WG_Y}u + lid.y) * ROWS;
#endif
#ifdef GATED
    run_gated(row0, (wid.x * #{WG_X}u + lid.x) * 4u);
#else
    let owner = slot_of(wid.x);
    let col0 = ((wid.x - owner.y) * #{WG_X}u + lid.x) * 4u;
    switch owner.x {
#for s in #{OTHER_SLOTS}
        case #{s}u: { run(#{s}u, row0, col0); }
#endfor
        default: { run(0u, row0, col0); }
    }
#endif
}
