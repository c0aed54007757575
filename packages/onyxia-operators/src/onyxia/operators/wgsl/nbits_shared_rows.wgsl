#define_import_path onyxia::nbits_shared_rows
// MatMulNBits' reads of a and a_scales for the rows its workgroup shares (matmul_nbits.wgsl's defs: SHARED_A, INT8,
// Q_SHARED, SPREAD_A, ROWS, ROW_ITEMS, MP, dim M). With SHARED_A lane 0 of each subgroup loads them and
// subgroupBroadcast hands them to the other lanes: lavapipe runs every storage load lane by lane, whatever the
// address, so 8 lanes loading one value cost 8 loads, and an elected load and a broadcast about one. With SPREAD_A
// each lane loads a different row (`a_spread`). main sets subgroup_lane (and subgroup_lanes with SPREAD_A).
#import onyxia::nbits_activations

var<private> subgroup_lane: u32;  // this invocation's lane in its subgroup (SHARED_A)

// A row's eight values as the product sums them: i32 with INT8 (a_ints), else f32 (a_eight).
#ifdef INT8
alias Row = EightI;

fn a_row(m: u32, k0: u32) -> Row {
    return a_ints(m, k0);
}
#else
alias Row = Eight;

fn a_row(m: u32, k0: u32) -> Row {
    return a_eight(m, k0);
}
#endif

// Row m's elements k0 .. k0 + 7 (a_row), the same for every thread of the workgroup.
fn a_shared(m: u32, k0: u32) -> Row {
#ifdef SHARED_A
    var x = Row();
    if (subgroup_lane == 0u) {
        x = a_row(m, k0);
    }
    return Row(subgroupBroadcast(x.lo, 0u), subgroupBroadcast(x.hi, 0u));
#else
    return a_row(m, k0);
#endif
}

#ifdef SPREAD_A
var<private> subgroup_lanes: u32;  // the subgroup's size (SPREAD_A)

// Row m0 + l (of the ROWS rows at m0), elements k0 .. k0 + 7, loaded by lane l % ROWS for the whole subgroup.
fn spread_row(m0: u32, k0: u32, lanes: u32) -> Row {
    return a_row(min(m0 + subgroup_lane % lanes, #{M} - 1u), k0);
}

// Rows m0 .. m0 + ROWS - 1 (ROWS 4 or 8), elements k0 .. k0 + 7, spread over the subgroup: one load per lane where
// a_shared's costs a load per row, lane by lane. Two ways (the A_READS items; matmul_nbits.wgsl keeps a copy of its
// sums per way and picks one per invocation, since the subgroup size is known only at run time and a branch in the
// loop blended the spread rows every word: 5% of the rows8 tile): `w`, lane l loads row m0 + l % ROWS into `mine`
// (subgroups of at least ROWS lanes, and ROWS 4 on any); `n` (ROWS 8 on 4-lane subgroups), lane l loads rows
// m0 + l % 4 into `mine` and m0 + 4 + l % 4 into `high`. The caller broadcasts each row where it uses it
// (`spread_high_<way>`), so only `mine` and `high` stay live across the rows, not every row at once. Every lane of
// the subgroup must call it.
struct Spread {
    mine: Row,
    high: Row,
}

fn a_spread_w(m0: u32, k0: u32) -> Spread {
    var s = Spread();
    s.mine = spread_row(m0, k0, #{ROWS}u);
    return s;
}

// Whether row r of the spread rows (a constant: subgroupBroadcast takes a constant lane) comes from `high`, lane
// r % 4, rather than `mine`, lane r: never with `w`; rows 4 .. 7 with `n`.
fn spread_high_w(r: u32) -> bool {
    return false;
}

#if ROWS == 8
fn a_spread_n(m0: u32, k0: u32) -> Spread {
    var s = Spread();
    s.mine = spread_row(m0, k0, 4u);
    s.high = spread_row(m0 + 4u, k0, 4u);
    return s;
}

fn spread_high_n(r: u32) -> bool {
    return r >= 4u;
}
#endif
#endif

#ifdef INT8
#ifndef Q_SHARED
// The int8 scales of rows m0 .. m0 + ROWS - 1 in block blk (block-major, 4 rows to a vec4, M padded to 4, m0 a
// multiple of 4 when ROWS > 1; rows past M read the padding or the next block, and are never stored), the same for
// every thread of the workgroup.
fn row_scales(blk: u32, m0: u32) -> array<f32, #{ROWS}> {
    var scales: array<f32, #{ROWS}>;
    let i = blk * #{MP} + m0;
    for (var j = 0u; j < (#{ROWS}u + 3u) / 4u; j++) {
#ifdef SHARED_A
        var v = vec4<f32>(0.0);
        if (subgroup_lane == 0u) {
            v = a_scales[i / 4u + j];
        }
        v = subgroupBroadcast(v, 0u);
#else
        let v = a_scales[i / 4u + j];
#endif
        for (var r = 4u * j; r < min(4u * j + 4u, #{ROWS}u); r++) {
            scales[r] = v[(i + r) % 4u];  // ROWS 1: row m0 anywhere in its vec4
        }
    }
    return scales;
}
#endif
#endif
