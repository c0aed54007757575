// MatMulNBits (4-bit): y[m, n] = sum_k a[m, k] * (q[n, k] - zp[n, k / BLOCK_SIZE]) * scale[n, k / BLOCK_SIZE] + bias[n],
// dequantised in the shader and accumulated in f32 (onnxruntime's accuracy_level 0 numerics). With INT8, `a` holds
// matmul_nbits_quantize.wgsl's int8 values qa (as integer-valued f32) and a_scales their per-block scales sa, and
// a block adds (sa * s) * (sum_k qa_k q_k - z * sum_k qa_k): the sums are exact integers, the int32 dot products of
// onnxruntime's CompInt8 kernel (accuracy_level 4), which applies sa * s per block too. With Q_SHARED (the decode
// kernel, one row per workgroup) the workgroup quantizes its row of A itself into workgroup memory, with the same
// onyxia::quant math, so a decode step needs no quantize dispatch.
//
// Each thread owns 4 * CG adjacent columns and ROWS rows and walks the K blocks (SPLIT > 1: SPLIT threads share a
// column group, taking blocks t, t + SPLIT, ..., and add their sums through workgroup memory). Per block it
// accumulates sum(a * q) and sum(a), then applies the block's zero point and scale once:
// sum_k a_k (q_k - z) s = s * (sum_k a_k q_k - z * sum_k a_k) (A_SUMS; with the zero point 8 the nibbles are
// unpacked as q - 8 instead, and no sum of a is kept). With INT8 the block sums are taken in i32, two columns to
// a lane value (onyxia::nbits_pairs: lavapipe has no fused multiply-add, so each f32 product costs a multiply and
// an add), as sum_k qa_k (q_k - 8) and, with A_SUMS, z - 8 for z: the same exact integers, so the same bits as the
// f32 sums (INT8 never meets CODEBOOK or float zero points). The columns of a thread share each load of a, which
// (more than the weight reads) bounds the speed on lavapipe; ROWS > 1 (batched decode, prefill) shares each weight
// unpack. A row's arithmetic and order do not depend on ROWS, so a row of a batched decode step (the rows4 and
// rows8 tiles, SPLIT as the decode tile's) gets the bits the decode kernel gives it alone.
//
// Slots (com.onyxia MatMulNBitsGroup): one dispatch computes up to 4 products of the same A (q/k/v, gate/up),
// slot s with its own b, scales, zp, bias (onyxia::nbits_weights) and y (onyxia::product_slots, which also maps
// workgroups to slots). GATED (GatedMatMulNBits): one output y0 = act(a @ w0) * (a @ w1), act Gelu or SiLU,
// rounded through A_T where the unfused activation and Mul would store.
//
// Bindings (numbers from the BIND_* defs): a, [a_scales with INT8 and not Q_SHARED], then per slot s: b<s>,
//   scales<s> [N * NB] (A_T), [zp<s> when ZP != none], [bias<s> [N] when BIAS]; then y<s> [M, N<s>] (A_T; y0
//   only with GATED).
//   a [M, K] (A_T; vec4s with A_VEC4; INT8: qa [M, KP] int8 bytes, 8 to a vec2<u32>; Q_SHARED: A_T, vec4s with QA_VEC4).
//   b: a compile-time B repacked in panels of PANEL columns (zero-padded), word-major within each: vec4<u32> at
//   [column / PANEL][word][(column % PANEL) / 4], so a SIMD row of threads streams one panel front to back; each
//   word 8 nibbles low first; B_WIDENED (slot 0 only): a runtime uint8 B as the graph stores it, [N, WPC * 4] bytes,
//   one per u32.
// Defs: A_T, Y_T        f32 | f16 (activations, scales, float zero points, bias and output share it)
//       F16             flag: A_T is f16
//       ZP              none (zero point 8) | packed (4-bit, two per byte, ZB bytes per column) | float (A_T) |
//                       zero (zero point 0: CODEBOOK's signed values)
//       CODEBOOK        (com.microsoft MatMulBnb4) the 16 comma-separated f32 values a nibble decodes to, bytes
//                       high nibble first; scales are bitsandbytes' absmax per block
//       B_WIDENED       flag: see b above
//       ZP_WIDENED      flag: packed zero points from a runtime uint8 tensor, one byte per u32 (else 4 per word)
//       BIAS            flag: a bias input per slot
//       K_TAIL          flag: K % BLOCK_SIZE != 0, so reads of a past K give 0 (the padded last block)
//       A_VEC4          flag: K % 8 == 0, so a row's 8 elements per word are two aligned vec4 loads
//       INT8            flag: a is int8-quantized per block (accuracy_level 4), rows padded to KP = NB * block size
//       Q_SHARED        flag (with INT8, ROWS 1): quantize the row in the workgroup; QA_VEC4 flag: K % 4 == 0
//       OTHER_SLOTS     the slots past 0 as a `#for` list: "1 2 3", "1", or "" for one weight
//       CHUNKED         flag (one slot, not GATED): B over the storage-binding limit runs in column ranges
//                       (matmul_nbits_ranges.py), one dispatch each: b, scales, zp and bias bind the columns
//                       [COL0, COL0 + N0) of the weight, indexed from the range's start, and y keeps YN columns
//       GATED           flag (two slots): y0 = act(product 0) * product 1; ACTIVATION: gelu_none | gelu_tanh | silu
//       ROWS            rows per thread (1 for decode); ROW_ITEMS: 0 .. ROWS - 1 (row loops unrolled by `#for`)
//       SHARED_A        flag (SPLIT 1): lane 0 of a subgroup loads a and a_scales (the same for the whole
//                       workgroup), subgroupBroadcast shares them (lavapipe loads lane by lane whatever the address)
//       SPREAD_A        flag (with SHARED_A, ROWS 4 or 8): lane l of a subgroup loads row l % ROWS of a and
//                       subgroupBroadcast hands each row to every lane (one load per lane, not one per row); every
//                       lane computes, columns past N too, since the others need its row
//       A_SUMS          flag (ZP packed or float): keep each row's block sums of a (the zero point varies)
//       CG              column groups of 4 per thread (each load of a serves 4 * CG columns); CG_ITEMS: 0 .. CG - 1
//       WPB_CHUNKS      (INT8) max(1, WPB / 4): chunks of 4 words per block (onyxia::nbits_pairs' CHUNK)
//       SPLIT           threads per column group (a power of two dividing WORKGROUP_SIZE)
//       ROLLED_NB       flag (SPLIT 1, few blocks): the loop over the blocks through onyxia::rolled (rolled_loops.py)
//       SUBGROUP_SPLIT  flag (SPLIT > 1): the SPLIT threads add their sums by subgroup shuffles (the `subgroup`
//                       variant: SPLIT divides the subgroup size), else through workgroup memory
//       WORKGROUP_SIZE
//       PANEL           columns per panel of a repacked b (a multiple of 4 * CG)
// Dims: M (rows, literal or immediate), K, KP and MP (INT8: NB * block size, M rounded up to 4), KP4 (Q_SHARED:
//       KP / 4), N<s> per slot,
//       COL0, YN (CHUNKED: the range's first column, the product's N),
//       G1 .. G3 (first workgroup of each slot), NB (blocks per column), WPB (words per block), WPC (words per
//       column), ZB (zero-point bytes per column).
#ifdef F16
enable f16;
#endif
#import onyxia::nbits_activations
#import onyxia::nbits_pairs
#import onyxia::nbits_shared_rows
#import onyxia::nbits_unpack
#import onyxia::nbits_weights
#import onyxia::product_slots
#import onyxia::rolled

