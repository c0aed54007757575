// LSTM, GRU and RNN in up to four dispatches, whatever the sequence length (recurrent.py):
//
// PROJECT (one invocation per (direction, time, batch, gate row)): proj = X . W^T + Wb (+ Rb where the
//   cell adds it outside the recurrence), for every step at once: the part of the work that has no
//   time dependence, spread over the whole GPU.
// PREP (one invocation per state element; only with initial_h / initial_c): the initial states into
//   the state buffer, in [direction, batch, hidden] order whatever the layout.
// RECUR (one workgroup per (direction, batch)): the time loop, inside the shader. Each invocation owns
//   hidden units j = lid, lid + WG, ...; per step it reads the whole previous h from the state buffer,
//   computes its units' gates, and after a storage barrier (every read of the old h done) writes the
//   new h; a second barrier makes it visible for the next step. The loop bound is the batch entry's
//   sequence length (read once, made uniform), so a symbolic seq_length needs no other plan, and no
//   step is read back. The cell state c never leaves the invocation (private array). Steps past the
//   length leave Y zero; a zero length leaves zero final states (both as onnxruntime does).
// FINISH (one invocation per state element; only with Y_h / Y_c): final states out, in the layout.
//
// State buffer (f32): [3][D * B * H]: region 0 h, region 1 c (initial, then final), region 2 r (.) h
//   (GRU without linear_before_reset: the reset hidden state the candidate's product reads).
// Bindings (PROJECT): 0 x, 1 w, then B_BIAS bias (HAS_BIAS), then B_PROJ proj.
// Bindings (PREP): 0 init_h (INIT_H), B_C0 init_c (INIT_C), then B_STATE state.
// Bindings (RECUR): 0 proj, 1 r, then B_BIAS bias (GRU with LINEAR_BEFORE_RESET), B_LENS lens (HAS_LENS),
//   B_P peepholes (PEEPHOLE), then B_STATE state, B_Y y (HAS_Y), ERRORS_BINDING (HAS_LENS).
// Bindings (FINISH): 0 state, then B_YH y_h (HAS_YH), B_YC y_c (HAS_YC).
// Defs: PROJECT / PREP / RECUR / FINISH (stage); CELL (LSTM, GRU or RNN); D (directions), H (hidden),
//   GH (gate rows = gates * H), RB_END (PROJECT: rows that take Rb there), LAYOUT (0 or 1), WG and UPT
//   (RECUR: workgroup size and units per invocation), REVERSE (a bool expression of d), CLIP (a
//   literal; absent: no clip), ACT_F_0/1, ACT_G_0/1, ACT_H_0/1 (expressions of x per direction),
//   INPUT_FORGET, LINEAR_BEFORE_RESET, WORKGROUP_SIZE (element stages).
// Dims: S (seq_length), B (batch), I (input_size).
#ifdef RECUR
#ifdef HAS_LENS
#import onyxia::errors
#endif
#else
#import onyxia::entry
#endif

