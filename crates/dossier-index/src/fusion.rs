//! Reciprocal-rank fusion (Cormack, Clarke & Büttcher, 2009): `Σ wᵢ / (k + rankᵢ)`.

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
