//! Verification: every citation must be evidence of this run and quote it exactly, and
//! every claim of an answer must be supported by the text it cites.
//!
//! A claim is a sentence (or a `；`-part of one) with the `[n]` marks it carries. It is
//! supported when the numbers and identifiers it states occur in the quotes it cites
//! (or in the program's facts), its polarity agrees with theirs, it does not contradict a
//! conclusion the program computed, and enough of its content terms occur in the quotes
//! — or, when the words differ (another language, a paraphrase), the quotes are close
//! to it in meaning (dense similarity).

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;

use crate::conditions::{contradicts, is_negative, Conclusion};
use crate::text::{content_terms, identifiers, other_language, sentences};
use crate::{Citation, ClaimCheck, State};

/// Share of a claim's content terms its cited quotes must contain.
pub const LEXICAL_SUPPORT: f32 = 0.5;
/// Cosine (multilingual-e5-small, claim as query vs quote as passage) at which a claim
/// in another language than its quote counts as supported. Within one language the
/// words must agree: e5 puts a same-language claim on another topic of the same domain
/// as close as a true translation (0.87 for the prompt-example failure against a
/// warranty clause), so meaning alone never supports a same-language claim. Chosen on
/// hand-made translation pairs (BENCHMARKS.md, "Answers").
pub const DENSE_SUPPORT: f32 = 0.88;

pub(crate) static MARK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\[(\d{1,3})\]").expect("mark"));
static NUMBER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\d+(?:\.\d+)?").expect("number"));

/// What the citation check found.
#[derive(Debug, Default)]
pub struct CitationCheck {
    pub dropped: Vec<usize>,
    pub notes: Vec<String>,
}

/// Every citation must point at a chunk fetched in this run and quote it exactly.
pub fn verify_citations(state: &State, citations: &[Citation]) -> CitationCheck {
    let mut out = CitationCheck::default();
    for c in citations {
        let ok = state.evidence.iter().any(|e| {
            e.chunk_id == c.chunk_id
                && e.doc_id == c.doc_id
                && e.version == c.version
                && e.text.contains(c.quote.as_str())
        });
        if !ok {
            out.dropped.push(c.mark);
            out.notes.push(format!(
                "citation [{}] dropped: {} is not evidence of this run or does not contain the quote",
                c.mark, c.chunk_id
            ));
        }
    }
    out
}

/// Judges meaning when words differ: cosine of a claim with each quote, or `None` when
/// no embedder is at hand (then only words count).
pub type Dense<'a> = &'a dyn Fn(&str, &[&str]) -> Option<Vec<f32>>;

/// What a claim is checked against.
pub struct ClaimContext<'a> {
    /// The citations a claim's marks may name.
    pub citations: &'a [Citation],
    /// The question and the program's facts: numbers and identifiers found here need no
    /// quote.
    pub known: String,
    /// The program's facts and conclusions: a claim that restates them is supported by
    /// them (never the question: restating it supports nothing).
    pub facts: String,
    pub conclusions: &'a [Conclusion],
    /// Claims the program built from structure (graph edges, selected records); see
    /// [`crate::answer::Draft::structural`]. Empty for a model's text.
    pub structural: &'a [String],
    pub dense: Option<Dense<'a>>,
}

/// An answer after the claim check.
#[derive(Debug, Default)]
pub struct Checked {
    pub text: String,
    pub claims: Vec<ClaimCheck>,
    pub notes: Vec<String>,
}

impl Checked {
    pub fn kept(&self) -> usize {
        self.claims.iter().filter(|c| c.kept).count()
    }
}

