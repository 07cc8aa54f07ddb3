//! `dossier eval DATASET --ask`: answer-level evaluation. The dataset is ingested as for
//! retrieval evaluation, then every question is put to the `ask` agent as the default
//! tenant's principal `eval`, and the answers are scored:
//!
//! - `exact_match`, `f1` (SQuAD-style normalisation; Chinese per character) and
//!   `answer_recall` (the gold answer occurs in the answer text) over answerable
//!   questions. EM and F1 compare the whole answer text, so they mean something only
//!   when a model writes a short answer; `writers` says who wrote.
//! - `citation_precision` / `citation_recall` of the cited passages against `gold_ids`.
//! - groundedness, twice: the agent's own verifier (`trace.claims`), and an
//!   independent lexical check written here ([`sentence_grounded`]).
//! - abstention: `no_answer_accuracy` over answerable and unanswerable questions
//!   (`answers` empty or `type: "Null"`).
//! - statuses, trajectory metrics and per-ask latency.
//!
//! The metrics are pure functions of strings and statuses, tested below.

use std::collections::{BTreeMap, HashSet};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use dossier_agent::{Agent, AskRequest, AskResponse, EngineTools};
use dossier_engine::eval::{eval_scope, percentile, EVAL_PRINCIPAL};
use dossier_engine::{Engine, Progress};
use serde::{Deserialize, Serialize};

/// What `--ask` needs besides the dataset.
pub struct AskEvalOptions {
    pub limit: Option<usize>,
    /// `none`, `local` or an OpenAI-compatible URL (as `dossier ask --llm`).
    pub llm: String,
    pub llm_model: String,
    pub per_question: bool,
    /// Each question's budget (what the model may do among it).
    pub budget: dossier_agent::Budget,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Question {
    pub(crate) id: String,
    pub(crate) question: String,
    #[serde(default, deserialize_with = "answer_strings")]
    answers: Vec<String>,
    #[serde(default)]
    pub(crate) gold_ids: Vec<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
}

/// Answers as strings, or as lists of alternatives (RGB nests them): every string counts.
fn answer_strings<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum One {
        Text(String),
        Alternatives(Vec<String>),
    }
    let all: Vec<One> = serde::Deserialize::deserialize(d)?;
    Ok(all
        .into_iter()
        .flat_map(|a| match a {
            One::Text(t) => vec![t],
            One::Alternatives(v) => v,
        })
        .collect())
}

impl Question {
    fn answerable(&self) -> bool {
        is_answerable(&self.answers, self.kind.as_deref())
    }
}

/// A question is unanswerable when it has no answer (none that survives
/// normalisation) or its type is `Null`.
pub fn is_answerable(answers: &[String], kind: Option<&str>) -> bool {
    kind != Some("Null") && answers.iter().any(|a| !tokens(a).is_empty())
}

// ---------------------------------------------------------------------------------
// Normalisation and answer scores
// ---------------------------------------------------------------------------------

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // kana
        | 0x3400..=0x4DBF    // CJK extension A
        | 0x4E00..=0x9FFF    // CJK unified ideographs
        | 0xF900..=0xFAFF    // compatibility ideographs
        | 0x20000..=0x2FA1F) // extensions B.. and supplement
}

/// Full-width ASCII forms (`１９８３`, `ＡＢＣ`) as ASCII.
fn fold_width(c: char) -> char {
    match c as u32 {
        0xFF01..=0xFF5E => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
        0x3000 => ' ',
        _ => c,
    }
}

/// SQuAD-style normalised tokens: lowercase, punctuation and symbols removed, the
/// English articles `a`/`an`/`the` dropped, split on whitespace; every CJK character
/// is a token of its own (CMRC's per-character comparison). Mirrored by
/// `scripts/make-noanswer-set`'s `normalize`.
pub fn tokens(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut Vec<String>| {
        if !word.is_empty() && !matches!(word.as_str(), "a" | "an" | "the") {
            out.push(std::mem::take(word));
        }
        word.clear();
    };
    for c in s.chars().map(fold_width).flat_map(char::to_lowercase) {
        if is_cjk(c) {
            flush(&mut word, &mut out);
            out.push(c.to_string());
        } else if c.is_whitespace() {
            flush(&mut word, &mut out);
        } else if c.is_alphanumeric() {
            word.push(c);
        }
        // Punctuation and symbols are removed (not split on), as in SQuAD's script.
    }
    flush(&mut word, &mut out);
    out
}

