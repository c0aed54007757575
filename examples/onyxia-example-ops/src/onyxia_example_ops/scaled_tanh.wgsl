// com.example::ScaledTanh: y[i] = ALPHA * tanh(BETA * x[i]) over N elements.
//
// bindings:   0 x: array<f32> (read)    1 y: array<f32> (write)
// immediates: N when the element count is symbolic (the planner declares them)
// defs:       N               element count: a u32 literal, or imm.N when symbolic
//             ALPHA, BETA     f32 literals (finite; checked when planning)
//             WORKGROUP_SIZE  threads per workgroup (64)

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    // Row-major over a (possibly 2-D) grid, so the same shader works if a host splits a large
    // dispatch across y; the plan dispatches ceil(N / WORKGROUP_SIZE) along x only.
    let i = gid.x + gid.y * nwg.x * #{WORKGROUP_SIZE}u;
    if (i >= #{N}) {
        return;
    }
    // tanh is +-1 to f32 precision beyond |v| = 10; clamping keeps drivers that compute it as
    // (e^2v - 1) / (e^2v + 1) away from inf / inf = NaN.
    let v = clamp(#{BETA} * x[i], -10.0, 10.0);
    y[i] = #{ALPHA} * tanh(v);
}