// Y / Y_h / initial_h element of (t, d, b, j): layout 0 is [S, D, B, H] / [D, B, H], layout 1 batch first.
fn y_index(t: u32, d: u32, b: u32, j: u32) -> u32 {
#if LAYOUT == 1
    return ((b * #{S} + t) * #{D} + d) * #{H} + j;
#else
    return ((t * #{D} + d) * #{B} + b) * #{H} + j;
#endif
}

fn state_index(d: u32, b: u32, j: u32) -> u32 {
#if LAYOUT == 1
    return (b * #{D} + d) * #{H} + j;
#else
    return (d * #{B} + b) * #{H} + j;
#endif
}

#ifdef PROJECT
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
#ifdef HAS_BIAS
@group(0) @binding(#{B_BIAS}) var<storage, read> bias: array<f32>;
#endif
@group(0) @binding(#{B_PROJ}) var<storage, read_write> proj: array<f32>;

fn element_count() -> u32 { return #{D} * #{S} * #{B} * #{GH}; }

fn element(i: u32) {
    let n = i % #{GH};
    let row = i / #{GH};
    let b = row % #{B};
    let t = (row / #{B}) % #{S};
    let d = row / (#{B} * #{S});
#if LAYOUT == 1
    let xrow = (b * #{S} + t) * #{I};
#else
    let xrow = (t * #{B} + b) * #{I};
#endif
    let wrow = (d * #{GH} + n) * #{I};
    var acc = 0.0;
    for (var k = 0u; k < #{I}; k++) {
        acc += x[xrow + k] * w[wrow + k];
    }
#ifdef HAS_BIAS
    let bb = d * 2u * #{GH};
    acc += bias[bb + n];
    if (n < #{RB_END}) {
        acc += bias[bb + #{GH} + n];
    }
#endif
    proj[i] = acc;
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

#ifdef RECUR
@group(0) @binding(0) var<storage, read> proj: array<f32>;
@group(0) @binding(1) var<storage, read> r: array<f32>;
#ifdef LINEAR_BEFORE_RESET
@group(0) @binding(#{B_BIAS}) var<storage, read> bias: array<f32>;
#endif
#ifdef HAS_LENS
@group(0) @binding(#{B_LENS}) var<storage, read> lens: array<i32>;
#endif
#ifdef PEEPHOLE
@group(0) @binding(#{B_P}) var<storage, read> peep: array<f32>;
#endif
@group(0) @binding(#{B_STATE}) var<storage, read_write> state: array<f32>;
#ifdef HAS_Y
@group(0) @binding(#{B_Y}) var<storage, read_write> y: array<f32>;
#endif

var<workgroup> shared_len: u32;

fn act_f(x: f32, d: u32) -> f32 {
    if (d == 0u) {
        return #{ACT_F_0};
    }
    return #{ACT_F_1};
}

#ifdef ACT_G_0
fn act_g(x: f32, d: u32) -> f32 {
    if (d == 0u) {
        return #{ACT_G_0};
    }
    return #{ACT_G_1};
}
#endif

#ifdef ACT_H_0
fn act_h(x: f32, d: u32) -> f32 {
    if (d == 0u) {
        return #{ACT_H_0};
    }
    return #{ACT_H_1};
}
#endif

// The clip attribute bounds every activation's input (onnxruntime clips after adding bias and peepholes).
fn clipped(v: f32) -> f32 {
#ifdef CLIP
    return clamp(v, -#{CLIP}, #{CLIP});
#else
    return v;
#endif
}

// Row `row` of R (all directions' rows stacked) dotted with the H values of `state` from `at`.
fn dot_r(row: u32, at: u32) -> f32 {
    let base = row * #{H};
    var acc = 0.0;
    for (var k = 0u; k < #{H}; k++) {
        acc += state[at + k] * r[base + k];
    }
    return acc;
}

// This entry's sequence length: sequence_lens[b] (checked against [0, S] as onnxruntime checks it), or S.
fn sequence_length(b: u32) -> u32 {
#ifdef HAS_LENS
    let n = lens[b];
    if (n < 0 || u32(n) > #{S}) {
        report_error(ERROR_INDEX_OUT_OF_RANGE, n);
        return u32(clamp(n, 0, i32(#{S})));
    }
    return u32(n);
#else
    return #{S};
#endif
}

@compute @workgroup_size(#{WG})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let g = wid.x + wid.y * nwg.x;
    if (g >= #{D} * #{B}) {
        return;
    }
    let d = g / #{B};
    let b = g % #{B};
    if (lid == 0u) {
        shared_len = sequence_length(b);
    }
    let len = workgroupUniformLoad(&shared_len);
    let rev = #{REVERSE};
    let cells = #{D} * #{B} * #{H};
    let h_at = g * #{H};  // this entry's h in state region 0 (c: region 1, r (.) h: region 2)
    var c: array<f32, #{UPT}>;
    var h_new: array<f32, #{UPT}>;
    var z: array<f32, #{UPT}>;
    for (var m = 0u; m < #{UPT}; m++) {
        let j = lid + m * #{WG};
        c[m] = 0.0;
        if (j < #{H}) {
#ifdef INIT_STATE
            c[m] = state[cells + h_at + j];
#else
            state[h_at + j] = 0.0;
#endif
        }
    }
    storageBarrier();
    for (var s = 0u; s < len; s++) {
        let t = select(s, len - 1u - s, rev);
        let p_at = ((d * #{S} + t) * #{B} + b) * #{GH};
        let r_row = d * #{GH};
        for (var m = 0u; m < #{UPT}; m++) {
            let j = lid + m * #{WG};
            if (j >= #{H}) {
                continue;
            }
#if CELL == LSTM
            var gi = proj[p_at + j] + dot_r(r_row + j, h_at);
            var go = proj[p_at + #{H} + j] + dot_r(r_row + #{H} + j, h_at);
            var gf = proj[p_at + 2u * #{H} + j] + dot_r(r_row + 2u * #{H} + j, h_at);
            let gc = proj[p_at + 3u * #{H} + j] + dot_r(r_row + 3u * #{H} + j, h_at);
#ifdef PEEPHOLE
            let p_row = d * 3u * #{H};
            gi += peep[p_row + j] * c[m];
            gf += peep[p_row + 2u * #{H} + j] * c[m];
#endif
            let ig = act_f(clipped(gi), d);
#ifdef INPUT_FORGET
            let fg = 1.0 - ig;  // onnxruntime couples the gates after the input gate's activation
#else
            let fg = act_f(clipped(gf), d);
#endif
            let cell = fg * c[m] + ig * act_g(clipped(gc), d);
#ifdef PEEPHOLE
            go += peep[p_row + #{H} + j] * cell;  // the output gate's peephole sees the new cell
#endif
            c[m] = cell;
            h_new[m] = act_f(clipped(go), d) * act_h(cell, d);
#endif
#if CELL == GRU
            z[m] = act_f(clipped(proj[p_at + j] + dot_r(r_row + j, h_at)), d);
            let rg = act_f(clipped(proj[p_at + #{H} + j] + dot_r(r_row + #{H} + j, h_at)), d);
#ifdef LINEAR_BEFORE_RESET
            let hr = dot_r(r_row + 2u * #{H} + j, h_at) + bias[d * 2u * #{GH} + #{GH} + 2u * #{H} + j];
            let cand = act_g(clipped(proj[p_at + 2u * #{H} + j] + rg * hr), d);
            h_new[m] = (1.0 - z[m]) * cand + z[m] * state[h_at + j];
#else
            state[2u * cells + h_at + j] = rg * state[h_at + j];
#endif
#endif
#if CELL == RNN
            h_new[m] = act_f(clipped(proj[p_at + j] + dot_r(r_row + j, h_at)), d);
#endif
        }
#if CELL == GRU
#ifndef LINEAR_BEFORE_RESET
        storageBarrier();  // every r (.) h written before any candidate reads it
        for (var m = 0u; m < #{UPT}; m++) {
            let j = lid + m * #{WG};
            if (j < #{H}) {
                let row = r_row + 2u * #{H} + j;
                let cand = act_g(clipped(proj[p_at + 2u * #{H} + j] + dot_r(row, 2u * cells + h_at)), d);
                h_new[m] = (1.0 - z[m]) * cand + z[m] * state[h_at + j];
            }
        }
#endif
#endif
        storageBarrier();  // every read of the previous h done
        for (var m = 0u; m < #{UPT}; m++) {
            let j = lid + m * #{WG};
            if (j < #{H}) {
                state[h_at + j] = h_new[m];
#ifdef HAS_Y
                y[y_index(t, d, b, j)] = h_new[m];
#endif
            }
        }
        storageBarrier();  // the new h visible to the next step
    }
    for (var m = 0u; m < #{UPT}; m++) {
        let j = lid + m * #{WG};
        if (j >= #{H}) {
            continue;
        }
#ifdef HAS_Y
        for (var t = len; t < #{S}; t++) {
            y[y_index(t, d, b, j)] = 0.0;
        }
#endif
        if (len == 0u) {
            state[h_at + j] = 0.0;
            c[m] = 0.0;
        }
        state[cells + h_at + j] = c[m];
    }
}
#endif
