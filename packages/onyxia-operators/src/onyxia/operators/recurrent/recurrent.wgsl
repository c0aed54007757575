// The time loop of LSTM, GRU and RNN (recurrent.py; the steps around it are recurrent_io.wgsl):
// one workgroup per (direction, tile of BT batch entries) walks the steps inside the shader. Each
// invocation owns the quads of units q = lid, lid + WG, ...; per step it reads the tile's previous h
// from the state buffer, computes its units' gates from proj (X . W^T + biases, every step
// precomputed) and the packed R (each R read serving the whole tile), and after a storage barrier
// (every read of the old h done) writes the new h; a second barrier makes it visible for the next
// step. The loop runs to the tile's longest sequence length (read once, made uniform), an entry
// whose sequence is over keeping its state, so a symbolic seq_length needs no other plan, and no step
// is read back. The cell state c never leaves the invocation (a private array). Steps past an
// entry's length leave Y zero; a zero length leaves zero final states (both as onnxruntime does).
//
// State buffer (f32): [3][D * B * H]: region 0 h, region 1 c (initial, then final), region 2 r (.) h
//   (GRU without linear_before_reset: the reset hidden state the candidate's product reads).
// Bindings: 0 proj ([D, S, B, G, HQ] vec4), 1 rt (packed R: [D, H, G, HQ] vec4), then B_BIAS bias (GRU
//   with LINEAR_BEFORE_RESET), B_LENS lens (HAS_LENS), B_P peepholes (PEEPHOLE), then B_STATE state,
//   B_Y y (HAS_Y), ERRORS_BINDING (HAS_LENS).
// Defs: RECUR; CELL (LSTM, GRU or RNN); LAYOUT (0 or 1); WG, UPQ, BT, UPQ_BT (workgroup size, quads
//   per invocation, batch entries per tile, their product); REVERSE (a bool expression of d); CLIP (a literal; absent: no clip); ACT_F_0/1,
//   ACT_G_0/1, ACT_H_0/1 (f32 expressions of x per direction; G for LSTM and GRU, H for LSTM);
//   INPUT_FORGET, LINEAR_BEFORE_RESET, INIT_STATE (PREP wrote the initial states), HAS_* as above.
// Dims: S (seq_length), B (batch), TILES (ceil(B / BT)), D (directions), H (hidden), G (gates),
//   HQ (ceil(H / 4)), GH (G * H).
#ifdef HAS_LENS
#import onyxia::errors
#endif

