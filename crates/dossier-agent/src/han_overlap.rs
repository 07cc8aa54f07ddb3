//! How much of a Chinese question one sentence says.
//!
//! Chinese has no spaces, and the dictionary segmenter splits a name it does not know
//! into single characters (班杰 → 班 · 杰), so word overlap lets a sentence about
//! something else pass for an answer: it shares a 班 here and a 出生 there. Adjacent
//! character pairs do not depend on how either text was segmented: a sentence that
//! answers a question about 班杰 holds the pair 班杰.
//!
//! Each pair of the question weighs what the words it falls in weigh (their specificity
//! in the caller's text, the judge's term weights), so that sharing the rare name counts
//! for more than sharing 公司. Question words and function words weigh nothing and so
//! break pairs.

use std::collections::HashMap;

/// The question's adjacent character pairs with their weights.
#[derive(Debug, Clone)]
pub(crate) struct HanPairs {
    pairs: Vec<(String, f32)>,
    total: f32,
    /// The pair the question opens with, when it opens with content: the start of what
    /// it asks about ("圣体堂区成立于哪年" opens with 圣体). See [`HanPairs::leads`].
    leading: Option<String>,
}

/// Characters a question may open with that begin no subject: pronouns and
/// demonstratives (他, 该, 此: the subject is named elsewhere), prepositions (在这次选举中,
/// 于…) and the adverb 最 (最后, 最早).
const NO_SUBJECT_OPENINGS: &[char] = &[
    '他', '她', '它', '其', '该', '此', '这', '那', '本', '我', '你', '您', '上', '下', '前', '后',
    '在', '于', '从', '对', '当', '自', '据', '按', '由', '被', '把', '为', '向', '与', '和', '最',
];

impl HanPairs {
    /// Pairs of `question`, lower-cased. `terms` are its content terms (see
    /// [`crate::text::content_terms`]), `weight` their specificity (1.0 when unknown).
    pub(crate) fn of(question: &str, terms: &[String], weight: impl Fn(&str) -> f32) -> Self {
        let chars: Vec<char> = question.to_lowercase().chars().collect();
        // A character weighs what the most specific content term covering it weighs.
        let mut at = vec![0.0f32; chars.len()];
        for t in terms {
            let tc: Vec<char> = t.chars().collect();
            if tc.is_empty() || tc.len() > chars.len() {
                continue;
            }
            let w = weight(t).max(0.0);
            for start in 0..=chars.len() - tc.len() {
                if chars[start..start + tc.len()] == tc[..] {
                    for x in &mut at[start..start + tc.len()] {
                        *x = x.max(w);
                    }
                }
            }
        }
        let mut best: HashMap<String, f32> = HashMap::new();
        for i in 0..chars.len().saturating_sub(1) {
            let (a, b) = (chars[i], chars[i + 1]);
            if !(a.is_alphanumeric() && b.is_alphanumeric()) || at[i] <= 0.0 || at[i + 1] <= 0.0 {
                continue;
            }
            let w = (at[i] + at[i + 1]) / 2.0;
            let e = best.entry([a, b].iter().collect()).or_insert(0.0);
            *e = e.max(w);
        }
        // The opening pair: the first two characters after leading punctuation
        // (「唐音」), both Han and both content, and not opening with a character that
        // begins no subject.
        let first = chars.iter().position(|c| c.is_alphanumeric());
        let leading = first
            .filter(|&i| {
                i + 1 < chars.len()
                    && !NO_SUBJECT_OPENINGS.contains(&chars[i])
                    && crate::text::is_han(chars[i])
                    && crate::text::is_han(chars[i + 1])
                    && at[i] > 0.0
                    && at[i + 1] > 0.0
            })
            .map(|i| [chars[i], chars[i + 1]].iter().collect());
        let mut pairs: Vec<(String, f32)> = best.into_iter().collect();
        pairs.sort_by(|x, y| x.0.cmp(&y.0));
        let total = pairs.iter().map(|(_, w)| w).sum();
        HanPairs {
            pairs,
            total,
            leading,
        }
    }

