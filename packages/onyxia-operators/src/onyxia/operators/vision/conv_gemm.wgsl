// Conv as an implicit GEMM: y[m, pixel] = sum over k = (c, kd, kh, kw) of w[m, k] * x[c, tap(pixel, k)].
// A workgroup of LANES invocations covers PIX output pixels; each lane owns 4 * VPL output channels of one group
// and keeps a PIX x 4 * VPL register tile, so each loaded value feeds many sums. This is what matters on lavapipe:
// its loads run one lane at a time (a bounds-checked scalar load per lane and component), ~100x the cost of an
// 8-lane FMA, so the kernel is shaped to load as little per FMA as it can. The x reads depend on the workgroup
// only (the same for every lane), the weights are one vec4 per lane, channel quad and tap from the pre-packed W.
// ROWS takes its PIX pixels from one output row and loads, per (c, kd, kh), the SPAN input columns they read
// once, shared by the kw taps; POINTWISE (1 x 1, stride 1, no pads) takes PIX consecutive pixels of the
// flattened image, read as vec4s with X_VEC4.
// PIXEL_LANES (convs with few output channels per group) turns the lanes the other way: each lane owns PIX pixels
// of its own and all the group's channels (VPL = MGQ), so the weights are the same for every lane (loaded by one,
// shared by subgroupBroadcast) and x is each lane's own; a workgroup covers LANES * PIX pixels. With lanes over
// channels, an 8-channel group would fill 2 of 8 lanes, and lavapipe runs the idle ones' FMAs all the same.
// INTEGER (ConvInteger, QLinearConv) sums exactly in i32 instead of f32, and each operand loses its zero point
// as it is loaded: x's once per workgroup's value, shared by all its sums (a padded tap then reads 0, as
// onnxruntime pads x with x_zp), w's (per tensor or per channel, held per lane) from each unpacked channel quad.
// Its packed weights hold a quad's 4 bytes in one u32: a lane's weight loads, which dominate the GEMM's loads, are
// a quarter of a vec4's. onyxia::conv_integer_epilogue replaces onyxia::conv_epilogue (bias, requantization).
// Bindings: 0 in_x, 1 in_w (packed, below), then the epilogue module's at their BIND_* defs.
// Weights: [G][KG][MGQ] of vec4<W_T> (INTEGER: of u32, channel 4i + b in byte b): KG = CG * KD * KH * KW taps
//       per group in (c, kd, kh, kw) order, MGQ = the group's output channels over 4, rounded up to whole lanes
//       (the channels past MG zero).
// Defs: X_T, W_T (storage types; INTEGER: W's, its signedness read from it), F16, INTEGER, the epilogue
//       module's, LANES, PIX, VPL, SUBGROUP_X (x loaded by lane 0, shared by subgroupBroadcast), PIXEL_LANES
//       (above; the weights shared as SUBGROUP_X shares x), SUBGROUPS (either of them), ROWS | POINTWISE, X_VEC4 (POINTWISE, P % 4 == 0 and PIX % 4 == 0: x is read four pixels at a time);
//       the unrolled loops' items PIXELS (0 .. PIX - 1), QUADS_OF_PIX (0 .. PIX / 4 - 1), SPANS (0 .. SPAN - 1),
//       KWS (0 .. KW - 1), VECS (0 .. VPL - 1)
// Dims (literals when static, immediates when symbolic: the spatial ones of an image whose size is open): G, C, M,
//       CG, MG, MGQ, KG, OWT (pixel tiles per output row), TILES (pixel tiles per image: of PIX pixels, PIXEL_LANES
//       of LANES * PIX), P (= OD * OH * OW), WORKGROUPS, and the volume (geometry.py).
// Dispatch: WORKGROUPS = G * ceil(MGQ / (VPL * LANES)) * TILES * N, linear (folded into y by the runtime past the
//       per-dimension limit; the index is wid.x + wid.y * nwg.x), so the grid fits any image.
#ifdef F16
enable f16;
#endif
#ifdef INTEGER
#import onyxia::conv_integer_epilogue
alias acc_t = i32;
var<private> zero_x: i32;  // x's zero point, read once per invocation
var<private> zero_w: array<vec4<i32>, #{VPL}>;  // the weight zero points of this lane's channel quads

fn summand(v: #{X_T}) -> i32 {
    return i32(v) - zero_x;
}

fn summand4(v: vec4<#{X_T}>) -> vec4<i32> {
    return vec4<i32>(v) - vec4<i32>(zero_x);
}
#else
#import onyxia::conv_epilogue
alias acc_t = f32;

fn summand(v: #{X_T}) -> f32 {
    return f32(v);
}

