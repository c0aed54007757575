// Batched matrix product y[b] = a[b] @ b[b], tiled through workgroup memory with register blocking.
// Bindings: 0 in_a (read), 1 in_b (read), 2 out_y (write).
// Defs: A_T, B_T, Y_T   WGSL storage types
//       ACC_T           accumulator type: f32 for f32/f16 (f16 products would lose the sum), else the int type
//       F16             flag: some storage type is f16
//       TILE_M, TILE_N  output tile of one workgroup; TILE_K  depth of one shared-memory step
//       WG_X, WG_Y      workgroup shape: each invocation owns a TILE_M/WG_Y x 4 block (TILE_N == 4 * WG_X)
//       BATCH_RANK      rank of the (broadcast) batch dims (>= 1; a 1 with dim 1 when there are none)
// Dims: M, N, K         (after folding a weight-only right operand's batch into M)
//       BATCH_DIMS, A_BATCH_STRIDES, B_BATCH_STRIDES (BATCH_RANK entries each; stride 0 = broadcast)
// Dispatch: (ceil(N / TILE_N), ceil(M / TILE_M), batch count); every load and store is bounds-checked,
// so M, N, K need not be multiples of the tile.
#ifdef F16
enable f16;
#endif

@group(0) @binding(0) var<storage, read> in_a: array<#{A_T}>;
@group(0) @binding(1) var<storage, read> in_b: array<#{B_T}>;
@group(0) @binding(2) var<storage, read_write> out_y: array<#{Y_T}>;

const ROWS: u32 = #{TILE_M}u / #{WG_Y}u;  // rows of the output block one invocation accumulates
const THREADS: u32 = #{WG_X}u * #{WG_Y}u;

var<workgroup> tile_a: array<array<#{ACC_T}, #{TILE_K}>, #{TILE_M}>;
var<workgroup> tile_b: array<array<vec4<#{ACC_T}>, #{WG_X}>, #{TILE_K}>;

// Element offsets of batch `z` in a and b (the batch strides already include M*K and K*N).
fn batch_offsets(z: u32) -> vec2<u32> {
    var dims = array<u32, #{BATCH_RANK}>(#{BATCH_DIMS});
    var a_strides = array<u32, #{BATCH_RANK}>(#{A_BATCH_STRIDES});
    var b_strides = array<u32, #{BATCH_RANK}>(#{B_BATCH_STRIDES});
    var rem = z;
    var offsets = vec2<u32>(0u, 0u);
    for (var d = i32(#{BATCH_RANK}) - 1; d >= 0; d--) {
        let coord = rem % dims[d];
        rem = rem / dims[d];
        offsets += coord * vec2<u32>(a_strides[d], b_strides[d]);
    }
    return offsets;
}

fn load_tiles(a_base: u32, b_base: u32, row0: u32, col0: u32, k0: u32, li: u32) {
    for (var e = li; e < #{TILE_M}u * #{TILE_K}u; e += THREADS) {
        let r = e / #{TILE_K}u;
        let c = e % #{TILE_K}u;
        var v = #{ACC_T}(0);
        if (row0 + r < #{M} && k0 + c < #{K}) {
            v = #{ACC_T}(in_a[a_base + (row0 + r) * #{K} + k0 + c]);
        }
        tile_a[r][c] = v;
    }
    for (var e = li; e < #{TILE_K}u * #{WG_X}u; e += THREADS) {
        let r = e / #{WG_X}u;
        let c = col0 + (e % #{WG_X}u) * 4u;
        var v = vec4<#{ACC_T}>();
        if (k0 + r < #{K}) {
            let base = b_base + (k0 + r) * #{N} + c;
            for (var j = 0u; j < 4u; j++) {
                if (c + j < #{N}) {
                    v[j] = #{ACC_T}(in_b[base + j]);
                }
            }
        }
        tile_b[r][e % #{WG_X}u] = v;
    }
}

@compute @workgroup_size(#{WG_X}, #{WG_Y})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let offsets = batch_offsets(wid.z);
    let row0 = wid.y * #{TILE_M}u;
    let col0 = wid.x * #{TILE_N}u;
    let li = lid.y * #{WG_X}u + lid.x;
    var acc: array<vec4<#{ACC_T}>, ROWS>;
    for (var k0 = 0u; k0 < #{K}; k0 += #{TILE_K}u) {
        load_tiles(offsets.x, offsets.y, row0, col0, k0, li);
        workgroupBarrier();
        for (var kk = 0u; kk < #{TILE_K}u; kk++) {
            let b = tile_b[kk][lid.x];
            for (var i = 0u; i < ROWS; i++) {
                acc[i] += tile_a[lid.y * ROWS + i][kk] * b;
            }
        }
        workgroupBarrier();
    }
    let y_base = wid.z * #{M} * #{N};
    for (var i = 0u; i < ROWS; i++) {
        let r = row0 + lid.y * ROWS + i;
        let c = col0 + lid.x * 4u;
        if (r < #{M}) {
            for (var j = 0u; j < 4u; j++) {
                if (c + j < #{N}) {
                    out_y[y_base + r * #{N} + c + j] = #{Y_T}(acc[i][j]);
                }
            }
        }
    }
}
