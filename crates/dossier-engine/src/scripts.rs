//! Ranking a corpus written in two scripts (Chinese and a Latin-script language).
//!
//! A multilingual embedder places a question and a passage in different languages on a
//! lower cosine scale than a pair in one language: on enterprise-dev (Chinese policies
//! asked about in English) e5-small ranks the passage that answers an English question
//! 12th, 33rd or 53rd among 223, below unrelated English passages. And BM25 cannot match
//! a question's words in text of another script at all, so a fusion that counts its
//! silence against a passage buries every cross-language answer. Two corrections, each
//! a no-op on a corpus (or a result list) of one script:
//!
//! - [`onto_query_scale`]: the dense hits in the other script are shifted by the
//!   difference between the two scripts' mean score over their best
//!   [`SCALE_TOP`] hits, so each script's best passages compete on one scale;
//! - [`lexical_blind_spots_filled`]: a passage in the other script that the lexical list
//!   could not have matched enters it where its dense score places it.

use std::collections::HashSet;

use dossier_index::Scored;

/// How many of each script's best dense hits measure that script's cosine scale.
pub(crate) const SCALE_TOP: usize = 10;

/// `dense` (best first) with the hits in `other` (the script the question is not
/// written in) shifted onto the question script's scale, re-sorted best first. The
/// shift only raises: a script already scoring higher is left as it is.
pub(crate) fn onto_query_scale(mut dense: Vec<Scored>, other: &HashSet<u64>) -> Vec<Scored> {
    let top_mean = |in_other: bool| -> Option<f32> {
        let top: Vec<f32> = dense
            .iter()
            .filter(|s| other.contains(&s.seq) == in_other)
            .take(SCALE_TOP)
            .map(|s| s.score)
            .collect();
        (!top.is_empty()).then(|| top.iter().sum::<f32>() / top.len() as f32)
    };
    let (Some(same), Some(theirs)) = (top_mean(false), top_mean(true)) else {
        return dense;
    };
    let shift = same - theirs;
    if shift <= 0.0 {
        return dense;
    }
    for s in dense.iter_mut().filter(|s| other.contains(&s.seq)) {
        s.score += shift;
    }
    dense.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.seq.cmp(&b.seq)));
    dense
}

/// `lexical` (best first) with every hit of `dense` in `other` that it lacks added at
/// the score its dense score takes on the lexical list's range (min-max, both lists),
/// re-sorted best first: the lexical ranking says nothing about text it cannot match.
pub(crate) fn lexical_blind_spots_filled(
    mut lexical: Vec<Scored>,
    dense: &[Scored],
    other: &HashSet<u64>,
) -> Vec<Scored> {
    let range = |l: &[Scored]| {
        l.iter().fold(None, |acc: Option<(f32, f32)>, s| {
            Some(acc.map_or((s.score, s.score), |(lo, hi)| {
                (lo.min(s.score), hi.max(s.score))
            }))
        })
    };
    let Some((d_lo, d_hi)) = range(dense) else {
        return lexical;
    };
    let (l_lo, l_hi) = range(&lexical).unwrap_or((0.0, 1.0));
    let present: HashSet<u64> = lexical.iter().map(|s| s.seq).collect();
    let d_span = if d_hi > d_lo { d_hi - d_lo } else { 1.0 };
    for s in dense {
        if other.contains(&s.seq) && !present.contains(&s.seq) {
            let at = (s.score - d_lo) / d_span;
            lexical.push(Scored {
                seq: s.seq,
                score: l_lo + at * (l_hi - l_lo),
            });
        }
    }
    lexical.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.seq.cmp(&b.seq)));
    lexical
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(v: &[(u64, f32)]) -> Vec<Scored> {
        v.iter()
            .map(|&(seq, score)| Scored { seq, score })
            .collect()
    }
    fn seqs(v: &[Scored]) -> Vec<u64> {
        v.iter().map(|s| s.seq).collect()
    }

    #[test]
    fn a_list_of_one_script_is_left_as_it_was() {
        let dense = list(&[(1, 0.9), (2, 0.8), (3, 0.7)]);
        let none = HashSet::new();
        assert_eq!(onto_query_scale(dense.clone(), &none), dense);
        let all: HashSet<u64> = [1, 2, 3].into();
        assert_eq!(onto_query_scale(dense.clone(), &all), dense);
        let lexical = list(&[(7, 5.0)]);
        assert_eq!(
            lexical_blind_spots_filled(lexical.clone(), &dense, &none),
            lexical
        );
    }

    #[test]
    fn the_other_scripts_best_competes_with_the_question_scripts_best() {
        // Same script: 0.86, 0.85, 0.84; other script: 0.82 (its answer), 0.78.
        let dense = list(&[(1, 0.86), (2, 0.85), (3, 0.84), (10, 0.82), (11, 0.78)]);
        let other: HashSet<u64> = [10, 11].into();
        let fair = onto_query_scale(dense, &other);
        // The shift is 0.85 - 0.80 = 0.05: 10 scores 0.87 and leads.
        assert_eq!(seqs(&fair), vec![10, 1, 2, 3, 11]);
        assert!((fair[0].score - 0.87).abs() < 1e-5);
    }

    #[test]
    fn a_script_already_scoring_higher_is_not_lowered() {
        let dense = list(&[(10, 0.9), (1, 0.8)]);
        let other: HashSet<u64> = [10].into();
        assert_eq!(onto_query_scale(dense.clone(), &other), dense);
    }

    #[test]
    fn a_passage_the_lexical_list_cannot_match_enters_it_by_its_dense_place() {
        let lexical = list(&[(1, 9.0), (2, 5.0), (3, 1.0)]);
        let dense = list(&[(10, 0.9), (1, 0.8), (11, 0.7), (2, 0.5)]);
        let other: HashSet<u64> = [10, 11].into();
        let filled = lexical_blind_spots_filled(lexical, &dense, &other);
        // 10 is the dense list's best: the lexical list's best score (9.0, tie broken
        // by sequence: 1 first); 11 at 0.5 of the dense range: 5.0.
        assert_eq!(seqs(&filled), vec![1, 10, 2, 11, 3]);
    }

    #[test]
    fn an_empty_lexical_list_takes_the_dense_order_of_the_other_script() {
        let dense = list(&[(10, 0.9), (11, 0.7), (1, 0.5)]);
        let other: HashSet<u64> = [10, 11].into();
        let filled = lexical_blind_spots_filled(Vec::new(), &dense, &other);
        assert_eq!(seqs(&filled), vec![10, 11]);
    }
}
