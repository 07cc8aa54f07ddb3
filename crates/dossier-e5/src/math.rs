//! The float parts of the encoder: LayerNorm, GELU, softmax attention.
//!
//! They are a small share of the work only if they vectorise: a 512-token window needs
//! about 9 M GELUs and 38 M exponentials. So `exp` and `erf` are written here as plain
//! arithmetic that the compiler turns into SIMD, and every entry point has a copy
//! compiled for AVX-512 and one for AVX2 ([`simd!`]), picked with the kernels' [`Isa`].
//!
//! Accuracy: `exp` has a relative error below 5e-7 on the range used; `erf` is
//! Abramowitz & Stegun 7.1.26 (absolute error 1.5e-7, under 3.5e-7 in f32) with
//! a Taylor series near 0, where that formula cancels, far below the int8 activation noise both engines
//! share.

use crate::kernels::Isa;

/// Defines `pub fn NAME(isa, args..)` that runs `BODY` compiled for the ISA's features.
macro_rules! simd {
    ($(#[$m:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        $(#[$m])*
        pub fn $name(isa: Isa, $($arg: $ty),*) {
            #[inline(always)]
            fn body($($arg: $ty),*) $body
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f,avx512bw,avx2,fma")]
            unsafe fn wide($($arg: $ty),*) { body($($arg),*) }
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn narrow($($arg: $ty),*) { body($($arg),*) }
            match isa {
                // SAFETY: `Isa::detect` saw these features.
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512Vnni => unsafe { wide($($arg),*) },
                // SAFETY: as above.
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2 => unsafe { narrow($($arg),*) },
                _ => body($($arg),*),
            }
        }
    };
}

/// e^x for x in [-87, 88] (clamped outside), branch-free so that loops vectorise.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Adding and subtracting 1.5 · 2^23 rounds to the nearest integer in any SIMD width.
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 88.0);
    let n = (x * LOG2E + ROUND) - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0
                    + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r / 5040.0))))));
    p * f32::from_bits(((n as i32 + 127) << 23) as u32)
}

/// erf(x), Abramowitz & Stegun 7.1.26.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_74 + t * (1.421_413_7 + t * (-1.453_152 + t * 1.061_405_4))));
    let far = 1.0 - poly * exp(-a * a);
    // Near 0 the subtraction above cancels; the Taylor series is exact to f32 there.
    let x2 = a * a;
    let near = a
        * std::f32::consts::FRAC_2_SQRT_PI
        * (1.0
            + x2 * (-1.0 / 3.0
                + x2 * (1.0 / 10.0 + x2 * (-1.0 / 42.0 + x2 * (1.0 / 216.0 - x2 / 1320.0)))));
    let y = if a < 0.5 { near } else { far };
    y.copysign(x)
}

simd! {
    /// GELU (the exact, erf form) in place.
    fn gelu(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2));
        }
    }
}

/// Σ f(x) in 16 independent lanes: a sequential float sum cannot be vectorised (its
/// order is part of its result), this one can.
#[inline(always)]
fn sum_by(x: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut lanes = [0f32; 16];
    let mut chunks = x.chunks_exact(16);
    for c in &mut chunks {
        for (l, v) in lanes.iter_mut().zip(c) {
            *l += f(*v);
        }
    }
    lanes.iter().sum::<f32>() + chunks.remainder().iter().map(|v| f(*v)).sum::<f32>()
}

#[inline(always)]
fn sum(x: &[f32]) -> f32 {
    sum_by(x, |v| v)
}

/// Keys `[len × hd]` rearranged for [`attend`]: blocks of 16 keys, each `[hd × 16]`,
/// the last block padded with zeros.
pub fn key_blocks(k: &[f32], hd: usize) -> Vec<f32> {
    let len = k.len() / hd;
    let mut out = vec![0f32; len.div_ceil(16) * 16 * hd];
    for (i, row) in k.chunks_exact(hd).enumerate() {
        let (b, j) = (i / 16, i % 16);
        for (e, &x) in row.iter().enumerate() {
            out[b * hd * 16 + e * 16 + j] = x;
        }
    }
    out
}

simd! {
    /// `x = LayerNorm(x + add)` row by row (`add` empty: `LayerNorm(x)`).
    fn add_layer_norm(x: &mut [f32], add: &[f32], w: &[f32], b: &[f32], eps: f32) {
        let h = w.len();
        for (i, row) in x.chunks_exact_mut(h).enumerate() {
            if !add.is_empty() {
                for (v, a) in row.iter_mut().zip(&add[i * h..(i + 1) * h]) {
                    *v += a;
                }
            }
            let mean = sum(row) / h as f32;
            let var = sum_by(row, |v| (v - mean) * (v - mean)) / h as f32;
            let inv = 1.0 / (var + eps).sqrt();
            for ((v, w), b) in row.iter_mut().zip(w).zip(b) {
                *v = (*v - mean) * inv * w + b;
            }
        }
    }
}

