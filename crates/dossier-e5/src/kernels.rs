//! The hot path: `Y = X · Wᵀ + b` with 4-bit weights and 8-bit activations.
//!
//! Both sides keep the reference engine's quantisation, so the two engines agree to
//! float rounding: weights are the file's Q4_0 blocks (32 weights, one f16 scale) and
//! activations are quantised per token per 32-block to int8 with `scale = max|x| / 127`.
//! What differs is the arithmetic:
//!
//! - weights are unpacked once, at load, to signed int8 (`nibble - 8`) in **panels of 16
//!   output rows**: for each 32-block, 8 groups of `16 rows × 4 bytes`, exactly one
//!   512-bit register per group;
//! - activations are stored offset to unsigned (`q + 128`), so `vpdpbusd` (u8 × s8 → i32,
//!   4 products a lane) multiplies a broadcast of 4 activation bytes with 16 rows' weights
//!   at once, and the offset comes back out through a per-row constant
//!   (`-128 · Σ w` of the block) that seeds the accumulator: no correction in the loop;
//! - each 32-block's integer dot product is scaled by `d_w · d_a` and accumulated in f32,
//!   for a tile of tokens that share the loaded weights.
//!
//! Three implementations, picked once at load ([`Isa::detect`]): AVX-512 VNNI, AVX2
//! (`vpmaddubsw` + `vpmaddwd`; the products cannot saturate, |w| ≤ 8 and a ≤ 255), and
//! portable Rust. Tests hold the SIMD ones equal to the portable one, and all of them to
//! a plain dequantise-and-multiply reference.

use rayon::prelude::*;

use crate::format::{f16_to_f32, BLOCK, BLOCK_BYTES};

/// Output rows per panel (one 512-bit register of i32 / f32 lanes).
pub const PANEL: usize = 16;
const GROUPS: usize = BLOCK / 4;
/// Bytes of packed weights per (panel, block).
const PANEL_BLOCK: usize = PANEL * BLOCK;

/// The instruction set a kernel call uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    Avx512Vnni,
    Avx2,
    Portable,
}

impl Isa {
    /// The best this CPU runs.
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512bw")
                && std::is_x86_feature_detected!("avx512vnni")
            {
                return Isa::Avx512Vnni;
            }
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                return Isa::Avx2;
            }
        }
        Isa::Portable
    }

    /// Every implementation this CPU can run (for tests and benchmarks).
    pub fn available() -> Vec<Self> {
        let best = Self::detect();
        [Isa::Avx512Vnni, Isa::Avx2, Isa::Portable]
            .into_iter()
            .filter(|&i| match best {
                Isa::Avx512Vnni => true,
                Isa::Avx2 => i != Isa::Avx512Vnni,
                Isa::Portable => i == Isa::Portable,
            })
            .collect()
    }

    pub fn name(self) -> &'static str {
        match self {
            Isa::Avx512Vnni => "avx512-vnni",
            Isa::Avx2 => "avx2",
            Isa::Portable => "portable",
        }
    }
}

/// A linear layer's weights, unpacked into panels, with its bias.
pub struct PackedLinear {
    pub rows: usize,
    pub cols: usize,
    panels: usize,
    blocks: usize,
    /// [panel][block][group][row][4] signed weights.
    weights: Vec<i8>,
    /// [panel][block][row]: -128 · Σ weights of the row's block (undoes the u8 offset).
    seed: Vec<i32>,
    /// [panel][block][row]: the block's weight scale.
    scale: Vec<f32>,
    bias: Vec<f32>,
}

impl PackedLinear {
    /// From a row-major Q4_0 matrix of `rows` × `cols` and a bias of `rows`.
    pub fn from_q4(q4: &[u8], rows: usize, cols: usize, bias: Vec<f32>) -> Self {
        assert_eq!(cols % BLOCK, 0);
        assert_eq!(q4.len(), rows * cols / BLOCK * BLOCK_BYTES);
        assert_eq!(bias.len(), rows);
        let blocks = cols / BLOCK;
        let panels = rows.div_ceil(PANEL);
        let mut weights = vec![0i8; panels * blocks * PANEL_BLOCK];
        let mut seed = vec![0i32; panels * blocks * PANEL];
        let mut scale = vec![0f32; panels * blocks * PANEL];
        for row in 0..rows {
            let (p, r) = (row / PANEL, row % PANEL);
            for b in 0..blocks {
                let blk = &q4[(row * blocks + b) * BLOCK_BYTES..][..BLOCK_BYTES];
                let d = f16_to_f32(u16::from_le_bytes([blk[0], blk[1]]));
                let at = (p * blocks + b) * PANEL + r;
                scale[at] = d;
                let mut sum = 0i32;
                for k in 0..BLOCK {
                    let byte = blk[2 + k % 16];
                    let nib = if k < 16 { byte & 0x0f } else { byte >> 4 };
                    let w = nib as i8 - 8;
                    sum += i32::from(w);
                    let (g, lane) = (k / 4, k % 4);
                    weights[(p * blocks + b) * PANEL_BLOCK + g * PANEL * 4 + r * 4 + lane] = w;
                }
                seed[at] = -128 * sum;
            }
        }
        Self {
            rows,
            cols,
            panels,
            blocks,
            weights,
            seed,
            scale,
            bias,
        }
    }

