// com.microsoft DynamicQuantizeMatMul, com.onyxia DynamicQuantizeMatMulGroup and GatedDynamicQuantizeMatMul:
// y<s> = f32(DynamicQuantizeLinear(a) @ b<s>) * (a_scale * b_scale<s>[n]) [+ bias<s>[n]], the int32 sums exact
// (onyxia::u8_dot) and the float steps onnxruntime's (DynamicQuantizeLinear's, then the MatMulIntegerToFloat
// epilogue of matmul_integer.wgsl), for up to 4 weights b<s> [K, N<s>] of one float a [M, K] in one dispatch, each
// slot over its own column workgroups (onyxia::product_slots). GATED: y0 = act(y<0>) * y<1>, as GatedMatMul.
//
// a's quantization is one scale and zero point for the whole tensor (onyxia::dynamic_quant), so its range is a
// reduction over all M x K values, which one workgroup cannot see unless it reads them all:
//   SELF_REDUCE: while M <= SELF_ROWS (a decode step's row, checked per run when M is symbolic), every workgroup
//     reduces the whole of a itself: a few loads per invocation, and no dispatch before this one;
//   A_PARAMS: otherwise a DynamicQuantizeLinear dispatch (PARAMS_ONLY) before this one wrote scale and zero point.
// Each workgroup then quantizes its row of a into workgroup memory, TILE words (4 k each) at a time, and each
// invocation sums 4 columns of its slot against it.
// Bindings (numbers from the BIND_* defs): a (f32), [with A_PARAMS: a_scale (f32 [1]), a_zp (u32 [1])], per slot
//   b<s>, b_scale<s> (f32, [1] or [N<s>]), [b_zp<s> (B_T) with BZP], [bias<s> (f32 [N<s>]) with BIAS], then
//   y0 [, y1, y2, y3] (f32; y0 only with GATED).
//   b<s>: PACKED_B: a compile-time weight in matmul_integer.wgsl's column panels (vec4<u32>, [N / 4][K4][4], u8
//   form, zero-padded); else B as the graph stores it (B_T, one element per byte).
// Defs: B_T (u32 | i32), B_XOR (0x80u for int8 weights, 0u for uint8), PACKED_B, BZP, BZP_COLUMNS, SCALE_COLUMNS,
//   BIAS, SELF_REDUCE, A_PARAMS (at least one), SELF_ROWS, TILE (words, >= 1), WORKGROUP_SIZE, and
//   onyxia::product_slots' (Y_T f32, OTHER_SLOTS, GATED, ACTIVATION).
// Dims: M, K, K4 (= ceil(K / 4)), N0 .. N3, G1 .. G3.
// Dispatch: (column workgroups of WORKGROUP_SIZE * 4 columns over all slots, or over N0 with GATED, M, 1).
#import onyxia::dynamic_quant::{quant_params, quantize_u8, range_of}
#import onyxia::product_slots
#import onyxia::u8_dot::{U8Sums, u8_accumulate, u8_products}
#ifdef PACKED_B
alias B_WORDS = vec4<u32>;
#else
alias B_WORDS = #{B_T};
#endif