/// Checks every claim of `text`, written by `by` (`model`, `extractive`).
///
/// A model's sentence without a mark is dropped; the program's lines without marks
/// (facts it read, headings of sub-questions) are not claims and stay. A claim is
/// dropped when it cites no citation of the run, names a number or identifier nothing
/// cited contains, contradicts a computed conclusion, or is not supported by its
/// quotes.
pub fn check_claims(text: &str, by: &str, ctx: &ClaimContext) -> Checked {
    let mut out = Checked::default();
    let mut kept_lines = Vec::new();
    for line in text.lines() {
        let mut kept_parts = Vec::new();
        for s in with_marks_attached(sentences(line)) {
            let marks: Vec<usize> = MARK
                .captures_iter(&s)
                .filter_map(|c| c[1].parse().ok())
                .collect();
            if marks.is_empty() {
                if by == "model" {
                    out.notes
                        .push(format!("model claim without a citation dropped: {s}"));
                    out.claims.push(ClaimCheck {
                        text: s.clone(),
                        marks,
                        by: by.into(),
                        kept: false,
                        support: 0.0,
                        reason: "cites nothing".into(),
                    });
                } else {
                    kept_parts.push(s);
                }
                continue;
            }
            let claim = MARK.replace_all(&s, "").trim().to_string();
            let (support, reason) = judge_claim(&claim, &marks, ctx);
            let is_conclusion = is_conclusion(&claim, ctx);
            let is_structural = is_structural(&claim, ctx);
            let kept = reason.is_empty();
            if !kept {
                out.notes
                    .push(format!("{by} claim dropped ({reason}): {s}"));
            }
            out.claims.push(ClaimCheck {
                text: claim,
                marks,
                by: if is_conclusion {
                    "conclusion"
                } else if is_structural {
                    "structure"
                } else {
                    by
                }
                .into(),
                kept,
                support,
                reason,
            });
            if kept {
                kept_parts.push(s);
            }
        }
        if !kept_parts.is_empty() {
            // A bullet whose claims all went keeps nothing of itself.
            let joined = kept_parts.join(" ");
            let is_bare_marker = joined.trim().trim_start_matches('-').trim().is_empty();
            if !is_bare_marker {
                kept_lines.push(
                    if line.trim_start().starts_with("- ") && !joined.starts_with("- ") {
                        format!("- {joined}")
                    } else {
                        joined
                    },
                );
            }
        }
    }
    out.text = kept_lines.join("\n");
    out
}

/// Sentences with a trailing marks-only fragment ("…。 [3]" splits after "。") joined
/// back to the sentence it cites for.
fn with_marks_attached(parts: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in parts {
        let bare = MARK.replace_all(&p, "");
        let bare = bare.trim_matches(|c: char| c.is_whitespace() || "。.，,；;".contains(c));
        match out.last_mut() {
            Some(prev) if bare.is_empty() => {
                prev.push(' ');
                prev.push_str(p.trim());
            }
            _ => out.push(p),
        }
    }
    out
}

/// The support of one claim (0..1) and why it fails (empty when it holds).
fn judge_claim(claim: &str, marks: &[usize], ctx: &ClaimContext) -> (f32, String) {
    let valid: HashSet<usize> = ctx.citations.iter().map(|c| c.mark).collect();
    if let Some(bad) = marks.iter().find(|m| !valid.contains(m)) {
        return (0.0, format!("[{bad}] is no evidence of this run"));
    }
    let quotes: Vec<&str> = ctx
        .citations
        .iter()
        .filter(|c| marks.contains(&c.mark))
        .map(|c| c.quote.as_str())
        .collect();
    // The program's own conclusion lines are supported by construction: their clause
    // is the citation and their facts are the program's.
    if is_conclusion(claim, ctx) || is_structural(claim, ctx) {
        return (1.0, String::new());
    }
    let cited = quotes.join("\n").to_lowercase();
    let known = ctx.known.to_lowercase();
    // A conclusion the program computed is never contradicted.
    if let Some(c) = ctx.conclusions.iter().find(|c| contradicts(claim, c)) {
        return (
            0.0,
            format!("contradicts the computed conclusion: {}", c.statement),
        );
    }
    for id in identifiers(claim) {
        let l = id.to_lowercase();
        if !cited.contains(&l) && !known.contains(&l) {
            return (0.0, format!("names {id}, which nothing it cites contains"));
        }
    }
    let claim_without_ids = identifiers(claim)
        .iter()
        .fold(claim.to_string(), |s, id| s.replace(id.as_str(), " "));
    for n in NUMBER.find_iter(&claim_without_ids) {
        let n = n.as_str();
        if !contains_number(&cited, n) && !contains_number(&known, n) {
            return (0.0, format!("states {n}, which nothing it cites contains"));
        }
    }
    let terms = content_terms(claim);
    let have: HashSet<String> = content_terms(&format!("{cited}\n{}", ctx.facts))
        .into_iter()
        .collect();
    let lexical = if terms.is_empty() {
        1.0
    } else {
        terms.iter().filter(|t| have.contains(*t)).count() as f32 / terms.len() as f32
    };
    // A claim agreeing with a conclusion in polarity is backed by it.
    let backed = ctx
        .conclusions
        .iter()
        .any(|c| crate::conditions::about(claim, c));
    if !backed && !polarity_agrees(claim, &quotes) {
        return (
            lexical,
            "its negation disagrees with the text it cites".into(),
        );
    }
    if lexical >= LEXICAL_SUPPORT || backed {
        return (lexical, String::new());
    }
    // Meaning decides only across languages (see DENSE_SUPPORT).
    let other_language: Vec<&str> = quotes
        .iter()
        .copied()
        .filter(|q| other_language(q, claim))
        .collect();
    if let (Some(dense), false) = (ctx.dense, other_language.is_empty()) {
        if let Some(sims) = dense(claim, &other_language) {
            let best = sims.into_iter().fold(0.0f32, f32::max);
            if best >= DENSE_SUPPORT {
                return (best, String::new());
            }
            return (
                best.max(lexical),
                format!(
                    "not supported by what it cites (terms {lexical:.2} < {LEXICAL_SUPPORT}, meaning {best:.2} < {DENSE_SUPPORT})"
                ),
            );
        }
    }
    (
        lexical,
        format!("not supported by what it cites (terms {lexical:.2} < {LEXICAL_SUPPORT})"),
    )
}

