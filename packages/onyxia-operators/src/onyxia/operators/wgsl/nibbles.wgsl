#define_import_path onyxia::nibbles
// int4/uint4 values as Onyxia stores them on the GPU: ONNX's packing (two per byte, low nibble first)
// read as little-endian u32 words, so element i is nibble i % 8 of word i / 8. Shaders pass the word
// (WGSL cannot pass a storage array to a function): `nibble_i4(in_x[i / 8u], i)`.
// Reads no defs.

// element i of a uint4 tensor whose word i / 8 is `word`: 0 .. 15
fn nibble_u4(word: u32, i: u32) -> u32 {
    return (word >> (4u * (i % 8u))) & 0xFu;
}

// element i of an int4 tensor whose word i / 8 is `word`: -8 .. 7 (the nibble sign-extended)
fn nibble_i4(word: u32, i: u32) -> i32 {
    return (i32(nibble_u4(word, i)) << 28u) >> 28u;
}

// `v`'s low 4 bits placed as element i of its word (OR the 8 elements of a word together)
fn nibble_bits(v: u32, i: u32) -> u32 {
    return (v & 0xFu) << (4u * (i % 8u));
}
