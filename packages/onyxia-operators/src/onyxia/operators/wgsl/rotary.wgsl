#define_import_path onyxia::rotary
// Rotary position embedding (RoPE) math, shared by the RotaryEmbedding shader and any kernel that
// fuses the rotation into attention. Element d < rotary_dim of a head pairs with one partner element;
// the pair (a, b) at angle theta becomes (a cos - b sin, a sin + b cos), with cos/sin read from
// column `cache` of the position's cache row. Elements at d >= rotary_dim pass through unchanged.
// Two pairings exist (onnxruntime's `interleaved` attribute):
//   half-split (interleaved 0, GPT-NeoX / Llama / Gemma): pair k is (k, k + rotary_dim / 2)
//   interleaved (interleaved 1, GPT-J): pair k is (2k, 2k + 1)
// Reads no defs; `interleaved` is a parameter so callers pass a def-derived constant.

struct RotaryTap {
    partner: u32,  // head offset of the element this one pairs with
    cache: u32,    // column of the cos/sin cache row (the pair index)
    sign: f32,     // -1 for the pair's first element, +1 for its second
}

// How element `d` (< rotary_dim) of a head is rotated.
fn rotary_tap(d: u32, rotary_dim: u32, interleaved: bool) -> RotaryTap {
    let half = rotary_dim / 2u;
    if (interleaved) {
        let first = (d & 1u) == 0u;
        return RotaryTap(select(d - 1u, d + 1u, first), d / 2u, select(1.0, -1.0, first));
    }
    let first = d < half;
    return RotaryTap(select(d - half, d + half, first), select(d - half, d, first), select(1.0, -1.0, first));
}

// Element `x` rotated with its `partner` value.
fn rotary_apply(x: f32, partner: f32, tap: RotaryTap, cos_v: f32, sin_v: f32) -> f32 {
    return x * cos_v + tap.sign * partner * sin_v;
}

// Head offsets of pair `k` (< rotary_dim / 2), for kernels that rotate a pair per invocation.
fn rotary_pair(k: u32, rotary_dim: u32, interleaved: bool) -> vec2<u32> {
    return select(vec2<u32>(k, k + rotary_dim / 2u), vec2<u32>(2u * k, 2u * k + 1u), interleaved);
}

// The pair (a, b) rotated by the angle whose cosine and sine are given.
fn rotary_rotate_pair(pair: vec2<f32>, cos_v: f32, sin_v: f32) -> vec2<f32> {
    return vec2<f32>(pair.x * cos_v - pair.y * sin_v, pair.x * sin_v + pair.y * cos_v);
}