    /// Integer multiply-accumulates of one token through this layer.
    pub fn macs_per_token(&self) -> usize {
        self.rows * self.cols
    }
}

/// Activations quantised per token per 32-block, offset to unsigned bytes.
pub struct QuantActs {
    pub tokens: usize,
    pub cols: usize,
    q: Vec<u8>,
    d: Vec<f32>,
}

impl QuantActs {
    pub fn new() -> Self {
        Self {
            tokens: 0,
            cols: 0,
            q: Vec::new(),
            d: Vec::new(),
        }
    }

    /// Quantises `x` (`tokens` rows of `cols`), reusing this buffer.
    pub fn quantise(&mut self, isa: Isa, x: &[f32], cols: usize) {
        assert_eq!(cols % BLOCK, 0);
        let tokens = x.len() / cols;
        self.tokens = tokens;
        self.cols = cols;
        self.q.resize(tokens * cols, 0);
        self.d.resize(tokens * cols / BLOCK, 0.0);
        // Many blocks per task: quantising is cheap, scheduling is not.
        const PER_TASK: usize = 256;
        x.par_chunks(BLOCK * PER_TASK)
            .zip(self.q.par_chunks_mut(BLOCK * PER_TASK))
            .zip(self.d.par_chunks_mut(PER_TASK))
            .for_each(|((x, q), d)| crate::math::quantise_blocks(isa, x, q, d));
    }
}

impl Default for QuantActs {
    fn default() -> Self {
        Self::new()
    }
}

/// Tokens computed together against one load of a panel's weights.
const TILE: usize = 8;

/// `y[t][o] = Σ_k x[t][k] w[o][k] + b[o]` for the tokens `tokens` and the panels
/// `panels`; `y` is the whole `[tokens × rows]` output, written only in that rectangle.
///
/// # Safety
/// `y` must point to `x.tokens * w.rows` floats, and no other thread may write the same
/// rectangle at the same time.
pub unsafe fn gemm_part(
    isa: Isa,
    x: &QuantActs,
    w: &PackedLinear,
    y: *mut f32,
    tokens: std::ops::Range<usize>,
    panels: std::ops::Range<usize>,
) {
    assert_eq!(x.cols, w.cols);
    assert!(tokens.end <= x.tokens && panels.end <= w.panels);
    let mut out = [[0f32; PANEL]; TILE];
    for p in panels {
        let mut t0 = tokens.start;
        while t0 < tokens.end {
            let n = (tokens.end - t0).min(TILE);
            match isa {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `Isa::detect` saw the features.
                Isa::Avx512Vnni => unsafe { x86::tile_avx512(x, w, p, t0, n, &mut out) },
                #[cfg(target_arch = "x86_64")]
                // SAFETY: as above.
                Isa::Avx2 => unsafe { x86::tile_avx2(x, w, p, t0, n, &mut out) },
                _ => tile_portable(x, w, p, t0, n, &mut out),
            }
            let rows = (w.rows - p * PANEL).min(PANEL);
            for (i, o) in out.iter().enumerate().take(n) {
                let t = t0 + i;
                for (r, v) in o.iter().enumerate().take(rows) {
                    let row = p * PANEL + r;
                    // SAFETY: in bounds by the assertions; the rectangle is ours.
                    unsafe { *y.add(t * w.rows + row) = v + w.bias[row] };
                }
            }
            t0 += n;
        }
    }
}

/// Number of panels of a layer (the unit [`gemm_part`] splits on).
pub fn panels(w: &PackedLinear) -> usize {
    w.panels
}

