// The steps around the recurrence (recurrent.py; the time loop itself is recurrent.wgsl):
//
// PACK (one invocation per packed weight element): W [D, G*H, I] and R [D, G*H, H] rewritten as
//   [D, K, G, HP] (K = I or H, HP = H rounded up to 4, the padding zero), read as vec4s of four
//   neighbouring hidden units: the 8 invocations of a lavapipe SIMD row then read 128 contiguous bytes
//   per k instead of gathering one word each (matmul_group.wgsl measured the same). Per run, as W and
//   R may be run-time inputs; it is small next to the time loop.
// PROJECT (one invocation per (direction, 4 (time, batch) rows, gate, quad of units)): proj = X . W^T
//   + Wb (+ Rb where the cell adds it outside the recurrence), for every step at once: the part of the
//   work with no time dependence, spread over the whole GPU; each packed W vec4 read serves four rows.
// PREP (one invocation per state element; only with initial_h / initial_c): the initial states into
//   the state buffer, in [direction, batch, hidden] order whatever the layout.
// FINISH (one invocation per state element; only with Y_h / Y_c): final states out, in the layout.
//
// State buffer (f32): [3][D * B * H]: region 0 h, region 1 c, region 2 scratch of the time loop.
// Bindings (PACK): 0 w, 1 r, 2 wt, 3 rt (f32 views of the packed buffers).
// Bindings (PROJECT): 0 x, 1 wt, then B_BIAS bias (HAS_BIAS), then B_PROJ proj ([D, S, B, G, HQ] vec4).
// Bindings (PREP): 0 init_h (INIT_H), B_C0 init_c (INIT_C), then B_STATE state.
// Bindings (FINISH): 0 state, then B_YH y_h (HAS_YH), B_YC y_c (HAS_YC).
// Defs: PACK / PROJECT / PREP / FINISH (stage); LAYOUT (0 or 1); RB_GATES (PROJECT: gates that take Rb
//   there: all, or 2 for GRU under linear_before_reset); WORKGROUP_SIZE; CELL (unused here).
// Dims: S (seq_length), B (batch), I (input_size), D (directions), H (hidden), G (gates),
//   HQ (quads of units: ceil(H / 4)), GH (G * H).
#import onyxia::entry