/// Whether `claim` is one of the program's conclusion statements, as written.
fn is_conclusion(claim: &str, ctx: &ClaimContext) -> bool {
    let bare = claim.trim_start_matches("- ").trim_end_matches(['。', '.']);
    ctx.conclusions
        .iter()
        .any(|c| c.statement.trim_end_matches(['。', '.']) == bare)
}

fn is_structural(claim: &str, ctx: &ClaimContext) -> bool {
    let bare = claim.trim_start_matches("- ").trim();
    ctx.structural.iter().any(|s| s.trim() == bare)
}

/// `n` as a whole number in `text` (so "15" is not found in "150" or "2015").
fn contains_number(text: &str, n: &str) -> bool {
    let mut from = 0;
    while let Some(i) = text[from..].find(n) {
        let at = from + i;
        // Part of a longer number: a digit beside it, or a decimal point with a digit
        // beyond it ("1931." ends a sentence; "1931.5" and "2.1931" are other numbers).
        if !joins(text[..at].chars().rev()) && !joins(text[at + n.len()..].chars()) {
            return true;
        }
        from = at + n.len();
    }
    false
}

/// Whether a number continues on this side: a digit, or a point and then a digit.
fn joins(mut side: impl Iterator<Item = char>) -> bool {
    match side.next() {
        Some(c) if c.is_ascii_digit() => true,
        Some('.') => side.next().is_some_and(|c| c.is_ascii_digit()),
        _ => false,
    }
}