// ----- the product -----

const COLUMNS: u32 = 4u * #{CG}u;  // columns per thread: CG groups of 4
const THREADS: u32 = #{WORKGROUP_SIZE}u / #{SPLIT}u;  // threads with distinct columns per workgroup
const CELLS: u32 = #{ROWS}u * #{CG}u;
#if SPLIT != 1
#ifndef SUBGROUP_SPLIT
var<workgroup> partial: array<vec4<f32>, #{WORKGROUP_SIZE}u * CELLS>;
#endif
#endif

// Block blk of this thread's sums for rows m0 .. m0 + ROWS - 1 and columns n0 .. n0 + COLUMNS - 1 of slot `slot`,
// added to acc: acc[r * CG + g] holds columns n0 + 4 g .. n0 + 4 g + 3 of row m0 + r. Rows and column groups are
// written out (`#for`): lavapipe keeps a constant-bound WGSL loop a loop, blending every value it carries with the
// exec mask (the column groups written out made rows 8 ~17% faster).
// Each row's arithmetic is the same whatever ROWS, so a row gets the same bits in any tile.
#for via in #{A_READS}
fn add_block_#{via}(slot: u32, n0: u32, m0: u32, blk: u32, acc: ptr<function, array<vec4<f32>, CELLS>>) {
    // zeroed explicitly: a `var` declared without initializer in a loop body kept the previous
    // iteration's value here (wgpu 0.32 on lavapipe), though WGSL says it starts at zero
    var dot_q = array<vec4<f32>, CELLS>();
