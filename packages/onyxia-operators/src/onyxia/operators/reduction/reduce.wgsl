// Reduce* ops: each output element combines the input elements along the reduced axes.
// Bindings: 0 in_x (read), 1 out_y (write), [2 the error word when CHECKED: MAP and COMBINE call
//           onyxia::errors' checked int64 functions (ERRORS_BINDING 2)].
// Defs: X_T, Y_T        WGSL storage types; ACC_T accumulator type (f32 for f16 inputs)
//       F16             flag: some storage type is f16
//       INIT            identity of COMBINE as an ACC_T expression (the result of an empty reduction)
//       MAP             per-element transform of `x: ACC_T` (x, x * x, abs(x))
//       COMBINE         associative combine of `a` and `b` (a + b, max(a, b))
//       FINAL           result from `acc` and `count` (ACC_T element count): acc, acc / count, sqrt(acc)
//       WORKGROUP_SIZE  power of two
//       LANES           invocations per output (power of two <= WORKGROUP_SIZE); 1 = one invocation per
//                       output, for short reductions over many outputs
//       KEPT_RANK, RED_RANK  ranks of the kept / reduced index spaces (>= 1; adjacent axes pre-merged)
// Dims: N_OUT outputs, N_RED elements per output, KEPT_DIMS, KEPT_STRIDES, RED_DIMS, RED_STRIDES
//       (input strides in elements: an output's elements are x[kept_offset(o) + reduced_offset(r)]).
// Dispatch: ceil(N_OUT / (WORKGROUP_SIZE / LANES)) workgroups, 1-D (the runtime may split it into x, y).
#ifdef F16
enable f16;
#endif
#import onyxia::indexing
#ifdef CHECKED
#import onyxia::errors
#endif

@group(0) @binding(0) var<storage, read> in_x: array<#{X_T}>;
@group(0) @binding(1) var<storage, read_write> out_y: array<#{Y_T}>;

var<workgroup> partial: array<#{ACC_T}, #{WORKGROUP_SIZE}>;

fn map_element(x: #{ACC_T}) -> #{ACC_T} {
    return #{MAP};
}

fn combine(a: #{ACC_T}, b: #{ACC_T}) -> #{ACC_T} {
    return #{COMBINE};
}

fn finalize(acc: #{ACC_T}, count: #{ACC_T}) -> #{ACC_T} {
    return #{FINAL};
}

fn kept_offset(o: u32) -> u32 {
    var dims = array<u32, #{KEPT_RANK}>(#{KEPT_DIMS});
    var strides = array<u32, #{KEPT_RANK}>(#{KEPT_STRIDES});
    var rem = o;
    var offset = 0u;
    for (var d = i32(#{KEPT_RANK}) - 1; d >= 0; d--) {
        offset += (rem % dims[d]) * strides[d];
        rem = rem / dims[d];
    }
    return offset;
}

fn reduced_offset(r: u32) -> u32 {
    var dims = array<u32, #{RED_RANK}>(#{RED_DIMS});
    var strides = array<u32, #{RED_RANK}>(#{RED_STRIDES});
    var rem = r;
    var offset = 0u;
    for (var d = i32(#{RED_RANK}) - 1; d >= 0; d--) {
        offset += (rem % dims[d]) * strides[d];
        rem = rem / dims[d];
    }
    return offset;
}

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let lane = lid % #{LANES}u;
    let o = flat_invocation(wid, nwg, lid, #{WORKGROUP_SIZE}u) / #{LANES}u;
    var acc = #{INIT};
    // no early return: every invocation must reach the barriers below
    if (o < #{N_OUT}) {
        let base = kept_offset(o);
        for (var r = lane; r < #{N_RED}; r += #{LANES}u) {
            acc = combine(acc, map_element(#{ACC_T}(in_x[base + reduced_offset(r)])));
        }
    }
    partial[lid] = acc;
    workgroupBarrier();
    for (var step = #{LANES}u / 2u; step > 0u; step >>= 1u) {
        if (lane < step) {
            partial[lid] = combine(partial[lid], partial[lid + step]);
        }
        workgroupBarrier();
    }
    if (lane == 0u && o < #{N_OUT}) {
        out_y[o] = #{Y_T}(finalize(partial[lid], #{ACC_T}(#{N_RED})));
    }
}
