#define_import_path onyxia::quant_rows
// Reading a block of A for int8 quantization (onyxia::quant), shared by matmul_nbits_quantize.wgsl and the decode
// workgroups of matmul_nbits.wgsl (Q_SHARED), so both read and quantize a block alike. The importing shader
// declares `a`: array<vec4<A_T>> with QA_VEC4 (K % 4 == 0), else array<A_T>.
// Reads def QA_VEC4.
#import onyxia::quant

// Elements k .. k + 3 of a (flat index, k % 4 == 0); zero at and past `end`.
fn a_four(k: u32, end: u32) -> vec4<f32> {
#ifdef QA_VEC4
    return select(vec4<f32>(0.0), vec4<f32>(a[k / 4u]), k < end);  // end - k is a multiple of 4
#else
    var v = vec4<f32>(0.0);
    for (var j = 0u; j < 4u; j++) {
        if (k + j < end) {
            v[j] = f32(a[k + j]);
        }
    }
    return v;
#endif
}

// The (multiplier, scale) of the block a[src .. end), `size` elements with its padded tail (past `end`) as 0.
fn int8_block_at(src: u32, end: u32, size: u32) -> vec2<f32> {
    var amax4 = vec4<f32>(0.0);
    for (var j = 0u; j < size; j += 4u) {
        amax4 = max(amax4, abs(a_four(src + j, end)));
    }
    return int8_block(max(max(amax4.x, amax4.y), max(amax4.z, amax4.w)));
}
