// A fused chain of elementwise ops (com.onyxia::FusedElementwise): out_y[i] = the members, applied in order.
// Bindings: 0 .. OUT_BINDING-1 in_<j> (read, declared by READS), OUT_BINDING out_y (write), then the
//           error word when CHECKED (a member calls onyxia::errors' checked int64 functions; ERRORS_BINDING).
// Defs: READS          the read bindings' declarations, one per input the members read on the GPU
//       MEMBERS        one WGSL fn m<k> per member; its body is the member row's `expression`
//       LOADS          `let v<j> = in_<j>[index];`, each input loaded once
//       CALLS          `let t<k> = m<k>(...);` per member, in order; RESULT the last one (`t<last>`)
//       Y_T            output storage type; OUT_BINDING the output's binding index
//       BROADCAST      flag: some input is broadcast, so inputs are indexed through strides
//                      (absent: every input has the output's shape and is read at `i`)
//       RANK, INPUTS, STRIDE_COUNT  output rank, read-binding count and their product (with BROADCAST)
//       F16            flag: some operand, intermediate or output is f16
//       ROUND_F16      flag: a member casts f32 to f16, through round_to_f16 (below)
//       WORKGROUP_SIZE
// Dims: N output elements; with BROADCAST, OUT_DIMS (RANK) and STRIDES (INPUTS x RANK, row-major: input j's
//       strides at j * RANK; 0 marks an axis the input is broadcast over).
#ifdef F16
enable f16;
#endif
#import onyxia::entry
#import onyxia::math
#import onyxia::special
#ifdef CHECKED
#import onyxia::errors
#endif

#{READS}
@group(0) @binding(#{OUT_BINDING}) var<storage, read_write> out_y: array<#{Y_T}>;

#ifdef ROUND_F16
// x rounded to the nearest f16 value (ties to even; past 65504 to inf, NaN kept), still as f32.
// A f32 -> f16 cast whose result is widened back later in the same shader loses its rounding on some
// drivers (lavapipe turns f32(f16(x)), and pack2x16float/unpack2x16float alike, into x), so the cast
// member converts this instead: its f16() conversion is then exact, whatever folds it away.
fn round_to_f16(x: f32) -> f32 {
    let bits = bitcast<u32>(x);
    let sign = bits & 0x80000000u;
    let magnitude = bits & 0x7fffffffu;
    if (magnitude > 0x7f800000u) {
        return x;  // NaN
    }
    if (magnitude >= 0x477ff000u) {  // 65520 and up round to inf (65504's neighbour 65536 is even)
        return bitcast<f32>(sign | 0x7f800000u);
    }
    if (magnitude < 0x38800000u) {  // below 2^-14: f16 subnormals, multiples of 2^-24 (round(): ties to even)
        let scaled = round(bitcast<f32>(magnitude) * 16777216.0) * 5.9604644775390625e-8;
        return bitcast<f32>(sign | bitcast<u32>(scaled));
    }
    let kept = (magnitude + 0xfffu + ((magnitude >> 13u) & 1u)) & 0xffffe000u;  // 10 of 23 mantissa bits
    return bitcast<f32>(sign | kept);
}
#endif

#{MEMBERS}

fn element_count() -> u32 { return #{N}; }

fn element(i: u32) {
#ifdef BROADCAST
    var out_dims = array<u32, #{RANK}>(#{OUT_DIMS});
    var strides = array<u32, #{STRIDE_COUNT}>(#{STRIDES});
    var idx: array<u32, #{INPUTS}>;  // zero-initialised
    var rem = i;
    for (var d = i32(#{RANK}) - 1; d >= 0; d--) {
        // the outermost axis takes what is left (i < N): no division by it, a symbolic batch's included
        let coord = select(rem % out_dims[d], rem, d == 0);
        rem = select(rem / out_dims[d], 0u, d == 0);
        for (var j = 0u; j < #{INPUTS}u; j++) {
            idx[j] += coord * strides[j * #{RANK}u + u32(d)];
        }
    }
#endif
#{LOADS}
#{CALLS}
    out_y[i] = #{RESULT};
}
