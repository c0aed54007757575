// NonMaxSuppression, in three dispatches (the middle one's total is read back to size the output):
//
// SELECT (one workgroup per (batch, class) group g): onnxruntime's greedy loop, without a sort.
// Every box above the score threshold starts alive; each round the workgroup reduces the alive boxes
// to the best one (higher score, then lower index: the order onnxruntime's priority queue pops),
// selects it, and kills it and every alive box whose IoU with it exceeds the threshold. A box is
// selected exactly when no better selected box suppressed it, which is onnxruntime's rule; rounds
// stop when nothing is alive or MAX_OUT boxes are selected. IoU is symmetric, computed as onnxruntime
// computes it (corners from min/max or centre -/+ half size, area from the corners or width*height).
// TOTAL (one invocation): the groups' counts summed, for the runtime to read back.
// WRITE (one invocation per (group, slot)): row (groups before g) + j of the output gets
// [batch, class, box] for the j-th box g selected.
//
// Bindings (SELECT): 0 in_boxes, 1 in_scores, then B_MAX in_max (i32: int64 as i32; MAX_INPUT),
//   B_IOU in_iou (IOU_INPUT), B_SCORE in_score (SCORE_INPUT), then B_ALIVE alive (u32 [G*N]),
//   B_ALIVE + 1 selected (i32 [G*N]), B_ALIVE + 2 counts (u32 [G]).
// Bindings (TOTAL): 0 counts (read), 1 total (u32, one word).
// Bindings (WRITE): 0 counts, 1 selected (read), 2 out_y (i32 [TOTAL * 3]: int64 travels as i32).
// Defs: SELECT / TOTAL / WRITE (which stage); CENTER (flag: center_point_box = 1); SCORE_FILTER
//   (flag: a score threshold is given); MAX_OUT, IOU, SCORE (WGSL expressions: a literal, or a read
//   of the run-time input); the binding indices above; WORKGROUP_SIZE (WRITE).
// Dims: N (boxes per batch), C (classes), G (batches * classes).
#ifdef WRITE
#import onyxia::entry
#endif

const NONE: u32 = 0xffffffffu;

#ifdef SELECT
const THREADS: u32 = 256u;