fn summand4(v: vec4<#{X_T}>) -> vec4<f32> {
    return vec4<f32>(v);
}
#endif

#ifdef X_VEC4
@group(0) @binding(0) var<storage, read> in_x: array<vec4<#{X_T}>>;
#else
@group(0) @binding(0) var<storage, read> in_x: array<#{X_T}>;
#endif
#ifdef INTEGER
@group(0) @binding(1) var<storage, read> in_w: array<u32>;
#else
@group(0) @binding(1) var<storage, read> in_w: array<vec4<#{W_T}>>;
#endif

const PIX: u32 = #{PIX}u;
const VPL: u32 = #{VPL}u;
const SPAN: u32 = (PIX - 1u) * #{SW} + (#{KW} - 1u) * #{DW} + 1u;  // input columns of one row tile

var<private> subgroup_lane: u32;  // this invocation's lane in its subgroup (SUBGROUPS)

// x[i], the same for every lane. With SUBGROUP_X one lane loads it and the subgroup shares it: lavapipe runs
// every load lane by lane, so 8 lanes loading one address cost 8 loads, while an elected load and a broadcast
// cost about one.
#ifndef X_VEC4
fn x_at(i: u32) -> acc_t {
#ifdef SUBGROUP_X
    var v = acc_t(0);
    if (subgroup_lane == 0u) {
        v = summand(in_x[i]);
    }
    return subgroupBroadcast(v, 0u);
#else
    return summand(in_x[i]);
#endif
}
#else
fn x4_at(i: u32) -> vec4<acc_t> {
#ifdef SUBGROUP_X
    var v = vec4<acc_t>(0);
    if (subgroup_lane == 0u) {
        v = summand4(in_x[i]);
    }
    return subgroupBroadcast(v, 0u);
#else
    return summand4(in_x[i]);
#endif
}
#endif

// The weights of tap k for the lane's channel quad v (q: its first quad); with PIXEL_LANES the same for every
// lane, so one loads them and the subgroup shares them (as x_at does x's)
fn weights(g: u32, k: u32, q: u32, v: u32) -> vec4<acc_t> {
#ifdef PIXEL_LANES
    var quad = vec4<acc_t>(0);
    if (subgroup_lane == 0u) {
        quad = loaded_weights(g, k, q, v);
    }
    return subgroupBroadcast(quad, 0u);
#else
    return loaded_weights(g, k, q, v);
#endif
}