fn tile_portable(
    x: &QuantActs,
    w: &PackedLinear,
    p: usize,
    t0: usize,
    n: usize,
    out: &mut [[f32; PANEL]; TILE],
) {
    let blocks = w.blocks;
    for (i, o) in out.iter_mut().enumerate().take(n) {
        let t = t0 + i;
        *o = [0.0; PANEL];
        for b in 0..blocks {
            let wb = &w.weights[(p * blocks + b) * PANEL_BLOCK..][..PANEL_BLOCK];
            let a = &x.q[t * x.cols + b * BLOCK..][..BLOCK];
            let da = x.d[t * blocks + b];
            let at = (p * blocks + b) * PANEL;
            for r in 0..PANEL {
                let mut acc = w.seed[at + r];
                for g in 0..GROUPS {
                    for l in 0..4 {
                        acc += i32::from(a[g * 4 + l]) * i32::from(wb[g * PANEL * 4 + r * 4 + l]);
                    }
                }
                o[r] += acc as f32 * (w.scale[at + r] * da);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
// The token index drives both the accumulator and the pointer arithmetic.
#[allow(clippy::needless_range_loop)]
mod x86 {
    use super::*;
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn tile_avx512(
        x: &QuantActs,
        w: &PackedLinear,
        p: usize,
        t0: usize,
        n: usize,
        out: &mut [[f32; PANEL]; TILE],
    ) {
        // SAFETY: the caller checked the CPU features; every pointer below stays inside
        // the packed weights (panel p, blocks < w.blocks) and the activations (token
        // t < x.tokens, columns < x.cols), as `gemm_part` asserts.
        unsafe {
            let blocks = w.blocks;
            let mut acc = [_mm512_setzero_ps(); TILE];
            let wbase = w.weights.as_ptr().add(p * blocks * PANEL_BLOCK);
            let abase = x.q.as_ptr();
            for b in 0..blocks {
                let wp = wbase.add(b * PANEL_BLOCK);
                let mut wv = [_mm512_setzero_si512(); GROUPS];
                for (g, v) in wv.iter_mut().enumerate() {
                    *v = _mm512_loadu_si512(wp.add(g * 64) as *const _);
                }
                let at = (p * blocks + b) * PANEL;
                let seed = _mm512_loadu_si512(w.seed.as_ptr().add(at) as *const _);
                let dw = _mm512_loadu_ps(w.scale.as_ptr().add(at));
                for i in 0..n {
                    let t = t0 + i;
                    let ap = abase.add(t * x.cols + b * BLOCK) as *const i32;
                    let mut s = seed;
                    for (g, v) in wv.iter().enumerate() {
                        let a4 = _mm512_set1_epi32(ap.add(g).read_unaligned());
                        s = _mm512_dpbusd_epi32(s, a4, *v);
                    }
                    let scale =
                        _mm512_mul_ps(dw, _mm512_set1_ps(*x.d.get_unchecked(t * blocks + b)));
                    acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scale, acc[i]);
                }
            }
            for i in 0..n {
                _mm512_storeu_ps(out[i].as_mut_ptr(), acc[i]);
            }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn tile_avx2(
        x: &QuantActs,
        w: &PackedLinear,
        p: usize,
        t0: usize,
        n: usize,
        out: &mut [[f32; PANEL]; TILE],
    ) {
        // SAFETY: the caller checked the CPU features; every pointer below stays inside
        // the packed weights (panel p, blocks < w.blocks) and the activations (token
        // t < x.tokens, columns < x.cols), as `gemm_part` asserts.
        unsafe {
            let blocks = w.blocks;
            let ones = _mm256_set1_epi16(1);
            // Two halves of the panel: rows 0..8 and 8..16, each one 256-bit register a group.
            for half in 0..2 {
                let mut acc = [_mm256_setzero_ps(); TILE];
                let wbase = w.weights.as_ptr().add(p * blocks * PANEL_BLOCK + half * 32);
                for b in 0..blocks {
                    let wp = wbase.add(b * PANEL_BLOCK);
                    let mut wv = [_mm256_setzero_si256(); GROUPS];
                    for (g, v) in wv.iter_mut().enumerate() {
                        *v = _mm256_loadu_si256(wp.add(g * 64) as *const _);
                    }
                    let at = (p * blocks + b) * PANEL + half * 8;
                    let seed = _mm256_loadu_si256(w.seed.as_ptr().add(at) as *const _);
                    let dw = _mm256_loadu_ps(w.scale.as_ptr().add(at));
                    for i in 0..n {
                        let t = t0 + i;
                        let ap = x.q.as_ptr().add(t * x.cols + b * BLOCK) as *const i32;
                        let mut s = seed;
                        for (g, v) in wv.iter().enumerate() {
                            let a4 = _mm256_set1_epi32(ap.add(g).read_unaligned());
                            let pairs = _mm256_maddubs_epi16(a4, *v);
                            s = _mm256_add_epi32(s, _mm256_madd_epi16(pairs, ones));
                        }
                        let scale =
                            _mm256_mul_ps(dw, _mm256_set1_ps(*x.d.get_unchecked(t * blocks + b)));
                        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), scale, acc[i]);
                    }
                }
                for i in 0..n {
                    _mm256_storeu_ps(out[i].as_mut_ptr().add(half * 8), acc[i]);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny deterministic generator (no dependency for tests).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> u32 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) as u32
        }
        fn f(&mut self) -> f32 {
            self.next() as f32 / (1u64 << 31) as f32 - 1.0
        }
    }

    fn random_q4(rng: &mut Lcg, rows: usize, cols: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for _ in 0..rows * cols / BLOCK {
            // A positive half in [2^-8, 2^-4).
            let h: u16 = 0x1c00 | (rng.next() as u16 & 0x0fff);
            out.extend_from_slice(&h.to_le_bytes());
            for _ in 0..16 {
                out.push(rng.next() as u8);
            }
        }
        out
    }

    fn dequant(q4: &[u8], rows: usize, cols: usize) -> Vec<f32> {
        let mut w = vec![0f32; rows * cols];
        for (bi, blk) in q4.chunks_exact(BLOCK_BYTES).enumerate() {
            let d = f16_to_f32(u16::from_le_bytes([blk[0], blk[1]]));
            for k in 0..BLOCK {
                let byte = blk[2 + k % 16];
                let nib = if k < 16 { byte & 15 } else { byte >> 4 };
                w[bi * BLOCK + k] = (f32::from(nib) - 8.0) * d;
            }
        }
        w
    }

    /// The kernels equal a plain multiply of the dequantised weights with the
    /// dequantised activations (the quantisation both engines share), for every ISA,
    /// with ragged row counts and token counts that do not fill a tile.
    #[test]
    fn every_isa_equals_the_dequantised_product() {
        let mut rng = Lcg(7);
        for &(rows, cols, tokens) in &[(16, 32, 1), (40, 96, 7), (384, 384, 13), (20, 1536, 3)] {
            let q4 = random_q4(&mut rng, rows, cols);
            let bias: Vec<f32> = (0..rows).map(|_| rng.f()).collect();
            let x: Vec<f32> = (0..tokens * cols).map(|_| rng.f() * 3.0).collect();
            let w = PackedLinear::from_q4(&q4, rows, cols, bias.clone());
            let mut qa = QuantActs::new();
            qa.quantise(Isa::Portable, &x, cols);
            let wd = dequant(&q4, rows, cols);
            let mut want = vec![0f64; tokens * rows];
            for t in 0..tokens {
                for o in 0..rows {
                    let mut s = f64::from(bias[o]);
                    for k in 0..cols {
                        let a = (f64::from(qa.q[t * cols + k]) - 128.0)
                            * f64::from(qa.d[t * cols / BLOCK + k / BLOCK]);
                        s += a * f64::from(wd[o * cols + k]);
                    }
                    want[t * rows + o] = s;
                }
            }
            for isa in Isa::available() {
                let mut y = vec![f32::NAN; tokens * rows];
                // SAFETY: y has tokens * rows floats; one thread.
                unsafe { gemm_part(isa, &qa, &w, y.as_mut_ptr(), 0..tokens, 0..panels(&w)) };
                for (i, (&got, &want)) in y.iter().zip(&want).enumerate() {
                    let tol = 1e-4 * (1.0 + want.abs());
                    assert!(
                        (f64::from(got) - want).abs() <= tol,
                        "{isa:?} {rows}x{cols}x{tokens} at {i}: {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn quantisation_matches_the_reference_rule() {
        let mut qa = QuantActs::new();
        let mut x = vec![0f32; 64];
        // max |x| = 127: the step is exactly 1, so the ties below are exact.
        x[0] = 127.0;
        x[1] = -63.5; // ties to even: -64
        x[2] = 0.5; // ties to even: 0
        x[3] = 2.5; // ties to even: 2
        qa.quantise(Isa::detect(), &x, 64);
        assert_eq!(&qa.q[..4], &[128 + 127, 128 - 64, 128, 130]);
        assert_eq!(qa.d[0], 1.0);
        assert_eq!(qa.d[1], 0.0, "an all-zero block has scale 0");
        assert!(qa.q[32..].iter().all(|&v| v == 128));
    }
}