/// The answer text without its `[n]` citation marks.
pub fn strip_marks(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('[') {
        out.push_str(&rest[..i]);
        match mark_at(&rest[i..]) {
            Some((_, len)) => rest = &rest[i + len..],
            None => {
                out.push('[');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// `[n]` at the start of `s`: the mark and its length in bytes.
fn mark_at(s: &str) -> Option<(usize, usize)> {
    let body = s.strip_prefix('[')?;
    let end = body.find(']')?;
    let digits = &body[..end];
    if digits.is_empty() || digits.len() > 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((digits.parse().ok()?, end + 2))
}

/// 1 when the normalised prediction equals one of the normalised gold answers;
/// `None` when there is no gold answer to compare with.
pub fn exact_match(prediction: &str, golds: &[String]) -> Option<f64> {
    let p = tokens(&strip_marks(prediction));
    let golds: Vec<Vec<String>> = golds
        .iter()
        .map(|g| tokens(g))
        .filter(|g| !g.is_empty())
        .collect();
    if golds.is_empty() {
        return None;
    }
    Some(if golds.contains(&p) { 1.0 } else { 0.0 })
}

/// Token-bag F1 (SQuAD), the best over the gold answers.
pub fn f1(prediction: &str, golds: &[String]) -> Option<f64> {
    let p = tokens(&strip_marks(prediction));
    let mut best: Option<f64> = None;
    for g in golds {
        let g = tokens(g);
        if g.is_empty() {
            continue;
        }
        let mut pool: BTreeMap<&str, usize> = BTreeMap::new();
        for t in &g {
            *pool.entry(t.as_str()).or_default() += 1;
        }
        let mut common = 0usize;
        for t in &p {
            if let Some(n) = pool.get_mut(t.as_str()) {
                if *n > 0 {
                    *n -= 1;
                    common += 1;
                }
            }
        }
        let score = if common == 0 {
            0.0
        } else {
            let precision = common as f64 / p.len() as f64;
            let recall = common as f64 / g.len() as f64;
            2.0 * precision * recall / (precision + recall)
        };
        best = Some(best.map_or(score, |b: f64| b.max(score)));
    }
    best
}

/// Whether one of the gold answers, normalised, occurs in the answer text as a run of
/// whole tokens (whole words in English, characters in Chinese).
pub fn answer_found(answer: &str, golds: &[String]) -> Option<bool> {
    let a = tokens(&strip_marks(answer));
    let golds: Vec<Vec<String>> = golds
        .iter()
        .map(|g| tokens(g))
        .filter(|g| !g.is_empty())
        .collect();
    if golds.is_empty() {
        return None;
    }
    Some(
        golds
            .iter()
            .any(|g| g.len() <= a.len() && a.windows(g.len()).any(|w| w == g.as_slice())),
    )
}

// ---------------------------------------------------------------------------------
// Citations
// ---------------------------------------------------------------------------------

/// Share of the distinct cited passages that are gold; `None` when nothing is cited
/// or there is no gold to judge by.
pub fn citation_precision(cited: &[String], gold: &[String]) -> Option<f64> {
    let cited: HashSet<&str> = cited.iter().map(String::as_str).collect();
    if cited.is_empty() || gold.is_empty() {
        return None;
    }
    let gold: HashSet<&str> = gold.iter().map(String::as_str).collect();
    Some(cited.intersection(&gold).count() as f64 / cited.len() as f64)
}

/// Share of the gold passages cited; `None` without gold passages.
pub fn citation_recall(cited: &[String], gold: &[String]) -> Option<f64> {
    let gold: HashSet<&str> = gold.iter().map(String::as_str).collect();
    if gold.is_empty() {
        return None;
    }
    let cited: HashSet<&str> = cited.iter().map(String::as_str).collect();
    Some(gold.intersection(&cited).count() as f64 / gold.len() as f64)
}

// ---------------------------------------------------------------------------------
// The independent groundedness check
// ---------------------------------------------------------------------------------

/// English words that carry no content.
const STOPWORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any",
    "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both",
    "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few",
    "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers",
    "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its",
    "itself", "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off",
    "on", "once", "only", "or", "other", "our", "ours", "out", "over", "own", "same", "she",
    "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "then",
    "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up",
    "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why",
    "will", "with", "would", "you", "your", "yours", "yes", "s", "t",
];

/// Content tokens of a sentence: lowercased English (Latin-script) words that are not
/// stopwords or bare numbers (numbers have their own rule), and the character
/// bigrams of every run of Chinese characters (a lone character stands for itself).
pub fn content_tokens(s: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    let mut word = String::new();
    let mut run: Vec<char> = Vec::new();
    let flush_word = |word: &mut String, out: &mut HashSet<String>| {
        if !word.is_empty()
            && !STOPWORDS.contains(&word.as_str())
            && !word.chars().all(|c| c.is_ascii_digit())
        {
            out.insert(word.clone());
        }
        word.clear();
    };
    let flush_run = |run: &mut Vec<char>, out: &mut HashSet<String>| {
        match run.len() {
            0 => {}
            1 => {
                out.insert(run[0].to_string());
            }
            _ => {
                for w in run.windows(2) {
                    out.insert(w.iter().collect());
                }
            }
        }
        run.clear();
    };
    for c in s.chars().map(fold_width).flat_map(char::to_lowercase) {
        if is_cjk(c) {
            flush_word(&mut word, &mut out);
            run.push(c);
        } else if c.is_alphanumeric() {
            flush_run(&mut run, &mut out);
            word.push(c);
        } else {
            // Apostrophes and hyphens split words as any other separator does.
            flush_word(&mut word, &mut out);
            flush_run(&mut run, &mut out);
        }
    }
    flush_word(&mut word, &mut out);
    flush_run(&mut run, &mut out);
    out
}

/// Numbers in a text: runs of digits, with `.` or `,` between digits kept inside
/// (`6,960` and `6960` are the same number; `3.5` stays `3.5`). Digits right after a
/// Latin letter belong to an identifier (`p0009`, `L0C0`, `M1924`), not a number:
/// identifiers are content tokens, judged by coverage.
pub fn numbers(s: &str) -> Vec<String> {
    let chars: Vec<char> = s.chars().map(fold_width).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let identifier = i > 0 && chars[i - 1].is_ascii_alphabetic();
        let mut n = String::new();
        while i < chars.len() {
            let c = chars[i];
            if c.is_ascii_digit() {
                n.push(c);
            } else if (c == '.' || c == ',') && chars.get(i + 1).is_some_and(char::is_ascii_digit) {
                if c == '.' {
                    n.push('.');
                }
            } else {
                break;
            }
            i += 1;
        }
        if !identifier {
            out.push(n);
        }
    }
    out
}

/// Share of a sentence's content tokens its quotes must cover.
pub const COVERAGE: f64 = 0.5;

/// Whether a sentence is supported by the quotes it cites: at least [`COVERAGE`] of
/// its content tokens occur among the quotes' content tokens, and every number in it
/// occurs as a number in a quote. A sentence that cites nothing usable (no quote) is
/// not grounded.
pub fn sentence_grounded(sentence: &str, quotes: &[&str]) -> bool {
    if quotes.is_empty() {
        return false;
    }
    let mut have = HashSet::new();
    let mut have_numbers = HashSet::new();
    for q in quotes {
        have.extend(content_tokens(q));
        have_numbers.extend(numbers(q));
    }
    let want = content_tokens(sentence);
    let covered = if want.is_empty() {
        1.0
    } else {
        want.iter().filter(|t| have.contains(*t)).count() as f64 / want.len() as f64
    };
    covered >= COVERAGE && numbers(sentence).iter().all(|n| have_numbers.contains(n))
}

/// The answer's sentences that carry `[n]` marks, each with its marks (marks right
/// after a sentence's end, `… end. [2]`, belong to that sentence) and its text
/// without them.
pub fn marked_sentences(answer: &str) -> Vec<(String, Vec<usize>)> {
    let mut out: Vec<(String, Vec<usize>)> = Vec::new();
    for line in answer.lines() {
        let mut segments: Vec<String> = Vec::new();
        let mut cur = String::new();
        let chars: Vec<char> = line.chars().collect();
        for (i, &c) in chars.iter().enumerate() {
            cur.push(c);
            let next = chars.get(i + 1);
            let end = matches!(c, '。' | '！' | '？' | '；')
                || (matches!(c, '.' | '!' | '?' | ';')
                    && next.is_none_or(|n| n.is_whitespace() || *n == '['));
            if end {
                segments.push(std::mem::take(&mut cur));
            }
        }
        segments.push(cur);
        let mut line_out: Vec<(String, Vec<usize>)> = Vec::new();
        for seg in segments {
            // Marks that open a segment close the sentence before it.
            let mut rest = seg.trim_start();
            let mut leading = Vec::new();
            while let Some((m, len)) = mark_at(rest) {
                leading.push(m);
                rest = rest[len..].trim_start();
            }
            if let Some(prev) = line_out.last_mut() {
                prev.1.extend(leading);
            } else if !leading.is_empty() {
                line_out.push((String::new(), leading));
            }
            let mut marks = Vec::new();
            let mut r = rest;
            while let Some(i) = r.find('[') {
                match mark_at(&r[i..]) {
                    Some((m, len)) => {
                        marks.push(m);
                        r = &r[i + len..];
                    }
                    None => r = &r[i + 1..],
                }
            }
            let text = strip_marks(rest);
            let text = text.trim().trim_start_matches(['-', '*', '•']).trim();
            if text.chars().any(char::is_alphanumeric) {
                line_out.push((text.to_string(), marks));
            } else if let Some(prev) = line_out.last_mut() {
                prev.1.extend(marks);
            }
        }
        out.extend(
            line_out
                .into_iter()
                .filter(|(t, m)| !m.is_empty() && !t.is_empty()),
        );
    }
    for (_, m) in &mut out {
        m.sort_unstable();
        m.dedup();
    }
    out
}

/// The independent check over one answer: (sentences with marks, of which grounded).
/// `quotes` maps a mark to its citation's quote.
pub fn answer_groundedness(answer: &str, quotes: &BTreeMap<usize, String>) -> (usize, usize) {
    let mut checked = 0;
    let mut grounded = 0;
    for (sentence, marks) in marked_sentences(answer) {
        let qs: Vec<&str> = marks
            .iter()
            .filter_map(|m| quotes.get(m).map(String::as_str))
            .collect();
        checked += 1;
        if sentence_grounded(&sentence, &qs) {
            grounded += 1;
        }
    }
    (checked, grounded)
}

// ---------------------------------------------------------------------------------
// Abstention
// ---------------------------------------------------------------------------------

/// The agent declined to answer.
pub fn abstained(status: &str) -> bool {
    matches!(status, "insufficient_evidence" | "unavailable")
}

/// The agent gave an answer (an error is neither an answer nor an abstention).
pub fn answered(status: &str) -> bool {
    matches!(status, "answered" | "partial")
}

/// What an answer predicts: an abstention answers nothing and scores as an empty
/// prediction (its "insufficient evidence" text is not an answer).
pub fn prediction<'a>(status: &str, answer: &'a str) -> &'a str {
    if abstained(status) {
        ""
    } else {
        answer
    }
}

