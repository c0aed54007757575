#define_import_path onyxia::product_slots
// The slots of a grouped product (matmul_group.wgsl, matmul_nbits.wgsl): up to 4 products of one activation in
// one dispatch (q/k/v, gate/up), slot s with its own weight bindings and output y<s> [M, N<s>], computed by the
// column workgroups G<s> .. G<s+1> - 1 (G0 = 0), so a workgroup never straddles two weights. A shader's main finds
// its slot with `slot_of`, then calls its product with a constant slot per `switch` case: after inlining, each
// case reads its own bindings with no branch per load (every accessor here switches on `slot`).
// GATED (GatedMatMul, GatedMatMulNBits): slots 0 and 1 cover the same columns and one output y0.
// Declares y0 [, y1, y2, y3] (read_write, Y_T) at BIND_Y0 .. BIND_Y3.
// Reads defs Y_T, GATED, SLOT1 .. SLOT3, BIND_Y<s>, and dims N0 .. N3, G1 .. G3.

@group(0) @binding(#{BIND_Y0}) var<storage, read_write> y0: array<#{Y_T}>;
#ifndef GATED
#ifdef SLOT1
@group(0) @binding(#{BIND_Y1}) var<storage, read_write> y1: array<#{Y_T}>;
#endif
#endif
#ifdef SLOT2
@group(0) @binding(#{BIND_Y2}) var<storage, read_write> y2: array<#{Y_T}>;
#endif
#ifdef SLOT3
@group(0) @binding(#{BIND_Y3}) var<storage, read_write> y3: array<#{Y_T}>;
#endif

// Columns of slot `slot`.
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

// (slot, its first column workgroup) of column workgroup `group` (GATED: slot 0, whose columns slot 1 shares).
fn slot_of(group: u32) -> vec2<u32> {
    var owner = vec2<u32>(0u, 0u);
#ifndef GATED
#ifdef SLOT1
    if (group >= #{G1}) {
        owner = vec2<u32>(1u, #{G1});
    }
#endif
#ifdef SLOT2
    if (group >= #{G2}) {
        owner = vec2<u32>(2u, #{G2});
    }
#endif
#ifdef SLOT3
    if (group >= #{G3}) {
        owner = vec2<u32>(3u, #{G3});
    }
#endif
#endif
    return owner;
}

#ifndef GATED
fn store_y(slot: u32, i: u32, value: #{Y_T}) {
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
#endif
