// Cast: y[i] = EXPR(x[i]), a conversion between WGSL storage forms.
// Bindings: 0 in_x (read), 1 out_y (write).
// Defs: X_T, Y_T        WGSL storage types of input and output
//       EXPR            the conversion in terms of `x` (built by cast.py's `conversion`)
//       F16             flag: X_T or Y_T is f16
//       WORKGROUP_SIZE
// Dims: N element count (> 0), a literal when static, an immediate when symbolic.
#ifdef F16
enable f16;
#endif
#import onyxia::indexing

@group(0) @binding(0) var<storage, read> in_x: array<#{X_T}>;
@group(0) @binding(1) var<storage, read_write> out_y: array<#{Y_T}>;

@compute @workgroup_size(#{WORKGROUP_SIZE})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = flat_invocation(wid, nwg, lid, #{WORKGROUP_SIZE}u);
    if (i >= #{N}) {
        return;
    }
    let x = in_x[i];
    out_y[i] = #{EXPR};
}
