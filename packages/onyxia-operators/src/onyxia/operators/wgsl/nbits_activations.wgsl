#define_import_path onyxia::nbits_activations
// MatMulNBits' activations: the binding of a (and a_scales), read eight at a time as `Eight` (INT8: `EightI`, from
// the quantize pass's packed bytes or the workgroup's row), and with Q_SHARED the workgroup's own int8
// quantization of its row (see matmul_nbits.wgsl, whose header documents the bindings and
// the defs read here: A_T, INT8, Q_SHARED, QA_VEC4, A_VEC4, K_TAIL, BIND_A, BIND_A_SCALES, WORKGROUP_SIZE and dims
// K, KP, KP4, NB, WPB).
#ifdef Q_SHARED
#import onyxia::quant_rows
#endif

#ifdef INT8
#ifdef Q_SHARED
#ifdef QA_VEC4
@group(0) @binding(#{BIND_A}) var<storage, read> a: array<vec4<#{A_T}>>;
#else
@group(0) @binding(#{BIND_A}) var<storage, read> a: array<#{A_T}>;
#endif
#else
@group(0) @binding(#{BIND_A}) var<storage, read> a: array<vec2<u32>>;  // 8 int8 values (one word's) per vec2
@group(0) @binding(#{BIND_A_SCALES}) var<storage, read> a_scales: array<vec4<f32>>;
#endif
#else
#ifdef A_VEC4
@group(0) @binding(#{BIND_A}) var<storage, read> a: array<vec4<#{A_T}>>;
#else
@group(0) @binding(#{BIND_A}) var<storage, read> a: array<#{A_T}>;
#endif
#endif

// Eight consecutive values (elements k0 .. k0 + 3 and k0 + 4 .. k0 + 7).
struct Eight {
    lo: vec4<f32>,
    hi: vec4<f32>,
}

#ifdef Q_SHARED
var<workgroup> shared_qa: array<vec4<f32>, #{KP4}>;
var<workgroup> shared_sa: array<f32, #{NB}>;

// Row m of A quantized per block into shared_qa / shared_sa (the workgroup's threads take a block each).
fn quantize_row(m: u32, lid: u32) {
    let block_size = #{WPB} * 8u;
    for (var blk = lid; blk < #{NB}; blk += #{WORKGROUP_SIZE}u) {
        let k0 = blk * block_size;
        let src = m * #{K} + k0;
        let end = src + min(block_size, #{K} - k0);
        let block = int8_block_at(src, end, block_size);
        shared_sa[blk] = block.y;
        for (var j = 0u; j < block_size; j += 4u) {
            shared_qa[(k0 + j) / 4u] = int8_round(a_four(src + j, end), block.x);
        }
    }
    workgroupBarrier();
}
#endif

#ifdef INT8
// Eight int8 values of a row as i32 (INT8 sums them in i32: onyxia::nbits_pairs).
struct EightI {
    lo: vec4<i32>,
    hi: vec4<i32>,
}

// Integer-valued floats (int8 values; any |v| < 2^22) as i32, exactly, from the bits of v + 1.5 * 2^23: lavapipe
// runs the conversion i32(v), which clamps, lane by lane.
fn int_of(v: vec4<f32>) -> vec4<i32> {
    return bitcast<vec4<i32>>(v + vec4<f32>(12582912.0)) - vec4<i32>(0x4b400000);
}

// The four int8 bytes of w (element 0 lowest), sign-extended.
fn bytes_of(w: u32) -> vec4<i32> {
    return bitcast<vec4<i32>>(vec4<u32>(w) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u);
}

// Row m's int8 values k0 .. k0 + 7 (k0 a multiple of 8): the workgroup's quantized row (Q_SHARED), else two words
// of the quantize pass's packed bytes (whole blocks, the tail zeroed), one load each.
fn a_ints(m: u32, k0: u32) -> EightI {
#ifdef Q_SHARED
    let i = k0 / 4u;
    return EightI(int_of(shared_qa[i]), int_of(shared_qa[i + 1u]));
#else
    let w = a[(m * #{KP} + k0) / 8u];
    return EightI(bytes_of(w.x), bytes_of(w.y));
#endif
}
#endif

// Row m's elements k0 .. k0 + 7; zero past K (the padded tail of the last block must not contribute).
fn a_eight(m: u32, k0: u32) -> Eight {
#ifdef INT8
#ifdef Q_SHARED
    let i = k0 / 4u;  // the workgroup's own row (ROWS 1), tail zeroed by quantize_row
    return Eight(shared_qa[i], shared_qa[i + 1u]);
#else
    let x = a_ints(m, k0);  // (the INT8 product reads a_ints itself)
    return Eight(vec4<f32>(x.lo), vec4<f32>(x.hi));
#endif
#else
#ifdef A_VEC4
#ifdef K_TAIL
    if (k0 >= #{K}) {
        return Eight(vec4<f32>(0.0), vec4<f32>(0.0));
    }
#endif
    let i = (m * #{K} + k0) / 4u;
    return Eight(vec4<f32>(a[i]), vec4<f32>(a[i + 1u]));
#else
    var v: array<f32, 8>;
    for (var j = 0u; j < 8u; j++) {
        if (k0 + j < #{K}) {
            v[j] = f32(a[m * #{K} + k0 + j]);
        }
    }
    return Eight(vec4<f32>(v[0], v[1], v[2], v[3]), vec4<f32>(v[4], v[5], v[6], v[7]));
#endif
#endif
}
