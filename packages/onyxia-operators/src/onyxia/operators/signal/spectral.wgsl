// Spectral sums (DFT, STFT): y[b, f, k, c] = scale * sum_n x[b, f, n, c] * window[n] * e^(-+2 pi i k n / N).
// Bindings: 0 in_x (read: real scalars, or (re, im) pairs when COMPLEX_IN),
//           1 in_twiddle (read: (cos, sin) of 2 pi m / N for m < N, from double on the host),
//           [2 in_window (read) when WINDOW], then out_y (write: (re, im) pairs, or reals when IRFFT).
// Defs: X_T (f32 or f16: signal, window and output storage), F16 (flag), WORKGROUP_SIZE,
//       COMPLEX_IN, INVERSE (e^+, then / N), IRFFT (x holds bins 0..N/2 of a Hermitian spectrum; the
//       output is the real signal), WINDOW: flags.
// Dims: COUNT output elements (b, f, k, c flattened), INNER (c), BINS (k), FRAMES (f); the input
//       offsets SB, SF, SN, SI in scalars per b, f, n, c; AVAIL samples present along n, LIMIT the
//       most a sum uses, N the transform length. Each may be a literal or an immediate.
#ifdef F16
enable f16;
#endif
#import onyxia::entry

@group(0) @binding(0) var<storage, read> in_x: array<#{X_T}>;
@group(0) @binding(1) var<storage, read> in_twiddle: array<vec2<f32>>;
#ifdef WINDOW
@group(0) @binding(2) var<storage, read> in_window: array<#{X_T}>;
@group(0) @binding(3) var<storage, read_write> out_y: array<#{X_T}>;
#else
@group(0) @binding(2) var<storage, read_write> out_y: array<#{X_T}>;
#endif

fn element_count() -> u32 { return #{COUNT}; }

fn sample(base: u32, n: u32) -> vec2<f32> {
    let at = base + n * #{SN};
#ifdef COMPLEX_IN
    var x = vec2<f32>(f32(in_x[at]), f32(in_x[at + 1u]));
#else
    var x = vec2<f32>(f32(in_x[at]), 0.0);
#endif
#ifdef WINDOW
    x *= f32(in_window[n]);
#endif
    return x;
}

fn element(i: u32) {
    let c = i % #{INNER};
    let k = (i / #{INNER}) % #{BINS};
    let f = (i / (#{INNER} * #{BINS})) % #{FRAMES};
    let b = i / (#{INNER} * #{BINS} * #{FRAMES});
    let base = b * #{SB} + f * #{SF} + c * #{SI};
    let terms = min(#{AVAIL}, #{LIMIT});
    var acc = vec2<f32>(0.0, 0.0);
    var m = 0u;  // k * n mod N, stepped so that the product never overflows u32
    for (var n = 0u; n < terms; n++) {
        let t = in_twiddle[m];
#ifdef INVERSE
        let w = t;
#else
        let w = vec2<f32>(t.x, -t.y);
#endif
        let x = sample(base, n);
#ifdef IRFFT
        // bins 1 .. ceil(N/2) - 1 stand for their conjugate mirror too: Re(x w) counts twice; the
        // imaginary parts of bin 0 and of bin N/2 drop out (sin is 0 there), as in numpy's irfft
        let twice = n != 0u && 2u * n != #{N};
        acc.x += select(1.0, 2.0, twice) * (x.x * w.x - x.y * w.y);
#else
        acc += vec2<f32>(x.x * w.x - x.y * w.y, x.x * w.y + x.y * w.x);
#endif
        m += k;
        if (m >= #{N}) {
            m -= #{N};
        }
    }
#ifdef INVERSE
    acc /= f32(#{N});
#endif
#ifdef IRFFT
    out_y[i] = #{X_T}(acc.x);
#else
    out_y[2u * i] = #{X_T}(acc.x);
    out_y[2u * i + 1u] = #{X_T}(acc.y);
#endif
}
