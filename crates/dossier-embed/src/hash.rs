//! Feature-hashing embedder.

use dossier_core::{Embedder, Result};

/// Deterministic feature hashing ("hashing trick"), **for unit tests and scale
/// benchmarks only**: it captures shared words, not meaning.
///
/// Features are lowercase latin (non-CJK alphanumeric) words plus CJK character
/// unigrams and bigrams; each hashes to an index and a sign (the sign keeps collisions
/// from adding up in expectation), and the sum is L2-normalised. Text without features
/// maps to a fixed unit vector so the contract (normalised vectors) still holds.
#[derive(Debug, Clone)]
pub struct HashEmbedder {
    dim: usize,
    name: String,
}

impl HashEmbedder {
    /// A hashing embedder of `dim` dimensions. Panics when `dim` is 0.
    pub fn new(dim: usize) -> Self {
        assert!(dim > 0, "HashEmbedder needs dim > 0");
        Self {
            dim,
            name: format!("hash-{dim}"),
        }
    }

    fn embed(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0.0f32; self.dim];
        let mut add = |h: u64| {
            let h = mix(h);
            // Reduce the high bits (better mixed) and take the sign from the lowest.
            let i = ((h >> 1) % self.dim as u64) as usize;
            v[i] += if h & 1 == 0 { 1.0 } else { -1.0 };
        };
        let mut word: Option<u64> = None; // FNV state of the latin word being read
        let mut prev_cjk: Option<char> = None;
        for c in text.chars() {
            if is_cjk(c) {
                if let Some(h) = word.take() {
                    add(h);
                }
                add(fnv(fnv(FNV_OFFSET ^ 1, c), c)); // tagged so 'a' and 'aa' differ from CJK
                if let Some(p) = prev_cjk {
                    add(fnv(fnv(FNV_OFFSET ^ 2, p), c));
                }
                prev_cjk = Some(c);
            } else if c.is_alphanumeric() {
                prev_cjk = None;
                let h = c.to_lowercase().fold(word.unwrap_or(FNV_OFFSET), fnv);
                word = Some(h);
            } else {
                prev_cjk = None;
                if let Some(h) = word.take() {
                    add(h);
                }
            }
        }
        if let Some(h) = word {
            add(h);
        }
        crate::l2_normalize(v).unwrap_or_else(|| {
            let mut e = vec![0.0; self.dim];
            e[0] = 1.0;
            e
        })
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// One FNV-1a step over a whole `char` (stable across platforms and releases, unlike
/// `std`'s `DefaultHasher`).
fn fnv(h: u64, c: char) -> u64 {
    (h ^ u64::from(c)).wrapping_mul(0x0000_0100_0000_01b3)
}

/// splitmix64 finaliser: FNV's low bits are weak, and the index uses a modulus.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Han ideographs, kana and Hangul: scripts written without spaces between words.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF        // Hiragana, Katakana
        | 0x3400..=0x4DBF      // CJK Extension A
        | 0x4E00..=0x9FFF      // CJK Unified Ideographs
        | 0xAC00..=0xD7AF      // Hangul syllables
        | 0xF900..=0xFAFF      // CJK Compatibility Ideographs
        | 0x20000..=0x3134F) // CJK Extensions B–G
}

impl Embedder for HashEmbedder {
    fn name(&self) -> &str {
        &self.name
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|t| self.embed(t)).collect())
    }
    fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        Ok(self.embed(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dot(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn deterministic_normalised_right_dim() {
        let e = HashEmbedder::new(256);
        assert_eq!((e.name(), e.dim()), ("hash-256", 256));
        for t in ["Refund policy", "签收后 7 天内", "", "  ,. "] {
            let a = e.embed_query(t).unwrap();
            assert_eq!(a, e.embed_passages(&[t]).unwrap()[0]);
            assert_eq!(a, HashEmbedder::new(256).embed_query(t).unwrap());
            assert_eq!(a.len(), 256);
            assert!((dot(&a, &a) - 1.0).abs() < 1e-5, "{t:?}");
        }
        // Case-insensitive for latin words; CJK bigrams make order matter.
        assert_eq!(
            e.embed_query("Hello World").unwrap(),
            e.embed_query("hello, world!").unwrap()
        );
        assert_ne!(
            e.embed_query("退货").unwrap(),
            e.embed_query("货退").unwrap()
        );
    }

    #[test]
    fn related_texts_score_higher() {
        let e = HashEmbedder::new(384);
        let q = e
            .embed_query("headphone return deadline after delivery")
            .unwrap();
        let p = e
            .embed_passages(&[
                "Headphones may be returned within 7 days after delivery.",
                "All API requests use the OAuth 2.0 client credentials flow.",
            ])
            .unwrap();
        assert!(dot(&q, &p[0]) > dot(&q, &p[1]) + 0.1);

        let q = e.embed_query("耳机无理由退货的签收期限").unwrap();
        let p = e
            .embed_passages(&[
                "签收后 7 天内且未拆封，可以申请无理由退货。",
                "所有 API 请求使用 OAuth 2.0 客户端凭证模式",
            ])
            .unwrap();
        assert!(dot(&q, &p[0]) > dot(&q, &p[1]) + 0.1);
    }
}
