// Cosine-sum window: y[i] = A0 - A1 cos(2 pi i / DENOM) + A2 cos(4 pi i / DENOM), computed in f32.
// Bindings: 0 out_y (write).
// Defs: Y_T (f32 or f16), F16 (flag), A0, A1, A2 (f32 literals: the row's coefficients), WORKGROUP_SIZE.
// Dims: N (window length), DENOM (N when periodic, N - 1 when symmetric): literals or immediates.
#ifdef F16
enable f16;
#endif
#import onyxia::entry

@group(0) @binding(0) var<storage, read_write> out_y: array<#{Y_T}>;

fn element_count() -> u32 { return #{N}; }

fn element(i: u32) {
    // The angle from the index modulo DENOM keeps the f32 argument within one turn.
    let m = select(i, i % #{DENOM}, #{DENOM} > 0u);
    let angle = 6.2831853 * f32(m) / f32(#{DENOM});
    let value = #{A0} - #{A1} * cos(angle) + #{A2} * cos(2.0 * angle);
    out_y[i] = #{Y_T}(value);
}
