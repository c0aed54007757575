// GatherBlockQuantized (4-bit): y[i] = (q[d] - zp[s]) * scale[s], where d is the data element that output i
// gathers (the index from `indices` along gather_axis) and s the block of d along quantize_axis.
//
// Bindings: 0 data (u32 words of packed nibbles, low nibble first; one byte per u32 when DATA_WIDENED),
//   1 indices (i32: int32, or int64 stored as i32), 2 scales (S_T), 3 zp when ZP (same packing as data,
//   widened when ZP_WIDENED), then y (S_T) at #{Y_BINDING}.
// Defs: S_T     f32 | f16 (scales and output); F16 flag when f16
//       SIGNED  flag: INT4 data (and zero points): nibbles are two's complement
//       ZP      flag: a zero-point input (else DEFAULT_ZP: 8 for uint8 data, 0 for INT4/UINT4)
//       DATA_WIDENED, ZP_WIDENED  flags: a runtime uint8 tensor, one byte per u32
//       CHUNKED flag: data, scales and zp bind only the rows [FIRST_ROW, FIRST_ROW + ROWS) of a table over the
//               storage-binding limit (gather_axis 0, one dispatch per range); outputs of other rows are
//               left to the other dispatches, and the first one writes the zeros of out-of-range indices
//       WORKGROUP_SIZE
// Dims: N_OUT (output elements), GN (index count), G (gather-axis size), GB (elements after the gather axis),
//       QD (quantize-axis size), QN (elements after the quantize axis), NBQ (blocks along it), BLOCK_SIZE,
//       ZROW (zero-point nibbles per scale row: NBQ, or NBQ rounded up to even for uint8's per-row bytes),
//       FIRST_ROW, ROWS (CHUNKED only) the bound range of gathered rows.
#ifdef F16
enable f16;
#endif
#import onyxia::entry

@group(0) @binding(0) var<storage, read> data: array<u32>;
@group(0) @binding(1) var<storage, read> indices: array<i32>;
@group(0) @binding(2) var<storage, read> scales: array<#{S_T}>;
#ifdef ZP
@group(0) @binding(3) var<storage, read> zp: array<u32>;
#endif
@group(0) @binding(#{Y_BINDING}) var<storage, read_write> y: array<#{S_T}>;

fn as_value(q: u32) -> f32 {
#ifdef SIGNED
    return f32(i32(q ^ 8u) - 8);
#else
    return f32(q);
#endif
}

fn data_nibble(i: u32) -> u32 {
#ifdef DATA_WIDENED
    return (data[i / 2u] >> (4u * (i % 2u))) & 15u;
#else
    return (data[i / 8u] >> (4u * (i % 8u))) & 15u;
#endif
}

fn zero_point(s: u32) -> f32 {
#ifdef ZP
    let i = (s / #{NBQ}) * #{ZROW} + s % #{NBQ};
#ifdef ZP_WIDENED
    return as_value((zp[i / 2u] >> (4u * (i % 2u))) & 15u);
#else
    return as_value((zp[i / 8u] >> (4u * (i % 8u))) & 15u);
#endif
#else
    return #{DEFAULT_ZP};
#endif
}

fn element_count() -> u32 { return #{N_OUT}; }

fn element(i: u32) {
    let row = i / #{GB};
    var index = indices[row % #{GN}];
    if (index < 0) {
        index += i32(#{G});
    }
    // onnxruntime writes zeros for an out-of-range index rather than failing
    if (index < 0 || index >= i32(#{G})) {
#ifdef CHUNKED
        if (#{FIRST_ROW} != 0u) {
            return;
        }
#endif
        y[i] = #{S_T}(0.0);
        return;
    }
#ifdef CHUNKED
    if (u32(index) < #{FIRST_ROW} || u32(index) >= #{FIRST_ROW} + #{ROWS}) {
        return;
    }
    let d = (u32(index) - #{FIRST_ROW}) * #{GB} + i % #{GB};  // gather_axis 0: nothing precedes the rows
#else
    let d = ((row / #{GN}) * #{G} + u32(index)) * #{GB} + i % #{GB};
#endif
    let s = ((d / (#{QD} * #{QN})) * #{NBQ} + ((d / #{QN}) % #{QD}) / #{BLOCK_SIZE}) * #{QN} + d % #{QN};
    y[i] = #{S_T}((as_value(data_nibble(d)) - zero_point(s)) * f32(scales[s]));
}
