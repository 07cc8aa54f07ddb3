//! The BERT encoder over a ragged batch: every window's tokens in one `[T × H]` matrix
//! (no padding), attention restricted to each window, mean pooling per window.
//!
//! Work is spread over the model's own thread pool: the matrix products split over
//! token tiles or over panels of output rows (whichever gives every thread work), the
//! float parts over rows, attention over (window, head).

use rayon::prelude::*;

use crate::format::{f16_to_f32, ModelFile, Shape, BLOCK, BLOCK_BYTES};
use crate::kernels::{self, Isa, PackedLinear, QuantActs};
use crate::math;
use crate::Result;

struct Layer {
    /// Q, K and V as one layer of 3H rows: one pass over the activations.
    qkv: PackedLinear,
    out: PackedLinear,
    attn_ln: (Vec<f32>, Vec<f32>),
    up: PackedLinear,
    down: PackedLinear,
    ffn_ln: (Vec<f32>, Vec<f32>),
}

pub struct Encoder {
    pub shape: Shape,
    /// The word embeddings, Q4_0 rows as in the file (see [`Encoder::set_word_table`]).
    word: Vec<u8>,
    pos: Vec<f32>,
    token_type: Vec<f32>,
    emb_ln: (Vec<f32>, Vec<f32>),
    layers: Vec<Layer>,
}

/// A `*mut f32` that tasks writing disjoint parts of one buffer may share.
#[derive(Clone, Copy)]
struct Shared(*mut f32);
// SAFETY: every user writes a region no other task writes (stated at each use).
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    /// The pointer. A method, so that a closure captures the whole (Send) wrapper
    /// rather than its raw-pointer field.
    fn ptr(self) -> *mut f32 {
        self.0
    }
}

impl Encoder {
    /// Everything but the word table, which stays where it is in the file's bytes: the
    /// returned range locates it, for [`Encoder::set_word_table`].
    pub fn from_file(f: &ModelFile<'_>, file: &[u8]) -> Result<(Self, std::ops::Range<usize>)> {
        let s = f.shape;
        let (h, ff) = (s.hidden, s.ffn);
        let ln = |name: &str| -> Result<(Vec<f32>, Vec<f32>)> {
            Ok((
                f.f32(&format!("{name}.w"), h)?,
                f.f32(&format!("{name}.b"), h)?,
            ))
        };
        let mut layers = Vec::with_capacity(s.layers);
        for l in 0..s.layers {
            let name = |t: &str| format!("l{l}.{t}");
            let mut qkv = Vec::with_capacity(3 * h * h / BLOCK * BLOCK_BYTES);
            let mut qkv_bias = Vec::with_capacity(3 * h);
            for t in ["q", "k", "v"] {
                qkv.extend_from_slice(f.q4(&name(&format!("{t}.w")), h, h)?);
                qkv_bias.extend(f.f32(&name(&format!("{t}.b")), h)?);
            }
            layers.push(Layer {
                qkv: PackedLinear::from_q4(&qkv, 3 * h, h, qkv_bias),
                out: PackedLinear::from_q4(
                    f.q4(&name("ao.w"), h, h)?,
                    h,
                    h,
                    f.f32(&name("ao.b"), h)?,
                ),
                attn_ln: ln(&name("aln"))?,
                up: PackedLinear::from_q4(
                    f.q4(&name("fi.w"), ff, h)?,
                    ff,
                    h,
                    f.f32(&name("fi.b"), ff)?,
                ),
                down: PackedLinear::from_q4(
                    f.q4(&name("fo.w"), h, ff)?,
                    h,
                    ff,
                    f.f32(&name("fo.b"), h)?,
                ),
                ffn_ln: ln(&name("oln"))?,
            });
        }
        let word = f.q4("emb.word", s.vocab, h)?;
        let start = word.as_ptr() as usize - file.as_ptr() as usize;
        let encoder = Self {
            shape: s,
            word: Vec::new(),
            pos: f.f32("emb.pos", s.max_positions * h)?,
            // Only type 0 is ever used: the first row.
            token_type: f.f32("emb.type", 2 * h)?[..h].to_vec(),
            emb_ln: ln("emb.ln")?,
            layers,
        };
        Ok((encoder, start..start + word.len()))
    }