/// The comma-part of the quotes closest to each comma-part of the claim must have the
/// same polarity (negated or not); ties go to agreement.
fn polarity_agrees(claim: &str, quotes: &[&str]) -> bool {
    let parts = |s: &str| -> Vec<String> {
        s.split(['，', ',', '；', ';', '。'])
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect()
    };
    let quote_parts: Vec<String> = quotes.iter().flat_map(|q| parts(q)).collect();
    for cp in parts(claim) {
        let ct: HashSet<String> = content_terms(&cp).into_iter().collect();
        if ct.is_empty() {
            continue;
        }
        let scored: Vec<(usize, bool)> = quote_parts
            .iter()
            .map(|qp| {
                let qt: HashSet<String> = content_terms(qp).into_iter().collect();
                (ct.intersection(&qt).count(), is_negative(qp))
            })
            .collect();
        let best = scored.iter().map(|s| s.0).max().unwrap_or(0);
        if best == 0 {
            continue;
        }
        let neg = is_negative(&cp);
        if !scored.iter().any(|(o, n)| *o == best && *n == neg) {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cite(mark: usize, quote: &str) -> Citation {
        Citation {
            mark,
            doc_id: "d".into(),
            version: "1".into(),
            section: "s".into(),
            page: None,
            chunk_id: format!("d@1#{mark}"),
            source_uri: String::new(),
            quote: quote.into(),
        }
    }

    fn ctx<'a>(c: &'a [Citation], known: &str) -> ClaimContext<'a> {
        ClaimContext {
            citations: c,
            known: known.into(),
            facts: String::new(),
            conclusions: &[],
            structural: &[],
            dense: None,
        }
    }

    #[test]
    fn model_claims_need_marks_of_this_run() {
        let c = vec![
            cite(1, "拆封不适用无理由退货。"),
            cite(2, "签收后 30 天内出现非人为故障，可以提交售后检测申请。"),
        ];
        let v = check_claims(
            "拆封不适用无理由退货 [1]。可以提交售后检测申请 [2]。保修三年 [7]。随便说说。订单 A100 也可以 [1]。",
            "model",
            &ctx(&c, "q A123"),
        );
        assert_eq!(v.kept(), 2, "{v:?}");
        assert!(v.text.contains("[1]") && v.text.contains("[2]") && !v.text.contains("保修"));
        assert!(!v.text.contains("A100"));
        assert_eq!(v.claims.len(), 5);
    }

    #[test]
    fn a_claim_its_citation_does_not_support_is_dropped() {
        // The prompt-example failure: a domain answer citing an unrelated product sheet.
        let c = vec![cite(
            1,
            "P-300 是一款降噪耳机，续航 30 小时，支持蓝牙 5.3。",
        )];
        let v = check_claims(
            "不能无理由退货 [1]。",
            "model",
            &ctx(&c, "哪些型号受安全公告影响？"),
        );
        assert_eq!(v.kept(), 0, "{v:?}");
        assert!(v.claims[0].reason.contains("not supported"), "{v:?}");
    }

    #[test]
    fn numbers_and_negations_must_agree() {
        let c = vec![cite(1, "签收后 7 天内且未拆封，可以申请无理由退货。")];
        let v = check_claims(
            "签收后 15 天内可以申请无理由退货 [1]。",
            "model",
            &ctx(&c, ""),
        );
        assert_eq!(v.kept(), 0, "{v:?}");
        assert!(v.claims[0].reason.contains("15"));
        let v = check_claims(
            "签收后 7 天内不能申请无理由退货 [1]。",
            "model",
            &ctx(&c, ""),
        );
        assert_eq!(v.kept(), 0, "{v:?}");
        assert!(v.claims[0].reason.contains("negation"), "{v:?}");
        let v = check_claims(
            "签收后 7 天内且未拆封可以申请无理由退货 [1]。",
            "model",
            &ctx(&c, ""),
        );
        assert_eq!(v.kept(), 1, "{v:?}");
        // A number from the program's facts needs no quote.
        let v = check_claims(
            "已签收 10 天，超过 7 天，不能申请无理由退货 [1]。",
            "model",
            &ctx(&c, "{\"signed_days_ago\":10}"),
        );
        assert!(v.claims[0].reason.contains("negation"), "{v:?}");
        assert!(contains_number("共 15 天", "15") && !contains_number("2015 年", "15"));
        // A number that ends a sentence is whole; a decimal is another number.
        assert!(contains_number("it opened in 1931.", "1931"));
        assert!(
            !contains_number("it weighs 1931.5 kg", "1931") && !contains_number("v2.1931", "1931")
        );
    }

    #[test]
    fn meaning_counts_where_words_differ() {
        let c = vec![cite(
            1,
            "Unopened items may be returned within 14 days of delivery.",
        )];
        let claim = "未拆封的商品在签收 14 天内可以退货 [1]。";
        let v = check_claims(claim, "model", &ctx(&c, ""));
        assert_eq!(v.kept(), 0, "words alone cannot support it: {v:?}");
        let close: Dense = &|_, qs| Some(vec![0.9; qs.len()]);
        let same = vec![cite(1, "未拆封商品签收后十四天内可退。")];
        let mut cx = ctx(&same, "");
        cx.dense = Some(close);
        assert_eq!(
            check_claims("没有打开的东西两周内能够退回 [1]。", "model", &cx).kept(),
            0,
            "within one language meaning alone supports nothing"
        );
        let far: Dense = &|_, qs| Some(vec![0.7; qs.len()]);
        let mut cx = ctx(&c, "");
        cx.dense = Some(close);
        assert_eq!(check_claims(claim, "model", &cx).kept(), 1);
        cx.dense = Some(far);
        assert_eq!(check_claims(claim, "model", &cx).kept(), 0);
    }

    #[test]
    fn a_mark_after_the_full_stop_stays_with_its_sentence() {
        let c = vec![cite(3, "仅限 6 月批次。")];
        let v = check_claims("- 限定：仅限 6 月批次。 [3]", "extractive", &ctx(&c, ""));
        assert_eq!(v.claims.len(), 1, "{v:?}");
        assert_eq!(v.claims[0].marks, vec![3]);
        assert!(v.claims[0].kept);
    }

    #[test]
    fn program_lines_without_marks_stay() {
        let c = vec![cite(1, "pay-gw depends on risk-engine.")];
        let v = check_claims(
            "Record A1 (orders): opened: true\n- pay-gw depends on risk-engine [1]",
            "extractive",
            &ctx(&c, "A1"),
        );
        assert_eq!(v.kept(), 1);
        assert!(v.text.starts_with("Record A1"), "{}", v.text);
        assert!(
            v.text.contains("- pay-gw depends on risk-engine [1]"),
            "{}",
            v.text
        );
    }
}
