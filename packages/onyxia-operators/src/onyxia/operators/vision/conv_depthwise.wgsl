// Depthwise Conv (one input channel per group): each output channel m reads only input channel m / MG, so
// there is no reduction over channels to share between lanes. One invocation computes 4 neighbouring outputs of
// one output row of channel m (the workgroup's y): per (kd, kh) it loads the SPAN input columns those 4 read once
// and shares them across the kw taps, skipping window rows that lie in the padding; the weights depend on the
// workgroup only, so with SUBGROUP_W lane 0 loads each and subgroupBroadcast shares it (lavapipe loads lane by
// lane whatever the address), and a window row is then skipped only when no lane of the subgroup needs it.
// INTEGER (ConvInteger, QLinearConv) sums exactly in i32: x and w lose their zero points as they are loaded (a
// padded tap then reads 0, as onnxruntime pads x with x_zp), onyxia::conv_integer_epilogue replaces
// onyxia::conv_epilogue.
// Bindings: 0 in_x, 1 in_w (the graph's [M, 1, KD, KH, KW]), then the epilogue module's at their BIND_* defs.
// Defs: X_T, W_T, F16, INTEGER, the epilogue module's, LANES, SUBGROUP_W (flag).
// Dims (literals when static, immediates when symbolic: the spatial ones of an image whose size is open): C, M, MG,
//       OWQ (= ceil(OW / 4)), QUADS (= OD * OH * OWQ), BLOCKS (= ceil(QUADS / LANES)), P (= OD * OH * OW),
//       WORKGROUPS (= BLOCKS * M * N) and the volume (geometry.py).
// Dispatch: WORKGROUPS, linear (folded into y by the runtime past the per-dimension limit; the index is
//       wid.x + wid.y * nwg.x), so the grid fits any image.
#ifdef F16
enable f16;
#endif
#ifdef INTEGER
#import onyxia::conv_integer_epilogue
alias acc_t = i32;
#else
#import onyxia::conv_epilogue
alias acc_t = f32;
#endif

@group(0) @binding(0) var<storage, read> in_x: array<#{X_T}>;
@group(0) @binding(1) var<storage, read> in_w: array<#{W_T}>;

const SPAN: u32 = 3u * #{SW} + (#{KW} - 1u) * #{DW} + 1u;  // input columns of 4 outputs
var<private> subgroup_lane: u32;  // this invocation's lane in its subgroup (SUBGROUP_W)

// w[i], the same for every lane: with SUBGROUP_W one lane loads it and the subgroup shares it.
fn w_at(i: u32) -> acc_t {
#ifdef SUBGROUP_W
    var v = acc_t(0);
    if (subgroup_lane == 0u) {
        v = acc_t(in_w[i]);
    }
    return subgroupBroadcast(v, 0u);
#else
    return acc_t(in_w[i]);
#endif
}

// Whether some lane that shares the weight loads needs this window row (every lane's own answer without them).
fn any_inside(inside: bool) -> bool {
#ifdef SUBGROUP_W
    return subgroupAny(inside);
#else
    return inside;
#endif
}

@compute @workgroup_size(#{LANES})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
#ifdef SUBGROUP_W
    @builtin(subgroup_invocation_id) sid: u32,
#endif
) {
#ifdef SUBGROUP_W
    subgroup_lane = sid;
#endif
    let index = wid.x + wid.y * nwg.x;  // the linear grid (BLOCKS, M, N), x fastest
    if (index >= #{WORKGROUPS}) {
        return;  // past the grid: the runtime rounds a folded one up
    }
    let plane = index / #{BLOCKS};  // (n, m)
    let quad = (index - plane * #{BLOCKS}) * #{LANES}u + lid.x;
    let m = plane % #{M};
    let n = plane / #{M};
    let qc = min(quad, #{QUADS} - 1u);
    let rest = qc / #{OWQ};
    let ow0 = (qc - rest * #{OWQ}) * 4u;
    let od = select(rest / #{OH}, 0u, #{OD} == 1u);  // a 2-D conv (OD 1) divides nothing here
    let oh = rest - od * #{OH};
    let volume = (n * #{C} + m / #{MG}) * #{D};
    let iw0 = i32(ow0 * #{SW}) - i32(#{PW});
#ifdef INTEGER
    let zx = x_zero();
    let zw = w_zero(m);
#else
    let zx = 0.0;
    let zw = 0.0;
#endif
    var acc = vec4<acc_t>(0);
    for (var kd = 0u; kd < #{KD}; kd++) {
        let id = i32(od * #{SD} + kd * #{DD}) - i32(#{PD});
        let d_inside = id >= 0 && id < i32(#{D});
        for (var kh = 0u; kh < #{KH}; kh++) {
            let ih = i32(oh * #{SH} + kh * #{DH}) - i32(#{PH});
            let inside = d_inside && ih >= 0 && ih < i32(#{H});
            if (!any_inside(inside)) {
                continue;  // a padding row adds nothing; its loads are skipped (most of a 5 x 5 window on a 2-row map)
            }
            let row = ((volume + u32(clamp(id, 0, i32(#{D}) - 1))) * #{H} + u32(clamp(ih, 0, i32(#{H}) - 1))) * #{W};
            var xs: array<acc_t, SPAN>;
            for (var s = 0u; s < SPAN; s++) {
                let iw = iw0 + i32(s);
                let ok = inside && iw >= 0 && iw < i32(#{W});
                xs[s] = select(acc_t(0), acc_t(in_x[row + u32(clamp(iw, 0, i32(#{W}) - 1))]) - zx, ok);
            }
            let k0 = ((m * #{KD} + kd) * #{KH} + kh) * #{KW};
            for (var kw = 0u; kw < #{KW}; kw++) {
                let wv = w_at(k0 + kw) - zw;
                let t = kw * #{DW};
                acc += vec4<acc_t>(xs[t], xs[t + #{SW}], xs[t + 2u * #{SW}], xs[t + 3u * #{SW}]) * wv;
            }
        }
    }
    if (quad >= #{QUADS}) {
        return;
    }
    let b = bias(m);
    let base = (n * #{M} + m) * #{P} + (od * #{OH} + oh) * #{OW} + ow0;
    for (var j = 0u; j < 4u; j++) {
        if (ow0 + j < #{OW}) {
            store(base + j, acc[j], b);
        }
    }
}
