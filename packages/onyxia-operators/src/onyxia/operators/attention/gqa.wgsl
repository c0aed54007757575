#ifdef F16
enable f16;
#endif

@group(0) @binding(0) var<storage, read> in_q: array<#{T}>;
@group(0) @binding(1) var<storage, read> in_k: array<#{T}>;
@group(0) @binding(2) var<storage, read> in_v: array<#{T}>;
@group(0) @binding(3) var<storage, read> seqlens_k: array<#{SEQLENS_T}>;
@group(0) @binding(4) var<storage, read_write> out_y: array<#{T}>;

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let s = wid.x * #{WORKGROUP_SIZE}u + lid;
    let head = wid.y;
    let b = wid.z;
    if (s >= #{SEQ}) {
        return;
    }
    let q_base = ((b * #{SEQ} + s) * #{NUM_HEADS}u + head) * #{HEAD_SIZE}u;
    var q: array<f32, #{HEAD_SIZE}>;
    for (var h = 0u; h < #{HEAD_SIZE}u; h++) {
        q[h] = f32(in_q[q_base + h]) * #{SCALE};
    }
    let total = u32(seqlens_k[b] + 1);
    let hi = min(s + 1u, total);
    var lo = 0u;
#ifdef WINDOW
    lo = select(0u, s + 1u - #{WINDOW}u, s + 1u > #{WINDOW}u);
#endif
    let kv_base = b * #{KV_BATCH_STRIDE} + (head / #{GROUP}u) * #{KV_HEAD_STRIDE};
    var run_max = -3.0e38;
    var run_sum = 0.0;
    var acc: array<f32, #{HEAD_SIZE}>;
    for (var j = lo; j < hi; j++) {
        let row = kv_base + j * #{KV_SEQ_STRIDE};
        var dot = 0.0;
        for (var h = 0u; h < #{HEAD_SIZE}u; h++) {
            dot += q[h] * f32(in_k[row + h]);
        }
#ifdef SOFTCAP
        dot = #{SOFTCAP} * tanh(clamp(dot / #{SOFTCAP}, -15.0, 15.0));
#endif
        let new_max = max(run_max, dot);
        let correction = exp(run_max - new_max);
        let p = exp(dot - new_max);
        run_sum = run_sum * correction + p;
        run_max = new_max;
        for (var h = 0u; h < #{HEAD_SIZE}u; h++) {
            acc[h] = acc[h] * correction + p * f32(in_v[row + h]);
        }
    }
    let inv_sum = select(1.0 / run_sum, 0.0, run_sum == 0.0);
    for (var h = 0u; h < #{HEAD_SIZE}u; h++) {
        out_y[q_base + h] = #{T}(acc[h] * inv_sum);
    }
}
