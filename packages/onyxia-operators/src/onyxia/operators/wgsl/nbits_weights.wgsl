#define_import_path onyxia::nbits_weights
// MatMulNBits' weights, one set of bindings per slot (see matmul_nbits.wgsl and onyxia::product_slots): b<s>,
// scales<s>, zp<s>, bias<s>, with accessors that take the slot (each switches on it, folding away once a caller
// passes a constant slot).
// Reads defs A_T, ZP, B_WIDENED, ZP_WIDENED, BIAS, OTHER_SLOTS, BIND_B<s>, BIND_SCALES<s>, BIND_ZP<s>,
// BIND_BIAS<s>, PANEL, and dims NB, ZB, WPC (all as matmul_nbits.wgsl documents them).

// B_WIDENED comes with slot 0 alone: the planner groups only weights repacked at compile time
#for s in 0 #{OTHER_SLOTS}
#ifdef B_WIDENED
@group(0) @binding(#{BIND_B#{s}}) var<storage, read> b#{s}: array<u32>;
#else
@group(0) @binding(#{BIND_B#{s}}) var<storage, read> b#{s}: array<vec4<u32>>;
#endif
@group(0) @binding(#{BIND_SCALES#{s}}) var<storage, read> scales#{s}: array<#{A_T}>;
#if ZP == packed
@group(0) @binding(#{BIND_ZP#{s}}) var<storage, read> zp#{s}: array<u32>;
#endif
#if ZP == float
@group(0) @binding(#{BIND_ZP#{s}}) var<storage, read> zp#{s}: array<#{A_T}>;
#endif
#ifdef BIAS
@group(0) @binding(#{BIND_BIAS#{s}}) var<storage, read> bias#{s}: array<#{A_T}>;
#endif
#endfor

const PANEL: u32 = #{PANEL}u;  // columns per panel of a repacked b

// ----- per-slot accessors (each `switch` folds away once `slot` is a constant) -----

// Word w of columns n0 .. n0 + 3. Columns past N read clamped or padding words whose sums are never stored.
fn b_words(slot: u32, n0: u32, w: u32) -> vec4<u32> {
#ifdef B_WIDENED
    var words = vec4<u32>(0u);
    for (var c = 0u; c < 4u; c++) {
        let j = 4u * ((n0 + c) * #{WPC} + w);
        words[c] = b0[j] | (b0[j + 1u] << 8u) | (b0[j + 2u] << 16u) | (b0[j + 3u] << 24u);
    }
    return words;
#else
    let i = ((n0 / PANEL) * #{WPC} + w) * (PANEL / 4u) + (n0 % PANEL) / 4u;
    var words: vec4<u32>;
    switch slot {
#for s in #{OTHER_SLOTS}
        case #{s}u: { words = b#{s}[i]; }
#endfor
        default: { words = b0[i]; }
    }
    return words;
#endif
}

fn scale_at(slot: u32, i: u32) -> f32 {
    var s: #{A_T};
    switch slot {
#for s in #{OTHER_SLOTS}
        case #{s}u: { s = scales#{s}[i]; }
#endfor
        default: { s = scales0[i]; }
    }
    return f32(s);
}

#if ZP == packed
fn zp_word(slot: u32, i: u32) -> u32 {
    var word: u32;
    switch slot {
#for s in #{OTHER_SLOTS}
        case #{s}u: { word = zp#{s}[i]; }
#endfor
        default: { word = zp0[i]; }
    }
    return word;
}
#endif

#if ZP == float
fn zp_value(slot: u32, i: u32) -> f32 {
    var z: #{A_T};
    switch slot {
#for s in #{OTHER_SLOTS}
        case #{s}u: { z = zp#{s}[i]; }
#endfor
        default: { z = zp0[i]; }
    }
    return f32(z);
}
#endif

#ifdef BIAS
fn bias_at(slot: u32, n: u32) -> f32 {
    var v: #{A_T};
    switch slot {
#for s in #{OTHER_SLOTS}
        case #{s}u: { v = bias#{s}[n]; }
#endfor
        default: { v = bias0[n]; }
    }
    return f32(v);
}
#endif

fn zero_point(slot: u32, n: u32, blk: u32) -> f32 {
#if ZP == none
    return 8.0;
#endif
#if ZP == zero
    return 0.0;
#endif
#if ZP == float
    return zp_value(slot, n * #{NB} + blk);
#endif
#if ZP == packed
    let byte_index = n * #{ZB} + blk / 2u;
#ifdef ZP_WIDENED
    let byte = zp_word(slot, byte_index);
#else
    let byte = zp_word(slot, byte_index / 4u) >> (8u * (byte_index % 4u));
#endif
    return f32((byte >> (4u * (blk % 2u))) & 15u);
#endif
}

fn scales4(slot: u32, n0: u32, blk: u32) -> vec4<f32> {
    let i = n0 * #{NB} + blk;
    return vec4<f32>(
        scale_at(slot, i), scale_at(slot, i + #{NB}), scale_at(slot, i + 2u * #{NB}), scale_at(slot, i + 3u * #{NB})
    );
}

fn zero_points4(slot: u32, n0: u32, blk: u32) -> vec4<f32> {
    return vec4<f32>(
        zero_point(slot, n0, blk), zero_point(slot, n0 + 1u, blk), zero_point(slot, n0 + 2u, blk),
        zero_point(slot, n0 + 3u, blk)
    );
}