    /// Takes the word table: the file's bytes with the table moved to their front and the
    /// rest cut off, so that loading never holds two copies of its 54 MB.
    pub fn set_word_table(&mut self, mut file: Vec<u8>, range: std::ops::Range<usize>) {
        let len = range.len();
        assert_eq!(
            len,
            self.shape.vocab * self.shape.hidden / BLOCK * BLOCK_BYTES
        );
        file.copy_within(range, 0);
        file.truncate(len);
        file.shrink_to_fit();
        self.word = file;
    }

    /// Multiply-accumulates of the matrix products per token (attention excluded).
    pub fn macs_per_token(&self) -> usize {
        self.layers
            .iter()
            .map(|l| {
                l.qkv.macs_per_token()
                    + l.out.macs_per_token()
                    + l.up.macs_per_token()
                    + l.down.macs_per_token()
            })
            .sum()
    }

    /// Mean-pooled (not normalised) hidden states of each window; `windows` are full
    /// inputs (`<s>` … `</s>`), each at most `max_positions` long.
    pub fn forward(&self, isa: Isa, threads: usize, windows: &[Vec<u32>]) -> Vec<Vec<f32>> {
        let h = self.shape.hidden;
        let ff = self.shape.ffn;
        let starts: Vec<usize> = std::iter::once(0)
            .chain(windows.iter().scan(0, |acc, w| {
                *acc += w.len();
                Some(*acc)
            }))
            .collect();
        let t_all = *starts.last().unwrap_or(&0);
        if t_all == 0 {
            return Vec::new();
        }
        let rows = |n: usize| (n / (threads * 4)).max(8);

        // Embeddings: word (dequantised row) + position + type, then LayerNorm.
        let mut x = vec![0f32; t_all * h];
        let ids: Vec<(u32, usize)> = windows
            .iter()
            .flat_map(|w| w.iter().enumerate().map(|(p, &id)| (id, p)))
            .collect();
        x.par_chunks_mut(h)
            .zip(ids.par_iter())
            .for_each(|(row, &(id, p))| {
                let id = (id as usize).min(self.shape.vocab - 1);
                let q4 = &self.word[id * h / BLOCK * BLOCK_BYTES..][..h / BLOCK * BLOCK_BYTES];
                for (b, blk) in q4.chunks_exact(BLOCK_BYTES).enumerate() {
                    let d = f16_to_f32(u16::from_le_bytes([blk[0], blk[1]]));
                    for k in 0..BLOCK {
                        let byte = blk[2 + k % 16];
                        let nib = if k < 16 { byte & 15 } else { byte >> 4 };
                        row[b * BLOCK + k] = (f32::from(nib) - 8.0) * d;
                    }
                }
                let pos = &self.pos[p * h..(p + 1) * h];
                for ((v, p), t) in row.iter_mut().zip(pos).zip(&self.token_type) {
                    *v += p + t;
                }
            });
        self.layer_norm(isa, &mut x, &[], &self.emb_ln, rows(t_all));

        let mut qa = QuantActs::new();
        let mut qkv = vec![0f32; t_all * 3 * h];
        let mut ctx = vec![0f32; t_all * h];
        let mut tmp = vec![0f32; t_all * h];
        let mut mid = vec![0f32; t_all * ff];
        for layer in &self.layers {
            qa.quantise(isa, &x, h);
            gemm(isa, threads, &qa, &layer.qkv, &mut qkv);
            self.attention(isa, &qkv, &starts, &mut ctx);
            qa.quantise(isa, &ctx, h);
            gemm(isa, threads, &qa, &layer.out, &mut tmp);
            self.layer_norm(isa, &mut x, &tmp, &layer.attn_ln, rows(t_all));
            qa.quantise(isa, &x, h);
            gemm(isa, threads, &qa, &layer.up, &mut mid);
            mid.par_chunks_mut(ff * rows(t_all))
                .for_each(|c| math::gelu(isa, c));
            qa.quantise(isa, &mid, ff);
            gemm(isa, threads, &qa, &layer.down, &mut tmp);
            self.layer_norm(isa, &mut x, &tmp, &layer.ffn_ln, rows(t_all));
        }

        starts
            .windows(2)
            .map(|r| {
                let mut mean = vec![0f32; h];
                for row in x[r[0] * h..r[1] * h].chunks_exact(h) {
                    mean.iter_mut().zip(row).for_each(|(m, v)| *m += v);
                }
                let inv = 1.0 / (r[1] - r[0]) as f32;
                mean.iter_mut().for_each(|m| *m *= inv);
                mean
            })
            .collect()
    }