@group(0) @binding(0) var<storage, read> in_boxes: array<f32>;
@group(0) @binding(1) var<storage, read> in_scores: array<f32>;
#ifdef MAX_INPUT
@group(0) @binding(#{B_MAX}) var<storage, read> in_max: array<i32>;
#endif
#ifdef IOU_INPUT
@group(0) @binding(#{B_IOU}) var<storage, read> in_iou: array<f32>;
#endif
#ifdef SCORE_INPUT
@group(0) @binding(#{B_SCORE}) var<storage, read> in_score: array<f32>;
#endif
@group(0) @binding(#{B_ALIVE}) var<storage, read_write> alive: array<u32>;
@group(0) @binding(#{B_SELECTED}) var<storage, read_write> selected: array<i32>;
@group(0) @binding(#{B_COUNTS}) var<storage, read_write> counts: array<u32>;

var<workgroup> best_score: array<f32, THREADS>;
var<workgroup> best_index: array<u32, THREADS>;
var<workgroup> picked: u32;
var<workgroup> chosen: u32;

struct Box {
    lo: vec2<f32>,  // (y_min, x_min)
    hi: vec2<f32>,  // (y_max, x_max)
    area: f32,
}

fn load_box(batch: u32, i: u32) -> Box {
    let at = (batch * #{N} + i) * 4u;
    let v = vec4<f32>(in_boxes[at], in_boxes[at + 1u], in_boxes[at + 2u], in_boxes[at + 3u]);
#ifdef CENTER
    // [x_center, y_center, width, height]
    let half = vec2<f32>(v.w / 2.0, v.z / 2.0);
    let centre = vec2<f32>(v.y, v.x);
    return Box(centre - half, centre + half, v.z * v.w);
#else
    // [y1, x1, y2, x2], any diagonal pair of corners
    let lo = min(v.xy, v.zw);
    let hi = max(v.xy, v.zw);
    return Box(lo, hi, (hi.x - lo.x) * (hi.y - lo.y));
#endif
}

fn suppresses(a: Box, b: Box, iou: f32) -> bool {
    let x_min = max(a.lo.y, b.lo.y);
    let x_max = min(a.hi.y, b.hi.y);
    if (x_max <= x_min) {
        return false;
    }
    let y_min = max(a.lo.x, b.lo.x);
    let y_max = min(a.hi.x, b.hi.x);
    if (y_max <= y_min) {
        return false;
    }
    let intersection = (x_max - x_min) * (y_max - y_min);
    if (intersection <= 0.0) {
        return false;
    }
    let union_area = b.area + a.area - intersection;
    return intersection / union_area > iou;
}

// (s, i) comes before (best_s, best_i): the higher score, then the lower index; NONE never does.
fn before(s: f32, i: u32, best_s: f32, best_i: u32) -> bool {
    return i != NONE && (best_i == NONE || s > best_s || (s == best_s && i < best_i));
}

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let g = wid.x + wid.y * nwg.x;
    if (g >= #{G}) {
        return;
    }
    let batch = g / #{C};
    let first = g * #{N};
    let limit = #{MAX_OUT};
    let iou = #{IOU};
    for (var i = lid; i < #{N}; i += THREADS) {
        var keep = true;
#ifdef SCORE_FILTER
        keep = in_scores[first + i] > #{SCORE};
#endif
        alive[first + i] = select(0u, 1u, keep);
    }
    if (lid == 0u) {
        chosen = 0u;
    }
    storageBarrier();
    loop {
        var s = 0.0;
        var at = NONE;
        for (var i = lid; i < #{N}; i += THREADS) {
            if (alive[first + i] != 0u && before(in_scores[first + i], i, s, at)) {
                s = in_scores[first + i];
                at = i;
            }
        }
        best_score[lid] = s;
        best_index[lid] = at;
        workgroupBarrier();
        for (var stride = THREADS / 2u; stride > 0u; stride = stride / 2u) {
            if (lid < stride && before(best_score[lid + stride], best_index[lid + stride], best_score[lid], best_index[lid])) {
                best_score[lid] = best_score[lid + stride];
                best_index[lid] = best_index[lid + stride];
            }
            workgroupBarrier();
        }
        if (lid == 0u) {
            let pick = best_index[0];
            if (pick == NONE || chosen >= limit) {
                picked = NONE;
            } else {
                selected[first + chosen] = i32(pick);
                chosen += 1u;
                picked = pick;
            }
        }
        let p = workgroupUniformLoad(&picked);
        if (p == NONE) {
            break;
        }
        let kept = load_box(batch, p);
        for (var i = lid; i < #{N}; i += THREADS) {
            if (alive[first + i] != 0u && (i == p || suppresses(load_box(batch, i), kept, iou))) {
                alive[first + i] = 0u;
            }
        }
        storageBarrier();
    }
    if (lid == 0u) {
        counts[g] = chosen;
    }
}
#endif

#ifdef TOTAL
@group(0) @binding(0) var<storage, read> counts: array<u32>;
@group(0) @binding(1) var<storage, read_write> total: array<u32>;

@compute @workgroup_size(1)
fn main() {
    var sum = 0u;
    for (var g = 0u; g < #{G}; g++) {
        sum += counts[g];
    }
    total[0] = sum;
}
#endif

#ifdef WRITE
@group(0) @binding(0) var<storage, read> counts: array<u32>;
@group(0) @binding(1) var<storage, read> selected: array<i32>;
@group(0) @binding(2) var<storage, read_write> out_y: array<i32>;

fn element_count() -> u32 { return #{G} * #{N}; }

fn element(i: u32) {
    let g = i / #{N};
    let j = i % #{N};
    if (j >= counts[g]) {
        return;
    }
    var row = j;
    for (var h = 0u; h < g; h++) {
        row += counts[h];
    }
    out_y[row * 3u] = i32(g / #{C});
    out_y[row * 3u + 1u] = i32(g % #{C});
    out_y[row * 3u + 2u] = selected[i];
}
#endif