#ifdef A_SUMS
    var sum_a = array<f32, #{ROWS}>();
#endif
#ifdef INT8
    // exact integer sums of qa (q - 8), two columns to an i32 (onyxia::nbits_pairs), added to dot_q every CHUNK
    // words, before a half can pass 16 bits (one chunk per block up to block size 32: no loop)
#if WPB_CHUNKS == 1
    {
        let c0 = blk * #{WPB};
#else
    for (var c0 = blk * #{WPB}; c0 < (blk + 1u) * #{WPB}; c0 += CHUNK) {
#endif
        var dots = array<vec2<i32>, CELLS>();
#ifdef A_SUMS
        var sums_a = array<i32, #{ROWS}>();
#endif
        for (var w = c0; w < c0 + CHUNK; w++) {
#for g in #{CG_ITEMS}
            let p#{g} = nibble_pairs(b_words(slot, n0 + 4u * #{g}u, w));
#endfor
#ifdef SPREAD_A
            let spread = a_spread_#{via}(m0, w * 8u);  // rows past M read clamped garbage and are never stored
            let mine = spread.mine.lo;
            let mine_hi = spread.mine.hi;
            let high = spread.high.lo;
            let high_hi = spread.high.hi;
#endif
#for r in #{ROW_ITEMS}
#ifdef SPREAD_A
            let up#{r} = spread_high_#{via}(#{r}u);
            let lo#{r} = select(subgroupBroadcast(mine, #{r}u), subgroupBroadcast(high, #{r}u % 4u), up#{r});
            let hi#{r} = select(subgroupBroadcast(mine_hi, #{r}u), subgroupBroadcast(high_hi, #{r}u % 4u), up#{r});
#else
            let x#{r} = a_shared(m0 + #{r}u, w * 8u);
            let lo#{r} = x#{r}.lo;
            let hi#{r} = x#{r}.hi;
#endif
#ifdef A_SUMS
            let s4#{r} = lo#{r} + hi#{r};
            sums_a[#{r}] += (s4#{r}.x + s4#{r}.y) + (s4#{r}.z + s4#{r}.w);
#endif
#for g in #{CG_ITEMS}
            dots[#{r}u * #{CG}u + #{g}u] += lo#{r}.x * p#{g}[0] + lo#{r}.y * p#{g}[1] + lo#{r}.z * p#{g}[2]
                + lo#{r}.w * p#{g}[3] + hi#{r}.x * p#{g}[4] + hi#{r}.y * p#{g}[5] + hi#{r}.z * p#{g}[6]
                + hi#{r}.w * p#{g}[7];
#endfor
#endfor
        }
#for r in #{ROW_ITEMS}
#for g in #{CG_ITEMS}
        dot_q[#{r}u * #{CG}u + #{g}u] += unpaired(dots[#{r}u * #{CG}u + #{g}u]);
#endfor
#ifdef A_SUMS
        sum_a[#{r}] += f32(sums_a[#{r}]);
#endif
#endfor
    }
#else
    for (var w = blk * #{WPB}; w < (blk + 1u) * #{WPB}; w++) {
#for g in #{CG_ITEMS}
        let words#{g} = b_words(slot, n0 + 4u * #{g}u, w);
        let q#{g} = array<Eight, 4>(
            unpack_nibbles(words#{g}.x), unpack_nibbles(words#{g}.y), unpack_nibbles(words#{g}.z), unpack_nibbles(words#{g}.w)
        );
#endfor
        // rows past M read clamped garbage (WebGPU bounds every access) and are never stored
#ifdef SPREAD_A
        let spread = a_spread_#{via}(m0, w * 8u);
#endif
#for r in #{ROW_ITEMS}
#ifdef SPREAD_A
        let up#{r} = spread_high_#{via}(#{r}u);
        let x#{r} = Eight(
            select(subgroupBroadcast(spread.mine.lo, #{r}u), subgroupBroadcast(spread.high.lo, #{r}u % 4u), up#{r}),
            select(subgroupBroadcast(spread.mine.hi, #{r}u), subgroupBroadcast(spread.high.hi, #{r}u % 4u), up#{r})
        );
#else
        let x#{r} = a_shared(m0 + #{r}u, w * 8u);
#endif
#ifdef A_SUMS
        sum_a[#{r}] += dot(x#{r}.lo + x#{r}.hi, vec4<f32>(1.0));
#endif
#for g in #{CG_ITEMS}
        dot_q[#{r}u * #{CG}u + #{g}u] += vec4<f32>(dot8(x#{r}, q#{g}[0]), dot8(x#{r}, q#{g}[1]), dot8(x#{r}, q#{g}[2]), dot8(x#{r}, q#{g}[3]));
#endfor
#endfor
    }
#endif
#ifdef Q_SHARED
    let sa = array<f32, 1>(shared_sa[blk]);  // ROWS 1
#else
#ifdef INT8
    let sa = row_scales(blk, m0);
#endif
#endif
#for g in #{CG_ITEMS}
    {
        let s = scales4(slot, n0 + 4u * #{g}u, blk);
#ifdef A_SUMS
        let z = zero_points4(slot, n0 + 4u * #{g}u, blk);
#ifdef INT8
        let z_sums = z - 8.0;  // dot_q holds sum qa (q - 8): exact integers, as sum qa q - z sum qa was
#else
        let z_sums = z;
#endif
#endif
#for r in #{ROW_ITEMS}
#ifdef A_SUMS
        let sums#{r} = dot_q[#{r}u * #{CG}u + #{g}u] - z_sums * sum_a[#{r}];
#else
        let sums#{r} = dot_q[#{r}u * #{CG}u + #{g}u];
#endif
#ifdef INT8
        (*acc)[#{r}u * #{CG}u + #{g}u] += (s * sa[#{r}]) * sums#{r};
#else
        (*acc)[#{r}u * #{CG}u + #{g}u] += s * sums#{r};
#endif
#endfor
    }
#endfor
}

// This thread's sums (see add_block_<way>) over blocks t, t + SPLIT, ... in order, whatever the tile.
fn accumulate_#{via}(slot: u32, n0: u32, m0: u32, t: u32) -> array<vec4<f32>, CELLS> {
    var acc = array<vec4<f32>, CELLS>();
#ifndef SPREAD_A
    if (n0 >= slot_n(slot)) {
        return acc;  // (with SPREAD_A every lane loads rows of a for the others: columns past N are computed too)
    }
#endif
#ifdef ROLLED_NB
    let nb = rolled(#{NB}, arrayLength(&a));  // few blocks: a loop, not a copy of the block's sums each (onyxia::rolled)
#else
    let nb = #{NB};
#endif
    for (var blk = t; blk < nb; blk += #{SPLIT}u) {
        add_block_#{via}(slot, n0, m0, blk, &acc);
    }
    return acc;
}
#endfor

// accumulate_<way> for this subgroup's way of spreading rows of a (onyxia::nbits_shared_rows), chosen once.
fn accumulate(slot: u32, n0: u32, m0: u32, t: u32) -> array<vec4<f32>, CELLS> {
#ifdef SPREAD_A
#if ROWS == 8
    if (subgroup_lanes < 8u) {
        return accumulate_n(slot, n0, m0, t);
    }
#endif
#endif
    return accumulate_w(slot, n0, m0, t);
}

// The SPLIT threads of a column group add their sums (thread t = 0 gets the total); call in uniform control flow.
fn split_sum(sums: array<vec4<f32>, CELLS>, lid: u32) -> array<vec4<f32>, CELLS> {
    var acc = sums;
#if SPLIT != 1
#ifdef SUBGROUP_SPLIT
    // the SPLIT threads are SPLIT neighbouring lanes of one subgroup (SPLIT divides the subgroup size): a butterfly
    // of shuffles leaves the total in every one of them, with no workgroup memory and no barrier
    for (var i = 0u; i < CELLS; i++) {
        for (var d = 1u; d < #{SPLIT}u; d <<= 1u) {
            acc[i] += subgroupShuffleXor(acc[i], d);
        }
    }
#else
    for (var i = 0u; i < CELLS; i++) {
        partial[lid * CELLS + i] = acc[i];
    }
    workgroupBarrier();
    for (var j = 1u; j < #{SPLIT}u; j++) {
        for (var i = 0u; i < CELLS; i++) {
            acc[i] += partial[(lid + j) * CELLS + i];
        }
    }
    workgroupBarrier();
#endif
#endif
    return acc;
}

#ifndef GATED
fn store4(slot: u32, m: u32, n0: u32, value: vec4<f32>) {
    let n_cols = slot_n(slot);
    for (var c = 0u; c < 4u; c++) {
        let n = n0 + c;
        if (n < n_cols) {
#ifdef CHUNKED
            let i = m * #{YN} + #{COL0} + n;  // a column range: y keeps the whole product's N columns
#else
            let i = m * n_cols + n;
#endif
#ifdef BIAS
            store_y(slot, i, #{A_T}(value[c] + bias_at(slot, n)));
#else
            store_y(slot, i, #{A_T}(value[c]));
#endif
        }
    }
}

fn product(slot: u32, n0: u32, m0: u32, lid: u32) {
    let t = lid % #{SPLIT}u;
    let acc = split_sum(accumulate(slot, n0, m0, t), lid);
    if (t != 0u) {
        return;
    }
    for (var r = 0u; r < #{ROWS}u; r++) {
        for (var g = 0u; g < #{CG}u; g++) {
            if (m0 + r < #{M} && n0 + 4u * g < slot_n(slot)) {
                store4(slot, m0 + r, n0 + 4u * g, acc[r * #{CG}u + g]);
            }
        }
    }
}
#else
fn gated_product(n0: u32, m0: u32, lid: u32) {
    let t = lid % #{SPLIT}u;
    let gate = split_sum(accumulate(0u, n0, m0, t), lid);
    let up = split_sum(accumulate(1u, n0, m0, t), lid);
    if (t != 0u) {
        return;
    }
    for (var r = 0u; r < #{ROWS}u; r++) {
        for (var g = 0u; g < #{CG}u; g++) {
            for (var c = 0u; c < 4u; c++) {
                let n = n0 + 4u * g + c;
                if (m0 + r < #{M} && n < #{N0}) {
                    y0[(m0 + r) * #{N0} + n] = gated(gate[r * #{CG}u + g][c], up[r * #{CG}u + g][c]);
                }
            }
        }
    }
}
#endif

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
#ifdef SHARED_A
    @builtin(subgroup_invocation_id) sid: u32,
#endif
#ifdef SPREAD_A
    @builtin(subgroup_size) lanes: u32,
#endif
) {
#ifdef SHARED_A
    subgroup_lane = sid;
#endif
#ifdef SPREAD_A
    subgroup_lanes = lanes;
#endif
    // x (and y, when the runtime splits a long x) count column groups over all slots; z counts row groups
    let group = wid.x + wid.y * nwg.x;
    let m0 = wid.z * #{ROWS}u;
#ifdef Q_SHARED
    quantize_row(m0, lid);
#endif
#ifdef GATED
    gated_product((group * THREADS + lid / #{SPLIT}u) * COLUMNS, m0, lid);
#else
    let owner = slot_of(group);
    let n0 = ((group - owner.y) * THREADS + lid / #{SPLIT}u) * COLUMNS;
    switch owner.x {
#for s in #{OTHER_SLOTS}
        case #{s}u: { product(#{s}u, n0, m0, lid); }
#endfor
        default: { product(0u, n0, m0, lid); }
    }
#endif
}
