//! The admission set: which document-version ordinals a search may return.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Gives every admission set built an identity, shared by its clones.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A bitset over document-version ordinals, cheap to clone into search closures.
#[derive(Debug, Clone, Default)]
pub struct Admit {
    /// Identity of this set (clones share it), for caches of per-set statistics.
    id: u64,
    bits: Arc<Vec<u64>>,
    count: usize,
    /// Set by the caller when the set holds every live document version, so that a text
    /// search may skip the per-hit filter (and keep tantivy's block-max pruning).
    everything: bool,
}

impl Admit {
    pub fn from_ordinals(ordinals: impl IntoIterator<Item = u32>) -> Admit {
        let mut bits: Vec<u64> = Vec::new();
        let mut count = 0;
        for o in ordinals {
            let (w, b) = ((o / 64) as usize, o % 64);
            if bits.len() <= w {
                bits.resize(w + 1, 0);
            }
            if bits[w] & (1 << b) == 0 {
                bits[w] |= 1 << b;
                count += 1;
            }
        }
        Admit {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            bits: Arc::new(bits),
            count,
            everything: false,
        }
    }

    /// Marks the set as holding every live document version. Only sound when the index
    /// holds nothing but live versions (BM25 drops removed chunks; HNSW does not, so it
    /// never takes this shortcut).
    pub fn covering_everything(mut self, everything: bool) -> Admit {
        self.everything = everything;
        self
    }

    /// The set's identity: equal for clones, different for every set built.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether `other` holds exactly the same document versions.
    pub fn same_members(&self, other: &Admit) -> bool {
        self.count == other.count && self.bits == other.bits
    }

    pub fn is_everything(&self) -> bool {
        self.everything
    }

    #[inline]
    pub fn contains(&self, ordinal: u32) -> bool {
        let w = (ordinal / 64) as usize;
        self.bits
            .get(w)
            .is_some_and(|x| x & (1 << (ordinal % 64)) != 0)
    }

    /// The admitted ordinals, ascending.
    pub fn ordinals(&self) -> impl Iterator<Item = u32> + '_ {
        self.bits.iter().enumerate().flat_map(|(w, &word)| {
            (0..64u32)
                .filter(move |b| word & (1u64 << b) != 0)
                .map(move |b| w as u32 * 64 + b)
        })
    }

    /// Number of admitted document versions.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}
