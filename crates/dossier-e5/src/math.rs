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
            let mean = row.iter().sum::<f32>() / h as f32;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / h as f32;
            let inv = 1.0 / (var + eps).sqrt();
            for ((v, w), b) in row.iter_mut().zip(w).zip(b) {
                *v = (*v - mean) * inv * w + b;
            }
        }
    }
}

simd! {
    /// Softmax attention of one head over one segment. `q`, `k`, `v` are the segment's
    /// `[len × hd]` rows for this head (contiguous); `out` receives `[len × hd]`;
    /// `scores` is scratch of at least `len`.
    fn attend(q: &[f32], k: &[f32], v: &[f32], out: &mut [f32], scores: &mut [f32], hd: usize) {
        let len = k.len() / hd;
        let scale = 1.0 / (hd as f32).sqrt();
        let scores = &mut scores[..len];
        for (qt, ot) in q.chunks_exact(hd).zip(out.chunks_exact_mut(hd)) {
            let mut max = f32::NEG_INFINITY;
            for (s, ks) in scores.iter_mut().zip(k.chunks_exact(hd)) {
                let d: f32 = qt.iter().zip(ks).map(|(a, b)| a * b).sum();
                *s = d * scale;
                max = max.max(*s);
            }
            let mut sum = 0.0;
            for s in scores.iter_mut() {
                *s = exp(*s - max);
                sum += *s;
            }
            let inv = 1.0 / sum;
            ot.iter_mut().for_each(|o| *o = 0.0);
            for (s, vs) in scores.iter().zip(v.chunks_exact(hd)) {
                let p = s * inv;
                for (o, x) in ot.iter_mut().zip(vs) {
                    *o += p * x;
                }
            }
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
        let xs: Vec<f32> = (0..96).map(|i| ((i * 37 % 23) as f32 - 11.0) / 3.0).collect();
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
            let k = vec![10.0, 0.0, 0.0, 0.0, 0.0, 10.0, 0.0, 0.0];
            let v = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
            let q = vec![0.0, 10.0, 0.0, 0.0];
            let mut out = vec![0.0; 4];
            let mut scratch = vec![0.0; 2];
            attend(isa, &q, &k, &v, &mut out, &mut scratch, hd);
            assert!((out[0] - 5.0).abs() < 1e-6 && (out[3] - 8.0).abs() < 1e-6, "{out:?}");
        }
    }
}