// initial_h / Y_h element of (d, b, j): [D, B, H] in layout 0, [B, D, H] in layout 1.
fn state_index(d: u32, b: u32, j: u32) -> u32 {
#if LAYOUT == 1
    return (b * #{D} + d) * #{H} + j;
#else
    return (d * #{B} + b) * #{H} + j;
#endif
}

#ifdef PACK
@group(0) @binding(0) var<storage, read> w: array<f32>;
@group(0) @binding(1) var<storage, read> r: array<f32>;
@group(0) @binding(2) var<storage, read_write> wt: array<f32>;
@group(0) @binding(3) var<storage, read_write> rt: array<f32>;

fn element_count() -> u32 { return #{D} * (#{I} + #{H}) * #{G} * #{HQ} * 4u; }

// Element i of the packed [D, K, G, HP]: unit j of gate g, column k of direction d's W or R row.
fn element(i: u32) {
    let hp = #{HQ} * 4u;
    let w_count = #{D} * #{I} * #{G} * hp;
    let e = select(i - w_count, i, i < w_count);
    let cols = select(#{H}, #{I}, i < w_count);
    let j = e % hp;
    let g = (e / hp) % #{G};
    let k = (e / (hp * #{G})) % cols;
    let d = e / (hp * #{G} * cols);
    var v = 0.0;
    if (i < w_count) {
        if (j < #{H}) {
            v = w[(d * #{GH} + g * #{H} + j) * #{I} + k];
        }
        wt[e] = v;
    } else {
        if (j < #{H}) {
            v = r[(d * #{GH} + g * #{H} + j) * #{H} + k];
        }
        rt[e] = v;
    }
}
#endif

#ifdef PROJECT
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> wt: array<vec4<f32>>;
#ifdef HAS_BIAS
@group(0) @binding(#{B_BIAS}) var<storage, read> bias: array<f32>;
#endif
@group(0) @binding(#{B_PROJ}) var<storage, read_write> proj: array<vec4<f32>>;

// Rows (time, batch) are taken 4 per invocation, so each packed W vec4 read serves four rows.
fn row_blocks() -> u32 { return (#{S} * #{B} + 3u) / 4u; }

fn element_count() -> u32 { return #{D} * row_blocks() * #{G} * #{HQ}; }

#ifdef HAS_BIAS
// Bias entry n of direction d (Wb, then Rb at GH), 0 past the gate's H units (the padding).
fn bias_at(d: u32, g: u32, j: u32, rb: bool) -> f32 {
    if (j >= #{H}) {
        return 0.0;
    }
    return bias[d * 2u * #{GH} + select(0u, #{GH}, rb) + g * #{H} + j];
}

fn bias4(d: u32, g: u32, j: u32, rb: bool) -> vec4<f32> {
    return vec4<f32>(bias_at(d, g, j, rb), bias_at(d, g, j + 1u, rb), bias_at(d, g, j + 2u, rb), bias_at(d, g, j + 3u, rb));
}
#endif

// Start of X's row r = t * B + b (rows past the last clamp to it: computed, never stored).
fn x_row(r: u32) -> u32 {
    let row = min(r, #{S} * #{B} - 1u);
#if LAYOUT == 1
    return ((row % #{B}) * #{S} + row / #{B}) * #{I};
#else
    return row * #{I};
#endif
}

fn element(i: u32) {
    let q = i % #{HQ};
    let g = (i / #{HQ}) % #{G};
    let block = (i / (#{HQ} * #{G})) % row_blocks();
    let d = i / (#{HQ} * #{G} * row_blocks());
    let r0 = block * 4u;
    let x0 = x_row(r0);
    let x1 = x_row(r0 + 1u);
    let x2 = x_row(r0 + 2u);
    let x3 = x_row(r0 + 3u);
    var w_at = d * #{I} * #{G} * #{HQ} + g * #{HQ} + q;
    var acc = array<vec4<f32>, 4>(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
    for (var k = 0u; k < #{I}; k++) {
        let wv = wt[w_at];
        acc[0] += x[x0 + k] * wv;
        acc[1] += x[x1 + k] * wv;
        acc[2] += x[x2 + k] * wv;
        acc[3] += x[x3 + k] * wv;
        w_at += #{G} * #{HQ};
    }
    var biases = vec4<f32>(0.0);
#ifdef HAS_BIAS
    biases = bias4(d, g, q * 4u, false);
    if (g < #{RB_GATES}) {
        biases += bias4(d, g, q * 4u, true);
    }
#endif
    for (var e = 0u; e < 4u; e++) {
        let r = r0 + e;
        if (r < #{S} * #{B}) {
            proj[((d * #{S} * #{B} + r) * #{G} + g) * #{HQ} + q] = acc[e] + biases;
        }
    }
}
#endif

#ifdef PREP
#ifdef INIT_H
@group(0) @binding(0) var<storage, read> init_h: array<f32>;
#endif
#ifdef INIT_C
@group(0) @binding(#{B_C0}) var<storage, read> init_c: array<f32>;
#endif
@group(0) @binding(#{B_STATE}) var<storage, read_write> state: array<f32>;

fn element_count() -> u32 { return #{D} * #{B} * #{H}; }

fn element(i: u32) {
    let j = i % #{H};
    let b = (i / #{H}) % #{B};
    let d = i / (#{H} * #{B});
    let at = state_index(d, b, j);
    var h = 0.0;
    var c = 0.0;
#ifdef INIT_H
    h = init_h[at];
#endif
#ifdef INIT_C
    c = init_c[at];
#endif
    state[i] = h;
    state[#{D} * #{B} * #{H} + i] = c;
}
#endif

#ifdef FINISH
@group(0) @binding(0) var<storage, read> state: array<f32>;
#ifdef HAS_YH
@group(0) @binding(#{B_YH}) var<storage, read_write> y_h: array<f32>;
#endif
#ifdef HAS_YC
@group(0) @binding(#{B_YC}) var<storage, read_write> y_c: array<f32>;
#endif

fn element_count() -> u32 { return #{D} * #{B} * #{H}; }

fn element(i: u32) {
    let j = i % #{H};
    let b = (i / #{H}) % #{B};
    let d = i / (#{H} * #{B});
    let at = state_index(d, b, j);
#ifdef HAS_YH
    y_h[at] = state[i];
#endif
#ifdef HAS_YC
    y_c[at] = state[#{D} * #{B} * #{H} + i];
#endif
}
#endif