fn loaded_weights(g: u32, k: u32, q: u32, v: u32) -> vec4<acc_t> {
#ifdef INTEGER
    let word = in_w[(g * #{KG} + k) * #{MGQ} + q + v];
#if W_T == i32
    let quad = (vec4<i32>(bitcast<i32>(word)) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u);
#else
    let quad = vec4<i32>((vec4<u32>(word) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(255u));
#endif
    return quad - zero_w[v];
#else
    return vec4<acc_t>(in_w[(g * #{KG} + k) * #{MGQ} + q + v]);
#endif
}

#ifdef POINTWISE
fn product(n: u32, g: u32, q: u32, p0: u32) -> array<vec4<acc_t>, PIX * VPL> {
    var acc: array<vec4<acc_t>, PIX * VPL>;
    for (var c = 0u; c < #{CG}; c++) {
        let base = (n * #{C} + g * #{CG} + c) * #{P};
#for v in #{VECS}
        let w#{v} = weights(g, c, q, #{v}u);
#endfor
#ifdef X_VEC4
#for u in #{QUADS_OF_PIX}
        let x#{u} = x4_at((base + min(p0 + #{u}u * 4u, #{P} - 4u)) / 4u);
#for v in #{VECS}
        acc[(#{u} * 4) * #{VPL} + #{v}] += x#{u}.x * w#{v};
        acc[(#{u} * 4 + 1) * #{VPL} + #{v}] += x#{u}.y * w#{v};
        acc[(#{u} * 4 + 2) * #{VPL} + #{v}] += x#{u}.z * w#{v};
        acc[(#{u} * 4 + 3) * #{VPL} + #{v}] += x#{u}.w * w#{v};
#endfor
#endfor
#else
#for j in #{PIXELS}
        let x#{j} = x_at(base + min(p0 + #{j}u, #{P} - 1u));
#for v in #{VECS}
        acc[#{j} * #{VPL} + #{v}] += x#{j} * w#{v};
#endfor
#endfor
#endif
    }
    return acc;
}
#else
fn product(n: u32, g: u32, q: u32, od: u32, oh: u32, ow0: u32) -> array<vec4<acc_t>, PIX * VPL> {
    var acc: array<vec4<acc_t>, PIX * VPL>;
    let iw0 = i32(ow0 * #{SW}) - i32(#{PW});
    for (var c = 0u; c < #{CG}; c++) {
        let volume = (n * #{C} + g * #{CG} + c) * #{D};
        for (var kd = 0u; kd < #{KD}; kd++) {
            let id = i32(od * #{SD} + kd * #{DD}) - i32(#{PD});
            if (id < 0 || id >= i32(#{D})) {
                continue;
            }
            for (var kh = 0u; kh < #{KH}; kh++) {
                let ih = i32(oh * #{SH} + kh * #{DH}) - i32(#{PH});
                if (ih < 0 || ih >= i32(#{H})) {
                    continue;
                }
                let row = ((volume + u32(id)) * #{H} + u32(ih)) * #{W};
                var xs: array<acc_t, SPAN>;
#for s in #{SPANS}
                let iw#{s} = iw0 + #{s};
                xs[#{s}] = select(acc_t(0), x_at(row + u32(clamp(iw#{s}, 0, i32(#{W}) - 1))), iw#{s} >= 0 && iw#{s} < i32(#{W}));
#endfor
                let k0 = ((c * #{KD} + kd) * #{KH} + kh) * #{KW};
#for kw in #{KWS}
#for v in #{VECS}
                let w#{kw}_#{v} = weights(g, k0 + #{kw}u, q, #{v}u);
#endfor
#for j in #{PIXELS}
#for v in #{VECS}
                acc[#{j} * #{VPL} + #{v}] += xs[#{j} * #{SW} + #{kw} * #{DW}] * w#{kw}_#{v};
#endfor
#endfor
#endfor
            }
        }
    }
    return acc;
}
#endif

@compute @workgroup_size(#{LANES})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
#ifdef SUBGROUPS
    @builtin(subgroup_invocation_id) sid: u32,
#endif
) {
#ifdef SUBGROUPS
    subgroup_lane = sid;
#endif
    let index = wid.x + wid.y * nwg.x;  // the linear grid (G * blocks, TILES, N), x fastest
    if (index >= #{WORKGROUPS}) {
        return;  // past the grid: the runtime rounds a folded one up
    }
    let blocks = (#{MGQ} / VPL + #{LANES}u - 1u) / #{LANES}u;  // workgroups per group
    let column = index % (#{G} * blocks);
    let tile = (index / (#{G} * blocks)) % #{TILES};
    let n = index / (#{G} * blocks * #{TILES});
    let g = column / blocks;
#ifdef PIXEL_LANES
    let q = 0u;  // every lane all the group's channels (blocks = 1), its own pixels
    let strips = #{LANES}u;  // a workgroup's tile of pixels is LANES strips of PIX, this lane's the one at lid.x
    let strip = lid.x;
#else
    let lane = (column % blocks) * #{LANES}u + lid.x;
    let q = min(lane, #{MGQ} / VPL - 1u) * VPL;  // this lane's first channel quad in the group
    if (lane * VPL >= #{MGQ}) {
        return;  // past the group's channels: inactive lanes skip their share of every lane-by-lane load
    }
    let strips = 1u;
    let strip = 0u;
#endif
#ifdef INTEGER
    zero_x = x_zero();
    for (var v = 0u; v < VPL; v++) {
        let m = g * #{MG} + min((q + v) * 4u, #{MG} - 1u);  // channels past MG: any zero point, never stored
        let last = #{M} - 1u;
        zero_w[v] = vec4<i32>(w_zero(m), w_zero(min(m + 1u, last)), w_zero(min(m + 2u, last)), w_zero(min(m + 3u, last)));
    }
#endif
#ifdef POINTWISE
    let p0 = (tile * strips + strip) * PIX;
    let acc = product(n, g, q, p0);
#else
    let rest = tile / #{OWT};
    let owt = tile - rest * #{OWT};
    let od = select(rest / #{OH}, 0u, #{OD} == 1u);  // a 2-D conv (OD 1) divides nothing here
    let oh = rest - od * #{OH};
    let ow0 = (owt * strips + strip) * PIX;
    let acc = product(n, g, q, od, oh, ow0);
    let p0 = (od * #{OH} + oh) * #{OW} + ow0;
#endif
    for (var r = 0u; r < 4u * VPL; r++) {
        let mg = q * 4u + r;
        if (mg >= #{MG}) {
            break;
        }
        let m = g * #{MG} + mg;
        let b = bias(m);
        let out_base = (n * #{M} + m) * #{P} + p0;
#for j in #{PIXELS}
#ifdef POINTWISE
        if (p0 + #{j}u < #{P}) {
#else
        if (ow0 + #{j}u < #{OW}) {
#endif
            store(out_base + #{j}u, acc[#{j} * #{VPL} + r / 4u][r % 4u], b);
        }
#endfor
    }
}