/// Abstention figures over (answerable, status) pairs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct NoAnswer {
    /// (abstained on unanswerable + answered answerable) / all.
    pub no_answer_accuracy: Option<f64>,
    pub abstain_rate_unanswerable: Option<f64>,
    pub answer_rate_answerable: Option<f64>,
}

pub fn no_answer(items: &[(bool, &str)]) -> NoAnswer {
    let ratio = |n: usize, d: usize| (d > 0).then(|| n as f64 / d as f64);
    let answerable = items.iter().filter(|(a, _)| *a).count();
    let unanswerable = items.len() - answerable;
    let answered_ok = items.iter().filter(|(a, s)| *a && answered(s)).count();
    let abstained_ok = items.iter().filter(|(a, s)| !*a && abstained(s)).count();
    NoAnswer {
        no_answer_accuracy: ratio(answered_ok + abstained_ok, items.len()),
        abstain_rate_unanswerable: ratio(abstained_ok, unanswerable),
        answer_rate_answerable: ratio(answered_ok, answerable),
    }
}

fn mean(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let (mut s, mut n) = (0.0, 0usize);
    for x in xs {
        s += x;
        n += 1;
    }
    (n > 0).then(|| s / n as f64)
}

/// `zh` when the question has Chinese characters, else `en`.
pub fn language(question: &str) -> &'static str {
    if question.chars().any(is_cjk) {
        "zh"
    } else {
        "en"
    }
}

// ---------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------

