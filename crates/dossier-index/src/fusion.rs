//! Fusion of ranked lists.
//!
//! - [`rrf`]: reciprocal-rank fusion (Cormack, Clarke & Büttcher, 2009), `Σ wᵢ / (k + rankᵢ)`;
//!   uses ranks only.
//! - [`convex`]: a convex combination of min-max normalised scores (Bruch, Gai & Ingber,
//!   2023, "An Analysis of Fusion Functions for Hybrid Retrieval"), `Σ wᵢ · φᵢ(s)`; uses
//!   how far apart the scores are, not only their order.

use std::collections::HashMap;

use crate::Scored;

/// The constant from the RRF paper; it damps the weight of the very first ranks.
pub const DEFAULT_RRF_K: f32 = 60.0;

/// Fuses ranked lists, each with a weight. Ranks start at 1. Ties break on the
/// smaller sequence number so that the result does not depend on list order.
pub fn rrf(lists: &[(&[Scored], f32)], k: f32, limit: usize) -> Vec<Scored> {
    let mut acc: HashMap<u64, f32> = HashMap::new();
    for (list, weight) in lists {
        for (i, hit) in list.iter().enumerate() {
            *acc.entry(hit.seq).or_default() += weight / (k + (i + 1) as f32);
        }
    }
    best_first(acc, limit)
}

/// Convex combination of min-max normalised scores. A candidate missing from a list
/// scores that list's minimum there (normalised to 0). Weights should sum to 1.
pub fn convex(lists: &[(&[Scored], f32)], limit: usize) -> Vec<Scored> {
    let mut acc: HashMap<u64, f32> = HashMap::new();
    for (list, weight) in lists {
        let (lo, hi) = list.iter().fold((f32::MAX, f32::MIN), |(lo, hi), s| {
            (lo.min(s.score), hi.max(s.score))
        });
        let span = if hi > lo { hi - lo } else { 1.0 };
        for hit in list.iter() {
            *acc.entry(hit.seq).or_default() += weight * (hit.score - lo) / span;
        }
    }
    best_first(acc, limit)
}

/// Accumulated scores, best first; ties break on the smaller sequence number so that
/// the result does not depend on hash order.
fn best_first(acc: HashMap<u64, f32>, limit: usize) -> Vec<Scored> {
    let mut out: Vec<Scored> = acc
        .into_iter()
        .map(|(seq, score)| Scored { seq, score })
        .collect();
    out.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.seq.cmp(&b.seq)));
    out.truncate(limit);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn list(ids: &[u64]) -> Vec<Scored> {
        ids.iter().map(|&seq| Scored { seq, score: 0.0 }).collect()
    }

    #[test]
    fn agreement_wins() {
        let (a, b) = (list(&[1, 2, 3]), list(&[2, 1, 4]));
        let fused = rrf(&[(&a, 1.0), (&b, 1.0)], DEFAULT_RRF_K, 10);
        assert_eq!(fused[0].seq, 1);
        assert_eq!(fused[1].seq, 2);
        assert_eq!(fused.len(), 4);
    }

    #[test]
    fn convex_uses_score_gaps() {
        let s = |seq, score| Scored { seq, score };
        // Lexical barely prefers 1; dense strongly prefers 2.
        let lex = vec![s(1, 10.0), s(2, 9.9), s(3, 1.0)];
        let dense = vec![s(2, 0.9), s(1, 0.5), s(3, 0.49)];
        let fused = convex(&[(&lex, 0.5), (&dense, 0.5)], 3);
        assert_eq!(fused[0].seq, 2);
        assert!(fused.iter().all(|f| (0.0..=1.0).contains(&f.score)));
    }

    proptest! {
        #[test]
        fn order_of_lists_does_not_matter(a in proptest::collection::vec(0u64..50, 0..20),
                                          b in proptest::collection::vec(0u64..50, 0..20)) {
            let dedup = |v: Vec<u64>| { let mut s = std::collections::HashSet::new(); v.into_iter().filter(|x| s.insert(*x)).collect::<Vec<_>>() };
            let (a, b) = (list(&dedup(a)), list(&dedup(b)));
            let x = rrf(&[(&a, 2.0), (&b, 1.0)], DEFAULT_RRF_K, 100);
            let y = rrf(&[(&b, 1.0), (&a, 2.0)], DEFAULT_RRF_K, 100);
            prop_assert_eq!(x.iter().map(|s| s.seq).collect::<Vec<_>>(), y.iter().map(|s| s.seq).collect::<Vec<_>>());
        }
    }
}