    /// The pair the question opens with, if it opens with content.
    pub(crate) fn leading(&self) -> Option<&str> {
        self.leading.as_deref()
    }

    /// Whether `text` holds the pair the question opens with (true when it opens with
    /// none). A Chinese question opens with what it asks about, and an answer says that
    /// subject: "圣保罗堂区成立于1824年" shares 堂区 and 成立 with "圣体堂区成立于哪年",
    /// most of its pairs, and is about another parish.
    pub(crate) fn leads(&self, text: &str) -> bool {
        // The pair is two Han characters, which have no case.
        self.leading
            .as_ref()
            .is_none_or(|p| text.contains(p.as_str()))
    }

    /// Whether the question has any pair to look for.
    pub(crate) fn is_empty(&self) -> bool {
        self.pairs.is_empty() || self.total <= 0.0
    }

    /// Share (0..=1, by weight) of the question's pairs that `text` holds.
    pub(crate) fn share(&self, text: &str) -> f32 {
        if self.is_empty() {
            return 0.0;
        }
        let lower = text.to_lowercase();
        self.pairs
            .iter()
            .filter(|(p, _)| lower.contains(p.as_str()))
            .map(|(_, w)| w)
            .sum::<f32>()
            / self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::content_terms;

    fn pairs(q: &str, weights: &[(&str, f32)]) -> HanPairs {
        let w: HashMap<&str, f32> = weights.iter().copied().collect();
        HanPairs::of(q, &content_terms(q), |t| w.get(t).copied().unwrap_or(1.0))
    }

    #[test]
    fn a_sentence_sharing_scattered_characters_says_little_of_the_question() {
        // As the engine weighs them: the name's characters are rare, 出生 and 在 common.
        let p = pairs(
            "班杰在哪里出生？",
            &[("班", 3.0), ("杰", 3.0), ("在", 0.1), ("出生", 0.5)],
        );
        assert!(!p.is_empty(), "{p:?}");
        let about_him = p.share("班杰于1950年出生于伦敦。");
        let about_another =
            p.share("他在比赛开赛8.5秒即取得入球，创造了班士利队史最快入球纪录，出生于乡下。");
        assert!(about_him > 0.6, "{about_him}");
        assert!(about_another < 0.5, "{about_another} {p:?}");
        assert!(about_another > 0.0, "{about_another}");
    }

    #[test]
    fn an_answer_says_the_subject_the_question_opens_with() {
        let p = pairs("圣体堂区成立于哪年？", &[]);
        assert!(p.share("圣保罗堂区成立于1824年。") >= 0.4);
        assert!(!p.leads("圣保罗堂区成立于1824年。"));
        assert!(p.leads("圣体堂区\n该堂区成立于1905年。"));
        // Leading punctuation is skipped; a question that opens with no content word
        // (他, a question word) has no opening pair and every text leads.
        assert!(!pairs("「唐音」的「唐」指什么", &[]).leads("汉音的特点"));
        assert!(pairs("他司职什么位置？", &[]).leads("中场球员"));
        assert!(pairs("在这次选举中领先的是谁？", &[]).leads("两位候选人"));
        assert!(pairs("BCPL是一种什么语言？", &[]).leads("汉语"));
    }

    #[test]
    fn the_rare_word_weighs_more_than_the_common_one() {
        let p = pairs("BCPL是一种什么语言？", &[("bcpl", 8.0), ("语言", 1.0)]);
        let names_it = p.share("BCPL 由理查德设计。");
        let shares_the_common_word = p.share("汉语是一种语言。");
        assert!(names_it > shares_the_common_word);
        assert!(names_it > 0.7, "{names_it}");
    }

    #[test]
    fn question_words_and_punctuation_make_no_pairs_and_hostile_input_is_harmless() {
        assert!(pairs("什么？哪里？", &[]).is_empty());
        assert!(pairs("", &[]).is_empty());
        assert_eq!(pairs("", &[]).share("任何文字"), 0.0);
        let long = "班".repeat(20_000);
        let p = pairs(&long, &[]);
        assert_eq!(p.share(&long), 1.0);
        assert_eq!(p.share("\u{0}\u{301}"), 0.0);
    }
}