/// One question's outcome, for error analysis.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub id: String,
    pub question: String,
    pub language: &'static str,
    pub answerable: bool,
    /// `answered`, `partial`, `insufficient_evidence`, `unavailable`, or `error`.
    pub status: String,
    pub writer: String,
    pub answer: String,
    /// The model's checked short answer, when it found one (what EM/F1 score).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub short_answer: Option<String>,
    /// Why a sub-question's evidence was not taken as an answer (meaning or the
    /// model's judgement), for error analysis.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub doubts: Vec<String>,
    /// Per sub-question: what covered it (`judged_by`) and the sufficiency decision's
    /// features and confidence (`fit`), the data its thresholds are chosen on.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fits: Vec<serde_json::Value>,
    /// Distinct cited passages (document ids), in mark order.
    pub cited: Vec<String>,
    pub gold_ids: Vec<String>,
    pub answers: Vec<String>,
    pub em: Option<f64>,
    pub f1: Option<f64>,
    pub answer_found: Option<bool>,
    pub citation_precision: Option<f64>,
    pub citation_recall: Option<f64>,
    /// Share of the marked sentences the independent check finds supported.
    pub grounded: Option<f64>,
    pub sentences_checked: usize,
    pub sentences_grounded: usize,
    pub claims: usize,
    pub claims_kept: usize,
    pub steps: usize,
    pub tool_calls: usize,
    pub repeated_queries: usize,
    pub budget_overruns: usize,
    pub rejected_proposals: usize,
    pub latency_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Groundedness, judged twice.
#[derive(Debug, Clone, Serialize)]
pub struct Groundedness {
    /// Share of the verifier's claims (`trace.claims`) that it kept; null when the
    /// agent reports no claims.
    pub verifier: Option<f64>,
    pub claims: usize,
    pub claims_dropped: usize,
    /// Share of marked answer sentences this evaluation's own lexical check finds
    /// supported by their cited quotes (content-token coverage ≥ 0.5, numbers quoted).
    pub independent: Option<f64>,
    pub sentences_checked: usize,
    pub sentences_grounded: usize,
}

/// Figures over a set of outcomes.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub questions: usize,
    pub answerable: usize,
    pub unanswerable: usize,
    /// Over answerable questions; an abstention scores 0. Only meaningful where
    /// `writers` shows `model`.
    pub exact_match: Option<f64>,
    pub f1: Option<f64>,
    /// Share of answerable questions whose answer string occurs in the answer text.
    pub answer_recall: Option<f64>,
    /// Over questions that have gold ids and cite something.
    pub citation_precision: Option<f64>,
    /// Over questions that have gold ids.
    pub citation_recall: Option<f64>,
    pub questions_citing: usize,
    pub questions_with_gold: usize,
    pub groundedness: Groundedness,
    #[serde(flatten)]
    pub no_answer: NoAnswer,
    pub statuses: BTreeMap<String, usize>,
    pub writers: BTreeMap<String, usize>,
    pub steps_mean: f64,
    pub tool_calls_mean: f64,
    pub repeated_queries: usize,
    pub budget_overruns: usize,
    pub rejected_proposals: usize,
    pub latency_p50_ms: f64,
    pub latency_p99_ms: f64,
}