/// Query rows attended together: their score and context accumulators are
/// independent chains that share each key and value load.
pub const ROWS: usize = 4;

simd! {
    /// Softmax attention of one head over one segment. `q` holds the segment's query
    /// rows for this head (`[rows × hd]`, rows padded with zeros to a multiple of
    /// [`ROWS`]), `v` its `[len × hd]` value rows, `kb` its keys in blocks of sixteen,
    /// each block `[hd × 16]` ([`key_blocks`]); `out` receives `[rows × hd]`; `scores`
    /// is scratch of at least `ROWS × len` rounded up to 16.
    fn attend(q: &[f32], kb: &[f32], v: &[f32], out: &mut [f32], scores: &mut [f32], hd: usize) {
        let len = v.len() / hd;
        let padded = kb.len() / hd;
        let scale = 1.0 / (hd as f32).sqrt();
        for (qg, og) in q.chunks_exact(ROWS * hd).zip(out.chunks_exact_mut(ROWS * hd)) {
            // Scores of ROWS queries, sixteen keys at a time, in registers.
            for (b, blk) in kb.chunks_exact(hd * 16).enumerate() {
                let mut acc = [[0f32; 16]; ROWS];
                for (e, k) in blk.chunks_exact(16).enumerate() {
                    for (r, a) in acc.iter_mut().enumerate() {
                        let qe = qg[r * hd + e];
                        for (a, k) in a.iter_mut().zip(k) {
                            *a += qe * k;
                        }
                    }
                }
                for (r, a) in acc.iter().enumerate() {
                    scores[r * padded + b * 16..][..16].copy_from_slice(a);
                }
            }
            // Softmax of each row (the padding keys excluded).
            let mut inv = [0f32; ROWS];
            for (r, inv) in inv.iter_mut().enumerate() {
                let row = &mut scores[r * padded..r * padded + len];
                let mut lanes = [f32::NEG_INFINITY; 16];
                for c in row.chunks(16) {
                    for (l, s) in lanes.iter_mut().zip(c) {
                        *l = l.max(*s);
                    }
                }
                let max = lanes.iter().fold(f32::NEG_INFINITY, |m, l| m.max(*l)) * scale;
                for s in row.iter_mut() {
                    *s = exp(*s * scale - max);
                }
                *inv = 1.0 / sum(row);
            }
            // Context rows: Σ p·v, ROWS rows sharing each value row.
            if hd == 32 {
                let mut acc = [[0f32; 32]; ROWS];
                for (j, vs) in v.chunks_exact(32).enumerate() {
                    for (r, a) in acc.iter_mut().enumerate() {
                        let p = scores[r * padded + j];
                        for (a, x) in a.iter_mut().zip(vs) {
                            *a += p * x;
                        }
                    }
                }
                for (r, a) in acc.iter().enumerate() {
                    for (o, a) in og[r * 32..(r + 1) * 32].iter_mut().zip(a) {
                        *o = a * inv[r];
                    }
                }
            } else {
                for (r, ot) in og.chunks_exact_mut(hd).enumerate() {
                    ot.iter_mut().for_each(|o| *o = 0.0);
                    for (j, vs) in v.chunks_exact(hd).enumerate() {
                        let p = scores[r * padded + j];
                        for (o, x) in ot.iter_mut().zip(vs) {
                            *o += p * x;
                        }
                    }
                    ot.iter_mut().for_each(|o| *o *= inv[r]);
                }
            }
        }
    }
}

