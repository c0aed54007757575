#define_import_path onyxia::nbits_pairs
// MatMulNBits' int8 block sums (INT8, accuracy_level 4) in i32, two columns to a lane value: lavapipe has no fused
// multiply-add (WGSL fma becomes a multiply and an add), so f32 products cost two operations each, while one i32
// product of qa by (q0 - 8) + 65536 (q1 - 8) multiplies two columns at once. The sums are exact integers, the same
// as f32's exact ones, so the bits of every result are those of the f32 arithmetic (matmul_nbits.wgsl documents
// the defs read here: INT8, WPB). Finite activations only: a NaN or infinite element makes its block's qa NaN,
// which f32 sums carried to the output, while the quantize pass's cast and onyxia::nbits_activations' int_of turn
// it into an arbitrary integer (MLAS's int8 cast of a NaN is no better defined).
#ifdef INT8
// Words per chunk of sums: |qa| <= 127 and |q - 8| <= 8, so 32 products stay within 16 bits signed (32512), and a
// chunk's pair of sums comes apart exactly (`unpaired`).
const CHUNK: u32 = min(#{WPB}, 4u);

// Word w of 4 columns (b_words' vec4) as 8 pairs of nibbles: element k of columns (0, 1) and of columns (2, 3),
// each nibble minus 8, the first column's in the low 16 bits: (q0 - 8) + 65536 (q1 - 8).
fn nibble_pairs(words: vec4<u32>) -> array<vec2<i32>, 8> {
    let low = (words.xz & vec2<u32>(0xffffu)) | (words.yw << vec2<u32>(16u));  // nibbles 0 .. 3 of both columns
    let high = (words.xz >> vec2<u32>(16u)) | (words.yw & vec2<u32>(0xffff0000u));  // nibbles 4 .. 7
    let mask = vec2<u32>(0x000f000fu);
    let eights = vec2<i32>(0x00080008);
    return array<vec2<i32>, 8>(
        bitcast<vec2<i32>>(low & mask) - eights,
        bitcast<vec2<i32>>((low >> vec2<u32>(4u)) & mask) - eights,
        bitcast<vec2<i32>>((low >> vec2<u32>(8u)) & mask) - eights,
        bitcast<vec2<i32>>((low >> vec2<u32>(12u)) & mask) - eights,
        bitcast<vec2<i32>>(high & mask) - eights,
        bitcast<vec2<i32>>((high >> vec2<u32>(4u)) & mask) - eights,
        bitcast<vec2<i32>>((high >> vec2<u32>(8u)) & mask) - eights,
        bitcast<vec2<i32>>((high >> vec2<u32>(12u)) & mask) - eights
    );
}

// The pair of sums in each i32 of v (lo + 65536 hi, each within 16 bits signed) as four f32 columns, exactly.
fn unpaired(v: vec2<i32>) -> vec4<f32> {
    let lo = (v << vec2<u32>(16u)) >> vec2<u32>(16u);
    let hi = (v - lo) >> vec2<u32>(16u);
    return vec4<f32>(f32(lo.x), f32(hi.x), f32(lo.y), f32(hi.y));
}
#endif