@group(0) @binding(#{BIND_A}) var<storage, read> a: array<f32>;
#ifdef A_PARAMS
@group(0) @binding(#{BIND_A_SCALE}) var<storage, read> a_scale: array<f32>;
@group(0) @binding(#{BIND_A_ZP}) var<storage, read> a_zp: array<u32>;
#endif
#for s in 0 #{OTHER_SLOTS}
@group(0) @binding(#{BIND_B#{s}}) var<storage, read> b#{s}: array<B_WORDS>;
@group(0) @binding(#{BIND_SCALE#{s}}) var<storage, read> b_scale#{s}: array<f32>;
#ifdef BZP
@group(0) @binding(#{BIND_ZP#{s}}) var<storage, read> b_zp#{s}: array<#{B_T}>;
#endif
#ifdef BIAS
@group(0) @binding(#{BIND_BIAS#{s}}) var<storage, read> bias#{s}: array<f32>;
#endif
#endfor

const WG: u32 = #{WORKGROUP_SIZE}u;
const TILE: u32 = #{TILE}u;
var<workgroup> qa: array<u32, TILE>;  // words w0 .. w0 + TILE - 1 of the workgroup's quantized row (u8 form)

fn b_at(slot: u32, i: u32) -> B_WORDS {
    var v: B_WORDS;
    switch slot {
#for s in #{OTHER_SLOTS}
        case #{s}u: { v = b#{s}[i]; }
#endfor
        default: { v = b0[i]; }
    }
    return v;
}

// per-column inputs are read at min(n, N - 1): columns past N are computed (4 per invocation) but never stored
fn column(slot: u32, n: u32) -> u32 {
    return min(n, slot_n(slot) - 1u);
}

fn scale_at(slot: u32, n: u32) -> f32 {
#ifdef SCALE_COLUMNS
    let i = column(slot, n);
#else
    let i = 0u;
#endif
    var v = 0.0;
    switch slot {
#for s in #{OTHER_SLOTS}
        case #{s}u: { v = b_scale#{s}[i]; }
#endfor
        default: { v = b_scale0[i]; }
    }
    return v;
}

// b's zero point of column n in u8 form
fn zero_at(slot: u32, n: u32) -> u32 {
#ifdef BZP
#ifdef BZP_COLUMNS
    let i = column(slot, n);
#else
    let i = 0u;
#endif
    var v: #{B_T};
    switch slot {
#for s in #{OTHER_SLOTS}
        case #{s}u: { v = b_zp#{s}[i]; }
#endfor
        default: { v = b_zp0[i]; }
    }
    return (u32(v) ^ #{B_XOR}) & 0xffu;
#else
    return #{B_XOR};
#endif
}

#ifdef BIAS
fn bias_at(slot: u32, n: u32) -> f32 {
    let i = column(slot, n);
    var v = 0.0;
    switch slot {
#for s in #{OTHER_SLOTS}
        case #{s}u: { v = bias#{s}[i]; }
#endfor
        default: { v = bias0[i]; }
    }
    return v;
}
#endif

// word w of columns n0 .. n0 + 3 of b<slot> (columns past N read as zero bytes; their sums are never stored)
fn b_words(slot: u32, n0: u32, w: u32) -> vec4<u32> {
#ifdef PACKED_B
    return b_at(slot, (n0 / 4u) * #{K4} + w);
#else
    let n = slot_n(slot);
    var words = vec4<u32>(0u);
    for (var c = 0u; c < 4u; c++) {
        for (var i = 0u; i < 4u; i++) {
            let k = 4u * w + i;
            if (n0 + c < n && k < #{K}) {
                words[c] |= ((u32(b_at(slot, k * n + n0 + c)) ^ #{B_XOR}) & 0xffu) << (8u * i);
            }
        }
    }
    return words;
#endif
}

// a's (scale, zero point), the same in every workgroup; called by every invocation (SELF_REDUCE has barriers)
fn a_params(lid: u32) -> vec2<f32> {
#ifdef SELF_REDUCE
#ifdef A_PARAMS
    if (#{M} > #{SELF_ROWS}u) {  // uniform: M is a def or an immediate
        return vec2<f32>(a_scale[0], f32(a_zp[0]));
    }
#endif
    var lo = 0.0;  // the range always includes 0
    var hi = 0.0;
    for (var i = lid; i < #{M} * #{K}; i += WG) {
        lo = min(lo, a[i]);
        hi = max(hi, a[i]);
    }
    return quant_params(range_of(lid, lo, hi));
#else
    return vec2<f32>(a_scale[0], f32(a_zp[0]));
#endif
}

// words w0 .. w0 + TILE - 1 of row a_row / K quantized into qa (zero bytes past K)
fn quantize_tile(a_row: u32, w0: u32, lid: u32, p: vec2<f32>) {
    for (var i = lid; i < TILE; i += WG) {
        var word = 0u;
        for (var j = 0u; j < 4u; j++) {
            let k = 4u * (w0 + i) + j;
            if (k < #{K}) {
                word |= quantize_u8(a[a_row + k], p) << (8u * j);
            }
        }
        qa[i] = word;
    }
}

fn accumulate(slot: u32, n0: u32, w0: u32, count: u32, sums: U8Sums) -> U8Sums {
    var s = sums;
    for (var i = 0u; i < count; i++) {
        s = u8_accumulate(s, qa[i], b_words(slot, n0, w0 + i));
    }
    return s;
}

// columns n0 .. n0 + 3 of y<slot> from their sums: the Cast and the Mul by a_scale * b_scale (then + bias)
fn scaled(slot: u32, n0: u32, sums: U8Sums, p: vec2<f32>) -> vec4<f32> {
    let zb = vec4<u32>(zero_at(slot, n0), zero_at(slot, n0 + 1u), zero_at(slot, n0 + 2u), zero_at(slot, n0 + 3u));
    let products = u8_products(sums, u32(p.y), zb, #{K});
    var y: vec4<f32>;
    for (var c = 0u; c < 4u; c++) {
#ifdef BIAS
        y[c] = f32(products[c]) * (p.x * scale_at(slot, n0 + c)) + bias_at(slot, n0 + c);
#else
        y[c] = f32(products[c]) * (p.x * scale_at(slot, n0 + c));
#endif
    }
    return y;
}

// Row `row`, column workgroup `group` of slot `slot` (GATED: of the gate, slot 1 the up projection).
fn run(slot: u32, group: u32, row: u32, lid: u32, p: vec2<f32>) {
    let n = slot_n(slot);
    let n0 = (group * WG + lid) * 4u;
    var sums = U8Sums(vec4<u32>(0u), vec4<u32>(0u), 0u);
#ifdef GATED
    var up = U8Sums(vec4<u32>(0u), vec4<u32>(0u), 0u);
#endif
    for (var w0 = 0u; w0 < #{K4}; w0 += TILE) {
        workgroupBarrier();  // the previous tile is read
        quantize_tile(row * #{K}, w0, lid, p);
        workgroupBarrier();
        if (n0 < n) {
            let count = min(TILE, #{K4} - w0);
            sums = accumulate(slot, n0, w0, count, sums);
#ifdef GATED
            up = accumulate(1u, n0, w0, count, up);
#endif
        }
    }
    if (n0 >= n) {
        return;
    }
    let y = scaled(slot, n0, sums, p);
#ifdef GATED
    let y_up = scaled(1u, n0, up, p);
#endif
    for (var c = 0u; c < 4u; c++) {
        if (n0 + c < n) {
#ifdef GATED
            y0[row * n + n0 + c] = gated(y[c], y_up[c]);
#else
            store_y(slot, row * n + n0 + c, y[c]);
#endif
        }
    }
}

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let p = a_params(lid);
#ifdef GATED
    run(0u, wid.x, wid.y, lid, p);
#else
    let owner = slot_of(wid.x);
    switch owner.x {  // uniform: the slot of a workgroup
#for s in #{OTHER_SLOTS}
        case #{s}u: { run(#{s}u, wid.x - owner.y, wid.y, lid, p); }
#endfor
        default: { run(0u, wid.x - owner.y, wid.y, lid, p); }
    }
#endif
}
