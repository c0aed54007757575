#define_import_path onyxia::product_slots
// The slots of a grouped product (matmul_group.wgsl, matmul_nbits.wgsl): up to 4 products of one activation in
// one dispatch (q/k/v, gate/up), slot s with its own weight bindings and output y<s> [M, N<s>], computed by the
// column workgroups G<s> .. G<s+1> - 1 (G0 = 0), so a workgroup never straddles two weights. A shader's main finds
// its slot with `slot_of`, then calls its product with a constant slot per `switch` case: after inlining, each
// case reads its own bindings with no branch per load (every accessor here switches on `slot`).
// GATED (GatedMatMul, GatedMatMulNBits): slots 0 and 1 cover the same columns and one output y0, their products
// combined by `gated`: ACTIVATION(gate) * up, the activation Gelu or SiLU (the families' gated MLPs).
// `stored` rounds a value as the unfused graph stores it (gated products, bias epilogues).
// Declares y0 [, y1, y2, y3] (read_write, Y_T) at BIND_Y0 .. BIND_Y3.
// Reads defs Y_T, F16 (Y_T is f16), GATED, ACTIVATION (gelu_none | gelu_tanh | silu), OTHER_SLOTS (the slots
// past 0, a `#for` list), BIND_Y<s>, and dims N0 .. N3, G1 .. G3.
#ifdef GATED
#import onyxia::math
#endif
#import onyxia::rounding

@group(0) @binding(#{BIND_Y0}) var<storage, read_write> y0: array<#{Y_T}>;
#ifndef GATED
#for s in #{OTHER_SLOTS}
@group(0) @binding(#{BIND_Y#{s}}) var<storage, read_write> y#{s}: array<#{Y_T}>;
#endfor
#endif

// Columns of slot `slot`.
fn slot_n(slot: u32) -> u32 {
    var n = #{N0};
    switch slot {
#for s in #{OTHER_SLOTS}
        case #{s}u: { n = #{N#{s}}; }
#endfor
        default: {}
    }
    return n;
}

// (slot, its first column workgroup) of column workgroup `group` (GATED: slot 0, whose columns slot 1 shares).
fn slot_of(group: u32) -> vec2<u32> {
    var owner = vec2<u32>(0u, 0u);
#ifndef GATED
#for s in #{OTHER_SLOTS}
    if (group >= #{G#{s}}) {
        owner = vec2<u32>(#{s}u, #{G#{s}});
    }
#endfor
#endif
    return owner;
}

#ifndef GATED
fn store_y(slot: u32, i: u32, value: #{Y_T}) {
    switch slot {
#for s in #{OTHER_SLOTS}
        case #{s}u: { y#{s}[i] = value; }
#endfor
        default: { y0[i] = value; }
    }
}
#else
// the gate's activation of a stored product, stored as the unfused graph stores it: Gelu one node, SiLU as the
// exporters spell it, Mul(g, Sigmoid(g)), so the sigmoid is stored before the product
fn activation(g: f32) -> f32 {
#if ACTIVATION == silu
    return stored(g * stored(sigmoid_f32(g)));
#else
    return stored(#{ACTIVATION}(g));
#endif
}

// y0 = activation(gate) * up with the unfused graph's roundings: each product, the activation, stored as Y_T
fn gated(gate: f32, up: f32) -> #{Y_T} {
    return #{Y_T}(activation(stored(gate)) * stored(up));
}
#endif

// a value as the unfused graph stores it in Y_T (see onyxia::rounding for why not `f32(Y_T(x))`)
fn stored(x: f32) -> f32 {
#ifdef F16
    return round_to_f16(x);
#else
    return x;
#endif
}
