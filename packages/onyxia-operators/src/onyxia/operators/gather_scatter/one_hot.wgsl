// OneHot: y[outer, d, inner] = values[1] if wrap(indices[outer, inner]) == d else values[0].
// Bindings: 0 in_idx (read), 1 in_values (read: [off, on]), 2 out_y (write).
// Defs: I_T             WGSL storage type of indices (any numeric: float indices truncate, as
//                       onnxruntime's cast to int64 does)
//       T               storage type of values and y
//       F16             flag: I_T or T is f16
//       WORKGROUP_SIZE
// Dims: N output elements (> 0), DEPTH (> 0), INNER (product of the indices dims from the axis on).
#ifdef F16
enable f16;
#endif
#import onyxia::entry

@group(0) @binding(0) var<storage, read> in_idx: array<#{I_T}>;
@group(0) @binding(1) var<storage, read> in_values: array<#{T}>;
@group(0) @binding(2) var<storage, read_write> out_y: array<#{T}>;

fn element_count() -> u32 { return #{N}; }

fn element(i: u32) {
    let inner = i % #{INNER};
    let rest = i / #{INNER};
    let d = rest % #{DEPTH};
    let outer = rest / #{DEPTH};
    var k = i32(in_idx[outer * #{INNER} + inner]);
    if (k < 0) {
        k += i32(#{DEPTH});  // ONNX: negative indices count from the end; out-of-range ones match no d
    }
    out_y[i] = select(in_values[0], in_values[1], k == i32(d));
}