// Y / Y_h / initial_h element of (t, d, b, j): layout 0 is [S, D, B, H] / [D, B, H], layout 1 batch first.
fn y_index(t: u32, d: u32, b: u32, j: u32) -> u32 {
#if LAYOUT == 1
    return ((b * #{S} + t) * #{D} + d) * #{H} + j;
#else
    return ((t * #{D} + d) * #{B} + b) * #{H} + j;
#endif
}

@group(0) @binding(0) var<storage, read> proj: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> rt: array<vec4<f32>>;
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

var<workgroup> tile_lens: array<u32, #{BT}>;
var<workgroup> tile_steps: u32;

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
fn clipped(v: vec4<f32>) -> vec4<f32> {
#ifdef CLIP
    return clamp(v, vec4<f32>(-#{CLIP}), vec4<f32>(#{CLIP}));
#else
    return v;
#endif
}

fn f4(v: vec4<f32>, d: u32) -> vec4<f32> {
    let u = clipped(v);
    return vec4<f32>(act_f(u.x, d), act_f(u.y, d), act_f(u.z, d), act_f(u.w, d));
}

#ifdef ACT_G_0
fn g4(v: vec4<f32>, d: u32) -> vec4<f32> {
    let u = clipped(v);
    return vec4<f32>(act_g(u.x, d), act_g(u.y, d), act_g(u.z, d), act_g(u.w, d));
}
#endif

#ifdef ACT_H_0
fn h4(v: vec4<f32>, d: u32) -> vec4<f32> {  // LSTM's h applies to the cell, never clipped
    return vec4<f32>(act_h(v.x, d), act_h(v.y, d), act_h(v.z, d), act_h(v.w, d));
}
#endif

// Four consecutive f32 of `state` from `at` (units 4q .. 4q + 3; past H: 0).
fn state4(at: u32, j: u32) -> vec4<f32> {
    var v = vec4<f32>(0.0);
    for (var e = 0u; e < 4u; e++) {
        if (j + e < #{H}) {
            v[e] = state[at + j + e];
        }
    }
    return v;
}

struct Gates {
    a: vec4<f32>,
    b: vec4<f32>,
    c: vec4<f32>,
    d: vec4<f32>,
}

// Batch entry e of the tile starting at b0 (entries past B read the last one: computed, never stored).
fn entry(b0: u32, e: u32) -> u32 {
    return min(b0 + e, #{B} - 1u);
}

// For each entry of the tile at b0: gates first .. first + count - 1 (count <= 4, a literal at every
// call) of quad q of direction d, their R rows dotted with the entry's H values in state region
// `region`. One pass over k: each packed R vec4 is read once for all the tile's entries and gates.
fn recur_dot(d: u32, q: u32, region: u32, b0: u32, first: u32, count: u32) -> array<Gates, #{BT}> {
    var acc: array<Gates, #{BT}>;  // zero-initialised
    let stride = #{G} * #{HQ};
    var base = d * #{H} * stride + first * #{HQ} + q;
    for (var k = 0u; k < #{H}; k++) {
        let r0 = rt[base];
        var r1 = vec4<f32>(0.0);
        var r2 = vec4<f32>(0.0);
        var r3 = vec4<f32>(0.0);
        if (count > 1u) {
            r1 = rt[base + #{HQ}];
        }
        if (count > 2u) {
            r2 = rt[base + 2u * #{HQ}];
        }
        if (count > 3u) {
            r3 = rt[base + 3u * #{HQ}];
        }
        for (var e = 0u; e < #{BT}; e++) {
            let hk = state[region + (d * #{B} + entry(b0, e)) * #{H} + k];
            acc[e].a += hk * r0;
            acc[e].b += hk * r1;
            acc[e].c += hk * r2;
            acc[e].d += hk * r3;
        }
        base += stride;
    }
    return acc;
}

#ifdef PEEPHOLE
fn peep4(d: u32, gate: u32, j: u32) -> vec4<f32> {
    var v = vec4<f32>(0.0);
    for (var e = 0u; e < 4u; e++) {
        if (j + e < #{H}) {
            v[e] = peep[(d * 3u + gate) * #{H} + j + e];
        }
    }
    return v;
}
#endif

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
    if (g >= #{D} * #{TILES}) {
        return;
    }
    let d = g / #{TILES};
    let b0 = (g % #{TILES}) * #{BT};
    if (lid == 0u) {
        var most = 0u;
        for (var e = 0u; e < #{BT}; e++) {
            var n = 0u;  // entries past B take no step
            if (b0 + e < #{B}) {
                n = sequence_length(b0 + e);
            }
            tile_lens[e] = n;
            most = max(most, n);
        }
        tile_steps = most;
    }
    let steps = workgroupUniformLoad(&tile_steps);  // its barrier also publishes tile_lens
    var lens: array<u32, #{BT}>;
    for (var e = 0u; e < #{BT}; e++) {
        lens[e] = tile_lens[e];
    }
    let rev = #{REVERSE};
    let cells = #{D} * #{B} * #{H};
    var c: array<vec4<f32>, #{UPQ_BT}>;  // [quad slot m][entry e]
    var h_new: array<vec4<f32>, #{UPQ_BT}>;
    var z: array<vec4<f32>, #{UPQ_BT}>;
    for (var m = 0u; m < #{UPQ}; m++) {
        let q = lid + m * #{WG};
        for (var e = 0u; e < #{BT}; e++) {
            let at = (d * #{B} + b0 + e) * #{H};
            if (q >= #{HQ} || b0 + e >= #{B}) {
                continue;
            }
#ifdef INIT_STATE
            c[m * #{BT} + e] = state4(cells + at, 4u * q);
#else
            for (var u = 0u; u < 4u; u++) {
                if (4u * q + u < #{H}) {
                    state[at + 4u * q + u] = 0.0;
                }
            }
#endif
        }
    }
    storageBarrier();
    for (var s = 0u; s < steps; s++) {
        for (var m = 0u; m < #{UPQ}; m++) {
            let q = lid + m * #{WG};
            if (q >= #{HQ}) {
                continue;
            }
#if CELL == LSTM
            let rh = recur_dot(d, q, 0u, b0, 0u, 4u);
#endif
#if CELL == GRU
#ifdef LINEAR_BEFORE_RESET
            let rh = recur_dot(d, q, 0u, b0, 0u, 3u);
#else
            let rh = recur_dot(d, q, 0u, b0, 0u, 2u);
#endif
#endif
#if CELL == RNN
            let rh = recur_dot(d, q, 0u, b0, 0u, 1u);
#endif
            for (var e = 0u; e < #{BT}; e++) {
                if (s >= lens[e]) {
                    continue;  // this entry's sequence is over (or the entry is padding)
                }
                let i = m * #{BT} + e;
                let b = b0 + e;
                let at = (d * #{B} + b) * #{H};
                let t = select(s, lens[e] - 1u - s, rev);
                let p_at = ((d * #{S} + t) * #{B} + b) * #{G} * #{HQ};
#if CELL == LSTM
                var gi = proj[p_at + q] + rh[e].a;
                var go = proj[p_at + #{HQ} + q] + rh[e].b;
                var gf = proj[p_at + 2u * #{HQ} + q] + rh[e].c;
                let gc = proj[p_at + 3u * #{HQ} + q] + rh[e].d;
#ifdef PEEPHOLE
                gi += peep4(d, 0u, 4u * q) * c[i];
                gf += peep4(d, 2u, 4u * q) * c[i];
#endif
                let ig = f4(gi, d);
#ifdef INPUT_FORGET
                let fg = 1.0 - ig;  // onnxruntime couples the gates after the input gate's activation
#else
                let fg = f4(gf, d);
#endif
                let cell = fg * c[i] + ig * g4(gc, d);
#ifdef PEEPHOLE
                go += peep4(d, 1u, 4u * q) * cell;  // the output gate's peephole sees the new cell
#endif
                c[i] = cell;
                h_new[i] = f4(go, d) * h4(cell, d);
#endif
#if CELL == GRU
                z[i] = f4(proj[p_at + q] + rh[e].a, d);
                let rg = f4(proj[p_at + #{HQ} + q] + rh[e].b, d);
                let h_old = state4(at, 4u * q);
#ifdef LINEAR_BEFORE_RESET
                var rb = vec4<f32>(0.0);
                for (var u = 0u; u < 4u; u++) {
                    if (4u * q + u < #{H}) {
                        rb[u] = bias[d * 2u * #{GH} + #{GH} + 2u * #{H} + 4u * q + u];
                    }
                }
                let cand = g4(proj[p_at + 2u * #{HQ} + q] + rg * (rh[e].c + rb), d);
                h_new[i] = (1.0 - z[i]) * cand + z[i] * h_old;
#else
                let reset = rg * h_old;
                for (var u = 0u; u < 4u; u++) {
                    if (4u * q + u < #{H}) {
                        state[2u * cells + at + 4u * q + u] = reset[u];
                    }
                }
#endif
#endif
#if CELL == RNN
                h_new[i] = f4(proj[p_at + q] + rh[e].a, d);
#endif
            }
        }
#if CELL == GRU
#ifndef LINEAR_BEFORE_RESET
        storageBarrier();  // every r (.) h written before any candidate reads it
        for (var m = 0u; m < #{UPQ}; m++) {
            let q = lid + m * #{WG};
            if (q >= #{HQ}) {
                continue;
            }
            let reset = recur_dot(d, q, 2u * cells, b0, 2u, 1u);
            for (var e = 0u; e < #{BT}; e++) {
                if (s >= lens[e]) {
                    continue;
                }
                let i = m * #{BT} + e;
                let b = b0 + e;
                let t = select(s, lens[e] - 1u - s, rev);
                let p_at = ((d * #{S} + t) * #{B} + b) * #{G} * #{HQ};
                let cand = g4(proj[p_at + 2u * #{HQ} + q] + reset[e].a, d);
                h_new[i] = (1.0 - z[i]) * cand + z[i] * state4((d * #{B} + b) * #{H}, 4u * q);
            }
        }
#endif
#endif
        storageBarrier();  // every read of the previous h done
        for (var m = 0u; m < #{UPQ}; m++) {
            let q = lid + m * #{WG};
            for (var e = 0u; e < #{BT}; e++) {
                if (q >= #{HQ} || s >= lens[e]) {
                    continue;
                }
                let b = b0 + e;
                let t = select(s, lens[e] - 1u - s, rev);
                for (var u = 0u; u < 4u; u++) {
                    let j = 4u * q + u;
                    if (j < #{H}) {
                        state[(d * #{B} + b) * #{H} + j] = h_new[m * #{BT} + e][u];
#ifdef HAS_Y
                        y[y_index(t, d, b, j)] = h_new[m * #{BT} + e][u];
#endif
                    }
                }
            }
        }
        storageBarrier();  // the new h visible to the next step
    }
    for (var m = 0u; m < #{UPQ}; m++) {
        let q = lid + m * #{WG};
        for (var e = 0u; e < #{BT}; e++) {
            let b = b0 + e;
            if (q >= #{HQ} || b >= #{B}) {
                continue;
            }
            let at = (d * #{B} + b) * #{H};
            let len = lens[e];
            for (var u = 0u; u < 4u; u++) {
                let j = 4u * q + u;
                if (j >= #{H}) {
                    continue;
                }
#ifdef HAS_Y
                for (var t = len; t < #{S}; t++) {
                    y[y_index(t, d, b, j)] = 0.0;
                }
#endif
                var cell = c[m * #{BT} + e][u];
                if (len == 0u) {
                    state[at + j] = 0.0;
                    cell = 0.0;
                }
                state[cells + at + j] = cell;
            }
        }
    }
}