simd! {
    /// Quantises `x` into `q` (offset to unsigned) and `d`, per 32-block: scale
    /// `max|x| / 127`, values rounded half to even (as `lrintf` does).
    fn quantise_blocks(x: &[f32], q: &mut [u8], d: &mut [f32]) {
        // Adding and subtracting 1.5 · 2^23 rounds half to even in any SIMD width.
        const ROUND: f32 = 12_582_912.0;
        for ((xb, qb), d) in x.chunks_exact(32).zip(q.chunks_exact_mut(32)).zip(d.iter_mut()) {
            let mut lanes = [0f32; 16];
            for c in xb.chunks_exact(16) {
                for (l, v) in lanes.iter_mut().zip(c) {
                    *l = l.max(v.abs());
                }
            }
            let amax = lanes.iter().fold(0f32, |m, l| m.max(*l));
            let scale = amax / 127.0;
            let inv = if scale > 0.0 { 1.0 / scale } else { 0.0 };
            for (q, &v) in qb.iter_mut().zip(xb) {
                // max/min rather than clamp: clamp keeps a NaN, max/min put it in range.
                #[allow(clippy::manual_clamp)]
                let r = ((v * inv + ROUND) - ROUND).max(-128.0).min(127.0) + 128.0;
                // SAFETY: r is finite and within 0..=255.
                *q = unsafe { r.to_int_unchecked::<u8>() };
            }
            *d = scale;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_accurate() {
        let mut worst = 0f64;
        let mut x = -80.0f32;
        while x < 80.0 {
            let rel = ((f64::from(exp(x)) - f64::from(x).exp()) / f64::from(x).exp()).abs();
            worst = worst.max(rel);
            x += 0.0137;
        }
        assert!(worst < 5e-7, "worst relative error {worst}");
        assert_eq!(exp(-1000.0), exp(-87.0));
    }

    #[test]
    fn erf_is_accurate() {
        let mut worst = 0f64;
        let mut x = -6.0f32;
        while x < 6.0 {
            worst = worst.max((f64::from(erf(x)) - libm::erf(f64::from(x))).abs());
            x += 0.001;
        }
        // The formula's 1.5e-7 plus f32 rounding of `1 - poly · e^(-x²)`.
        assert!(worst < 3.5e-7, "worst absolute error {worst}");
    }

    #[test]
    fn every_isa_gives_the_same_float_parts() {
        let xs: Vec<f32> = (0..96)
            .map(|i| ((i * 37 % 23) as f32 - 11.0) / 3.0)
            .collect();
        let mut want = xs.clone();
        gelu(Isa::Portable, &mut want);
        for (x, g) in xs.iter().zip(&want) {
            let exact = 0.5 * f64::from(*x) * (1.0 + libm::erf(f64::from(*x) / 2f64.sqrt()));
            assert!((f64::from(*g) - exact).abs() < 1e-6);
        }
        for isa in Isa::available() {
            let mut got = xs.clone();
            gelu(isa, &mut got);
            for (a, b) in got.iter().zip(&want) {
                assert!((a - b).abs() <= 1e-6 * (1.0 + b.abs()), "{isa:?}");
            }
            let (w, b) = (vec![1.5f32; 32], vec![0.25f32; 32]);
            let mut ln = xs.clone();
            add_layer_norm(isa, &mut ln, &xs, &w, &b, 1e-12);
            let row = &ln[..32];
            let mean = row.iter().map(|v| (v - 0.25) / 1.5).sum::<f32>() / 32.0;
            assert!(mean.abs() < 1e-5, "{isa:?}: normalised mean {mean}");
            // Attention of a query equal to one key, scaled up, picks that key's value.
            let hd = 4;
            let k = key_blocks(&[10.0, 0.0, 0.0, 0.0, 0.0, 10.0, 0.0, 0.0], 4);
            let v = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
            let mut q = vec![0.0; 4 * ROWS];
            q[1] = 10.0;
            let mut out = vec![0.0; 4 * ROWS];
            let mut scratch = vec![0.0; 16 * ROWS];
            attend(isa, &q, &k, &v, &mut out, &mut scratch, hd);
            assert!(
                (out[0] - 5.0).abs() < 1e-6 && (out[3] - 8.0).abs() < 1e-6,
                "{out:?}"
            );
        }
    }

    /// Both code paths of `attend` (whole blocks of 16 keys and the rest; head size 32
    /// and others) equal a plain softmax attention computed in f64.
    #[test]
    fn attention_equals_the_plain_formula() {
        let mut seed = 1u32;
        let mut r = move || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 8) as f32 / (1u32 << 24) as f32 * 4.0 - 2.0
        };
        for &(len, hd) in &[(1, 32), (5, 32), (16, 32), (17, 32), (40, 8), (33, 32)] {
            let q: Vec<f32> = (0..len * hd).map(|_| r()).collect();
            let k: Vec<f32> = (0..len * hd).map(|_| r()).collect();
            let v: Vec<f32> = (0..len * hd).map(|_| r()).collect();
            let kb = key_blocks(&k, hd);
            let mut qp = q.clone();
            qp.resize(len.div_ceil(ROWS) * ROWS * hd, 0.0);
            for isa in Isa::available() {
                let mut out = vec![0f32; qp.len()];
                let mut scratch = vec![0f32; ROWS * len.div_ceil(16) * 16];
                attend(isa, &qp, &kb, &v, &mut out, &mut scratch, hd);
                for t in 0..len {
                    let s: Vec<f64> = (0..len)
                        .map(|j| {
                            (0..hd)
                                .map(|e| f64::from(q[t * hd + e]) * f64::from(k[j * hd + e]))
                                .sum::<f64>()
                                / (hd as f64).sqrt()
                        })
                        .collect();
                    let m = s.iter().cloned().fold(f64::MIN, f64::max);
                    let z: f64 = s.iter().map(|x| (x - m).exp()).sum();
                    for e in 0..hd {
                        let want: f64 = (0..len)
                            .map(|j| (s[j] - m).exp() / z * f64::from(v[j * hd + e]))
                            .sum();
                        let got = f64::from(out[t * hd + e]);
                        assert!(
                            (got - want).abs() < 1e-5,
                            "{isa:?} len {len} hd {hd}: {got} vs {want}"
                        );
                    }
                }
            }
        }
    }
}