pub fn figures(outcomes: &[&Outcome]) -> Figures {
    let n = outcomes.len();
    let answerable: Vec<&&Outcome> = outcomes.iter().filter(|o| o.answerable).collect();
    let claims: usize = outcomes.iter().map(|o| o.claims).sum();
    let kept: usize = outcomes.iter().map(|o| o.claims_kept).sum();
    let checked: usize = outcomes.iter().map(|o| o.sentences_checked).sum();
    let grounded: usize = outcomes.iter().map(|o| o.sentences_grounded).sum();
    let mut lat: Vec<f64> = outcomes.iter().map(|o| o.latency_ms).collect();
    lat.sort_by(f64::total_cmp);
    let mut statuses = BTreeMap::new();
    let mut writers = BTreeMap::new();
    for o in outcomes {
        *statuses.entry(o.status.clone()).or_default() += 1;
        *writers.entry(o.writer.clone()).or_default() += 1;
    }
    let pairs: Vec<(bool, &str)> = outcomes
        .iter()
        .map(|o| (o.answerable, o.status.as_str()))
        .collect();
    let per_q = |f: fn(&Outcome) -> usize| outcomes.iter().map(|o| f(o)).sum::<usize>();
    Figures {
        questions: n,
        answerable: answerable.len(),
        unanswerable: n - answerable.len(),
        exact_match: mean(answerable.iter().filter_map(|o| o.em)),
        f1: mean(answerable.iter().filter_map(|o| o.f1)),
        answer_recall: mean(
            answerable
                .iter()
                .filter_map(|o| o.answer_found)
                .map(f64::from),
        ),
        citation_precision: mean(outcomes.iter().filter_map(|o| o.citation_precision)),
        citation_recall: mean(outcomes.iter().filter_map(|o| o.citation_recall)),
        questions_citing: outcomes.iter().filter(|o| !o.cited.is_empty()).count(),
        questions_with_gold: outcomes.iter().filter(|o| !o.gold_ids.is_empty()).count(),
        groundedness: Groundedness {
            verifier: (claims > 0).then(|| kept as f64 / claims as f64),
            claims,
            claims_dropped: claims - kept,
            independent: (checked > 0).then(|| grounded as f64 / checked as f64),
            sentences_checked: checked,
            sentences_grounded: grounded,
        },
        no_answer: no_answer(&pairs),
        statuses,
        writers,
        steps_mean: per_q(|o| o.steps) as f64 / n.max(1) as f64,
        tool_calls_mean: per_q(|o| o.tool_calls) as f64 / n.max(1) as f64,
        repeated_queries: per_q(|o| o.repeated_queries),
        budget_overruns: per_q(|o| o.budget_overruns),
        rejected_proposals: per_q(|o| o.rejected_proposals),
        latency_p50_ms: percentile(&lat, 0.5),
        latency_p99_ms: percentile(&lat, 0.99),
    }
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct AskEvalReport {
    pub dataset: String,
    pub store: String,
    pub llm: String,
    pub ingest: dossier_engine::IngestReport,
    pub graph_build_s: f64,
    pub wall_s: f64,
    #[serde(flatten)]
    pub all: Figures,
    /// The same figures per question language, when there are several.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub by_language: BTreeMap<String, Figures>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_question: Vec<Outcome>,
}

pub(crate) fn read_questions(path: &Path) -> Result<Vec<Question>> {
    let file = std::fs::File::open(path).with_context(|| path.display().to_string())?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("{}:{}", path.display(), i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        out.push(
            serde_json::from_str(&line).with_context(|| format!("{}:{}", path.display(), i + 1))?,
        );
    }
    Ok(out)
}

/// Passage ids of a corpus file.
fn corpus_ids(path: &Path) -> Result<HashSet<String>> {
    #[derive(Deserialize)]
    struct Id {
        id: serde_json::Value,
    }
    let file = std::fs::File::open(path).with_context(|| path.display().to_string())?;
    let mut out = HashSet::new();
    for line in std::io::BufReader::new(file).lines() {
        let line = line?;
        if let Ok(Id { id }) = serde_json::from_str::<Id>(&line) {
            out.insert(match id {
                serde_json::Value::String(s) => s.trim().to_string(),
                other => other.to_string(),
            });
        }
    }
    Ok(out)
}

fn status_name(r: &AskResponse) -> String {
    serde_json::to_value(r.status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn score(q: &Question, resp: std::result::Result<AskResponse, String>, ms: f64) -> Outcome {
    let answerable = q.answerable();
    let mut o = Outcome {
        id: q.id.clone(),
        question: q.question.clone(),
        language: language(&q.question),
        answerable,
        status: "error".into(),
        writer: "none".into(),
        answer: String::new(),
        short_answer: None,
        doubts: vec![],
        fits: vec![],
        cited: vec![],
        gold_ids: q.gold_ids.clone(),
        answers: q.answers.clone(),
        em: None,
        f1: None,
        answer_found: None,
        citation_precision: None,
        citation_recall: citation_recall(&[], &q.gold_ids),
        grounded: None,
        sentences_checked: 0,
        sentences_grounded: 0,
        claims: 0,
        claims_kept: 0,
        steps: 0,
        tool_calls: 0,
        repeated_queries: 0,
        budget_overruns: 0,
        rejected_proposals: 0,
        latency_ms: ms,
        error: None,
    };
    if answerable {
        o.em = Some(0.0);
        o.f1 = Some(0.0);
        o.answer_found = Some(false);
    }
    let r = match resp {
        Ok(r) => r,
        Err(e) => {
            o.error = Some(e);
            return o;
        }
    };
    o.status = status_name(&r);
    o.writer = r.trace.writer.clone();
    o.answer = r.answer.clone();
    o.short_answer = r.short_answer.as_ref().map(|a| a.text.clone());
    o.doubts = r
        .trace
        .sub_questions
        .iter()
        .filter_map(|s| s.doubt.clone())
        .collect();
    o.fits = r
        .trace
        .sub_questions
        .iter()
        .map(|s| {
            serde_json::json!({
                "judged_by": s.judged_by,
                "covered": s.covered,
                "fit": s.fit.as_ref().map(|f| serde_json::json!({
                    "slot": f.slot,
                    "coverage": f.coverage,
                    "confidence": f.confidence,
                    "features": f.features,
                    "sentence": f.sentence,
                    "chunk_id": f.chunk_id,
                    "doubt": f.doubt,
                })),
            })
        })
        .collect();
    for c in &r.citations {
        if !o.cited.contains(&c.doc_id) {
            o.cited.push(c.doc_id.clone());
        }
    }
    // The short answer, when a model found one and the program checked it, is the
    // prediction EM and F1 score (an answer of sentences scores next to nothing).
    let prediction = prediction(
        &o.status,
        r.short_answer
            .as_ref()
            .map_or(r.answer.as_str(), |a| a.text.as_str()),
    );
    if answerable {
        o.em = exact_match(prediction, &q.answers);
        o.f1 = f1(prediction, &q.answers);
        o.answer_found = answer_found(prediction, &q.answers);
    }
    o.citation_precision = citation_precision(&o.cited, &q.gold_ids);
    o.citation_recall = citation_recall(&o.cited, &q.gold_ids);
    let quotes: BTreeMap<usize, String> = r
        .citations
        .iter()
        .map(|c| (c.mark, c.quote.clone()))
        .collect();
    let (checked, grounded) = answer_groundedness(&r.answer, &quotes);
    o.sentences_checked = checked;
    o.sentences_grounded = grounded;
    o.grounded = (checked > 0).then(|| grounded as f64 / checked as f64);
    o.claims = r.trace.claims.len();
    o.claims_kept = r.trace.claims.iter().filter(|c| c.kept).count();
    o.steps = r.trace.steps.len();
    o.tool_calls = r.trace.budget.calls.values().sum();
    let m = &r.trace.metrics;
    o.repeated_queries = m.repeated_queries;
    o.budget_overruns = m.budget_overruns;
    o.rejected_proposals = m.rejected_proposals;
    o
}

/// Ingests `dataset` into `engine`'s store and puts every question to the agent.
pub fn run(
    engine: &Engine,
    dataset: &Path,
    store: &Path,
    opts: &AskEvalOptions,
    progress: &mut dyn Progress,
) -> Result<AskEvalReport> {
    let started = Instant::now();
    let corpus = dataset.join("corpus.jsonl");
    let qpath = dataset.join("questions.jsonl");
    for p in [&corpus, &qpath] {
        if !p.is_file() {
            bail!(
                "{}: not found (a dataset has corpus.jsonl and questions.jsonl)",
                p.display()
            );
        }
    }
    let mut questions = read_questions(&qpath)?;
    if let Some(n) = opts.limit {
        questions.truncate(n);
    }
    if questions.is_empty() {
        bail!("no questions in {}", qpath.display());
    }
    let llm = crate::ask::Llm::connect(&opts.llm, &opts.llm_model)?;
    let ingest = engine.ingest(&[PathBuf::from(&corpus)], progress)?;
    // A store is only added to: passages dropped from a corpus since an earlier run
    // would still be there and could answer the "unanswerable" questions.
    let ids = corpus_ids(&corpus)?;
    let stale: Vec<String> = engine
        .store()
        .view()
        .entries()
        .map(|e| e.meta.doc_id.clone())
        .filter(|d| !ids.contains(d))
        .collect();
    if !stale.is_empty() {
        bail!(
            "store {} holds {} documents that {} does not (e.g. {}): it was built from another \
             version of the dataset; remove the store or pass --store",
            store.display(),
            stale.len(),
            corpus.display(),
            stale[0]
        );
    }
    let scope = eval_scope(engine)?;
    // Built once up front, so the first question's latency is its own.
    let t = Instant::now();
    progress.start("building graph", 1);
    engine.warm_graph(&scope)?;
    progress.finish();
    let graph_build_s = t.elapsed().as_secs_f64();

    let tools = EngineTools::new(engine);
    let agent = Agent {
        engine,
        tools: &tools,
        model: llm.model.as_deref(),
    };
    let now = chrono::Local::now().date_naive();
    progress.start("eval ask", questions.len() as u64);
    let mut outcomes = Vec::with_capacity(questions.len());
    for q in &questions {
        let mut req = AskRequest::new(EVAL_PRINCIPAL, &q.question, now);
        req.budget = opts.budget.clone();
        let t = Instant::now();
        let resp = agent.ask(&req).map_err(|e| e.to_string());
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        outcomes.push(score(q, resp, ms));
        progress.advance(1);
    }
    progress.finish();

    let all: Vec<&Outcome> = outcomes.iter().collect();
    let mut by_language = BTreeMap::new();
    let langs: HashSet<&str> = outcomes.iter().map(|o| o.language).collect();
    if langs.len() > 1 {
        for l in langs {
            let sub: Vec<&Outcome> = outcomes.iter().filter(|o| o.language == l).collect();
            by_language.insert(l.to_string(), figures(&sub));
        }
    }
    Ok(AskEvalReport {
        dataset: dataset.display().to_string(),
        store: store.display().to_string(),
        llm: opts.llm.clone(),
        ingest,
        graph_build_s,
        wall_s: started.elapsed().as_secs_f64(),
        all: figures(&all),
        by_language,
        per_question: if opts.per_question { outcomes } else { vec![] },
    })
}

fn opt(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.3}"))
}

/// The report as text: a table with a column per language.
pub fn print_human(r: &AskEvalReport) {
    println!(
        "{} (store {}): ingest added {} passages, {} unchanged; graph built in {:.1} s; llm {}",
        r.dataset,
        r.store,
        r.ingest.documents_added,
        r.ingest.documents_unchanged,
        r.graph_build_s,
        r.llm
    );
    let mut cols: Vec<(&str, &Figures)> = vec![("all", &r.all)];
    cols.extend(r.by_language.iter().map(|(k, v)| (k.as_str(), v)));
    let row = |name: &str, f: &dyn Fn(&Figures) -> String| {
        let mut line = format!("{name:<27}");
        for (_, c) in &cols {
            line.push_str(&format!(" {:>9}", f(c)));
        }
        println!("{line}");
    };
    let mut head = format!("{:<27}", "");
    for (name, _) in &cols {
        head.push_str(&format!(" {name:>9}"));
    }
    println!("{head}");
    row("questions", &|f| f.questions.to_string());
    row("  answerable", &|f| f.answerable.to_string());
    row("  unanswerable", &|f| f.unanswerable.to_string());
    row("exact_match", &|f| opt(f.exact_match));
    row("f1", &|f| opt(f.f1));
    row("answer_recall", &|f| opt(f.answer_recall));
    row("citation_precision", &|f| opt(f.citation_precision));
    row("citation_recall", &|f| opt(f.citation_recall));
    row("groundedness (verifier)", &|f| opt(f.groundedness.verifier));
    row("  claims dropped", &|f| {
        format!(
            "{}/{}",
            f.groundedness.claims_dropped, f.groundedness.claims
        )
    });
    row("groundedness (independent)", &|f| {
        opt(f.groundedness.independent)
    });
    row("  sentences checked", &|f| {
        f.groundedness.sentences_checked.to_string()
    });
    row("no_answer_accuracy", &|f| {
        opt(f.no_answer.no_answer_accuracy)
    });
    row("abstain_rate_unanswerable", &|f| {
        opt(f.no_answer.abstain_rate_unanswerable)
    });
    row("answer_rate_answerable", &|f| {
        opt(f.no_answer.answer_rate_answerable)
    });
    row("steps (mean)", &|f| format!("{:.2}", f.steps_mean));
    row("tool calls (mean)", &|f| {
        format!("{:.2}", f.tool_calls_mean)
    });
    row("repeated / overrun / rej.", &|f| {
        format!(
            "{}/{}/{}",
            f.repeated_queries, f.budget_overruns, f.rejected_proposals
        )
    });
    row("latency p50 ms", &|f| format!("{:.1}", f.latency_p50_ms));
    row("latency p99 ms", &|f| format!("{:.1}", f.latency_p99_ms));
    let dist = |m: &BTreeMap<String, usize>| {
        m.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!("statuses: {}", dist(&r.all.statuses));
    println!("writers: {}", dist(&r.all.writers));
    if !r.all.writers.contains_key("model") {
        println!(
            "(no answer was model-written: exact_match and f1 compare whole extractive answers \
             and say little; answer_recall is the figure to read)"
        );
    }
    println!("wall {:.1} s", r.wall_s);
    for o in &r.per_question {
        println!(
            "\n{} [{}{}] em {} f1 {} grounded {}\n  Q: {}\n  gold: {:?} {:?}\n  cited: {:?}\n  A: {}",
            o.id,
            o.status,
            if o.answerable { "" } else { ", unanswerable" },
            opt(o.em),
            opt(o.f1),
            opt(o.grounded),
            o.question,
            o.answers,
            o.gold_ids,
            o.cited,
            o.answer.replace('\n', " | ")
        );
    }
}

/// `dossier eval DATASET --ask`, printed.
pub fn main(
    engine: &Engine,
    dataset: &Path,
    store: &Path,
    opts: &AskEvalOptions,
    json: bool,
    progress: &mut dyn Progress,
) -> Result<ExitCode> {
    let report = run(engine, dataset, store, opts, progress)?;
    if json {
        crate::print_json(&report)?;
    } else {
        print_human(&report);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_answer_alternatives_are_read() {
        let q: Question = serde_json::from_str(
            r#"{"id":"x","question":"q","answers":[["1月3日","1月3号"],"一月三日"]}"#,
        )
        .unwrap();
        assert_eq!(q.answers, vec!["1月3日", "1月3号", "一月三日"]);
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn normalisation_is_squad_style_and_per_character_in_chinese() {
        assert_eq!(tokens("The  Exies!"), s(&["exies"]));
        assert_eq!(tokens("a spirit"), s(&["spirit"]));
        // Punctuation is removed, not split on (SQuAD): 6,960 is one token.
        assert_eq!(tokens("6,960 (approx.)"), s(&["6960", "approx"]));
        assert_eq!(tokens("《战国无双3》"), s(&["战", "国", "无", "双", "3"]));
        assert_eq!(tokens("光荣和ω-force"), s(&["光", "荣", "和", "ωforce"]));
        // Full-width digits and letters are their ASCII selves.
        assert_eq!(tokens("１９８３年"), s(&["1983", "年"]));
        // Articles only as whole words.
        assert_eq!(tokens("Theatre an Anthem"), s(&["theatre", "anthem"]));
    }

    #[test]
    fn exact_match_and_f1() {
        let gold = s(&["Stephen King", "King"]);
        assert_eq!(exact_match("stephen king.", &gold), Some(1.0));
        assert_eq!(exact_match("The Stephen King [1]", &gold), Some(1.0));
        assert_eq!(exact_match("Stephen Kings", &gold), Some(0.0));
        assert_eq!(exact_match("anything", &[]), None);
        assert_eq!(f1("Stephen King", &gold), Some(1.0));
        // "king" alone matches the second answer exactly.
        assert_eq!(f1("King", &gold), Some(1.0));
        // 1 common of 3 predicted, 1 of 2 gold → P 1/3, R 1/2, F1 0.4.
        let v = f1("Steve the Stephen Hawking", &s(&["Stephen King"])).unwrap();
        assert!((v - 0.4).abs() < 1e-9, "{v}");
        assert_eq!(f1("", &gold), Some(0.0));
        // Repeated tokens count once per occurrence in the gold.
        let v = f1("king king", &s(&["king"])).unwrap();
        assert!((v - 2.0 / 3.0).abs() < 1e-9, "{v}");
    }

    #[test]
    fn chinese_f1_is_per_character() {
        let gold = s(&["村雨城"]);
        assert_eq!(exact_match("村雨城。", &gold), Some(1.0));
        // 2 of 3 characters predicted, nothing extra: P 1, R 2/3 → 0.8.
        let v = f1("雨城", &gold).unwrap();
        assert!((v - 0.8).abs() < 1e-9, "{v}");
        // Characters in another order still overlap as a bag.
        let v = f1("城雨村庄", &gold).unwrap();
        assert!((v - 2.0 * 0.75 / 1.75).abs() < 1e-9, "{v}");
    }

    #[test]
    fn answer_found_needs_whole_tokens_in_order() {
        let gold = s(&["Latin"]);
        assert_eq!(
            answer_found("Books were translated into Latin [1].", &gold),
            Some(true)
        );
        assert_eq!(answer_found("Latina is a city [1].", &gold), Some(false));
        assert_eq!(
            answer_found("Ohio, Columbus", &s(&["Columbus, Ohio"])),
            Some(false)
        );
        assert_eq!(
            answer_found("它是光荣和ω-force开发的。", &s(&["光荣和ω-force"])),
            Some(true)
        );
        assert_eq!(answer_found("x", &[]), None);
    }

    #[test]
    fn citation_precision_and_recall() {
        let gold = s(&["p1", "p2"]);
        assert_eq!(citation_precision(&s(&["p1", "p9"]), &gold), Some(0.5));
        assert_eq!(citation_precision(&s(&["p1", "p1"]), &gold), Some(1.0));
        assert_eq!(citation_precision(&[], &gold), None);
        assert_eq!(citation_precision(&s(&["p1"]), &[]), None);
        assert_eq!(citation_recall(&s(&["p1", "p9"]), &gold), Some(0.5));
        assert_eq!(citation_recall(&s(&["p1", "p2", "p3"]), &gold), Some(1.0));
        assert_eq!(citation_recall(&[], &gold), Some(0.0));
        assert_eq!(citation_recall(&s(&["p1"]), &[]), None);
    }

    #[test]
    fn content_tokens_and_numbers() {
        let t = content_tokens("The film was directed by Stephen King in 1986.");
        let want: HashSet<String> = ["film", "directed", "stephen", "king"]
            .iter()
            .map(|x| x.to_string())
            .collect();
        assert_eq!(t, want);
        let t = content_tokens("锣鼓经");
        assert!(
            t.contains("锣鼓") && t.contains("鼓经") && t.len() == 2,
            "{t:?}"
        );
        assert!(content_tokens("城").contains("城"));
        assert_eq!(
            numbers("364.6公里, 6,960 people in 1986. [3]"),
            s(&["364.6", "6960", "1986", "3"])
        );
        assert_eq!(numbers("１９０３年"), s(&["1903"]));
        assert_eq!(
            numbers("L0C0 (p0009) M1924 10km COVID-19"),
            s(&["10", "19"])
        );
        assert!(content_tokens("report L0C0").contains("l0c0"));
    }

    #[test]
    fn marked_sentences_split_and_attach_marks() {
        let a = "1. Who?\n- Demon Dice is a game [1].\n- It was made in 1994. [2] Later it was renamed [3][1].\n没有来源的句子。有来源的句子[4]。";
        let got = marked_sentences(a);
        assert_eq!(
            got,
            vec![
                ("Demon Dice is a game .".to_string(), vec![1]),
                ("It was made in 1994.".to_string(), vec![2]),
                ("Later it was renamed .".to_string(), vec![1, 3]),
                ("有来源的句子。".to_string(), vec![4]),
            ]
        );
        // Decimal points do not end a sentence.
        assert_eq!(marked_sentences("It is 364.6 km long [1].").len(), 1);
    }

    #[test]
    fn independent_groundedness() {
        let quote = "Demon Dice is a collectible dice game created by Lester Smith in 1994.";
        assert!(sentence_grounded(
            "Demon Dice is a dice game by Lester Smith.",
            &[quote]
        ));
        // Half the content words are not in the quote.
        assert!(!sentence_grounded(
            "Demon Dice won awards from critics everywhere.",
            &[quote]
        ));
        // Every word covered, but a number the quote does not have.
        assert!(!sentence_grounded(
            "Demon Dice was created by Lester Smith in 1995.",
            &[quote]
        ));
        assert!(!sentence_grounded("Demon Dice is a game.", &[]));
        // Chinese: bigram coverage.
        let zh = "锣鼓经是大陆传统器乐及戏曲里面常用的打击乐记谱方法。";
        assert!(sentence_grounded("锣鼓经是常用的打击乐记谱方法。", &[zh]));
        assert!(!sentence_grounded("锣鼓经是西方的管弦乐作曲理论。", &[zh]));
        // The union of the cited quotes counts.
        assert!(sentence_grounded(
            "Lester Smith designed Dragon Dice.",
            &["Lester Smith is a designer.", "He made Dragon Dice."]
        ));

        let mut quotes = BTreeMap::new();
        quotes.insert(1, quote.to_string());
        let answer = "- Demon Dice is a dice game by Lester Smith [1].\n- It sold a million copies [1].\n- It cites nothing real [7].\n- No marks here.";
        assert_eq!(answer_groundedness(answer, &quotes), (3, 1));
    }

    #[test]
    fn answerability_and_no_answer_accuracy() {
        assert!(is_answerable(&s(&["Latin"]), Some("bridge")));
        assert!(!is_answerable(&s(&["Latin"]), Some("Null")));
        assert!(!is_answerable(&[], None));
        assert!(!is_answerable(&s(&[" ", "."]), None));
        let items = [
            (true, "answered"),
            (true, "insufficient_evidence"),
            (true, "error"),
            (false, "insufficient_evidence"),
            (false, "unavailable"),
            (false, "partial"),
        ];
        let r = no_answer(&items);
        // Right: answered answerable (1) + abstained unanswerable (2) = 3 of 6.
        assert_eq!(r.no_answer_accuracy, Some(0.5));
        assert_eq!(r.abstain_rate_unanswerable, Some(2.0 / 3.0));
        assert_eq!(r.answer_rate_answerable, Some(1.0 / 3.0));
        let r = no_answer(&[(true, "partial")]);
        assert_eq!(r.no_answer_accuracy, Some(1.0));
        assert_eq!(r.abstain_rate_unanswerable, None);
        assert_eq!(no_answer(&[]).no_answer_accuracy, None);
    }

    #[test]
    fn abstentions_score_as_empty_answers() {
        let text = "Insufficient evidence: nothing you may read answers this question.";
        let gold = s(&["question"]);
        assert_eq!(
            answer_found(prediction("answered", text), &gold),
            Some(true)
        );
        assert_eq!(
            answer_found(prediction("insufficient_evidence", text), &gold),
            Some(false)
        );
        assert_eq!(f1(prediction("unavailable", text), &gold), Some(0.0));
    }

    #[test]
    fn failed_asks_score_zero_and_count_as_wrong() {
        let q = Question {
            id: "q".into(),
            question: "Who wrote it?".into(),
            answers: s(&["Stephen King"]),
            gold_ids: s(&["p1"]),
            kind: None,
        };
        let o = score(&q, Err("boom".into()), 1.0);
        assert_eq!(o.status, "error");
        assert_eq!(
            (o.em, o.f1, o.answer_found),
            (Some(0.0), Some(0.0), Some(false))
        );
        assert_eq!(o.citation_recall, Some(0.0));
        let figs = figures(&[&o]);
        assert_eq!(figs.no_answer.no_answer_accuracy, Some(0.0));
        assert_eq!(figs.groundedness.verifier, None);
    }
}