    fn layer_norm(
        &self,
        isa: Isa,
        x: &mut [f32],
        add: &[f32],
        ln: &(Vec<f32>, Vec<f32>),
        rows: usize,
    ) {
        let h = self.shape.hidden;
        let eps = self.shape.ln_eps;
        x.par_chunks_mut(h * rows).enumerate().for_each(|(i, c)| {
            let add = if add.is_empty() {
                add
            } else {
                &add[i * h * rows..][..c.len()]
            };
            math::add_layer_norm(isa, c, add, &ln.0, &ln.1, eps);
        });
    }

    /// Attention of every head of every window; `qkv` rows are `[q | k | v]`.
    fn attention(&self, isa: Isa, qkv: &[f32], starts: &[usize], ctx: &mut [f32]) {
        let h = self.shape.hidden;
        let heads = self.shape.heads;
        let hd = h / heads;
        let out = Shared(ctx.as_mut_ptr());
        let tasks: Vec<(usize, usize)> = (0..starts.len() - 1)
            .flat_map(|w| (0..heads).map(move |head| (w, head)))
            .collect();
        tasks.par_iter().for_each(|&(w, head)| {
            let (s0, s1) = (starts[w], starts[w + 1]);
            let len = s1 - s0;
            let gather = |part: usize| -> Vec<f32> {
                let mut v = Vec::with_capacity(len * hd);
                for t in s0..s1 {
                    let at = t * 3 * h + part * h + head * hd;
                    v.extend_from_slice(&qkv[at..at + hd]);
                }
                v
            };
            let (mut q, k, v) = (gather(0), gather(1), gather(2));
            q.resize(len.div_ceil(math::ROWS) * math::ROWS * hd, 0.0);
            let kb = math::key_blocks(&k, hd);
            let mut o = vec![0f32; q.len()];
            let mut scores = vec![0f32; math::ROWS * len.div_ceil(16) * 16];
            math::attend(isa, &q, &kb, &v, &mut o, &mut scores, hd);
            for (i, row) in o.chunks_exact(hd).take(len).enumerate() {
                // SAFETY: (window, head) pairs cover disjoint (rows, columns) of ctx.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        row.as_ptr(),
                        out.ptr().add((s0 + i) * h + head * hd),
                        hd,
                    )
                };
            }
        });
    }
}

/// `y = x · Wᵀ + b` over the pool: token tiles when there are many tokens, panels of
/// output rows otherwise (a single short query still uses every thread).
fn gemm(isa: Isa, threads: usize, x: &QuantActs, w: &PackedLinear, y: &mut [f32]) {
    assert_eq!(y.len(), x.tokens * w.rows);
    let panels = kernels::panels(w);
    let out = Shared(y.as_mut_ptr());
    let want = threads * 4;
    let tasks: Vec<(std::ops::Range<usize>, std::ops::Range<usize>)> = if x.tokens >= want * 8 {
        let step = x.tokens.div_ceil(want);
        (0..x.tokens)
            .step_by(step)
            .map(|t| (t..(t + step).min(x.tokens), 0..panels))
            .collect()
    } else {
        let step = panels.div_ceil(want).max(1);
        (0..panels)
            .step_by(step)
            .map(|p| (0..x.tokens, p..(p + step).min(panels)))
            .collect()
    };
    tasks.into_par_iter().for_each(|(t, p)| {
        // SAFETY: y holds tokens × rows floats; tasks cover disjoint rectangles.
        unsafe { kernels::gemm_part(isa, x, w, out.ptr(), t, p) }
    });
}
