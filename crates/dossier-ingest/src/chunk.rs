//! Section-aware chunking of Chinese and English text.
//!
//! A body is cut into sections at Markdown headings and at lines that open a numbered
//! clause (`第 N 条`, `Article N`, `Section N`, `§ N`); each section becomes one chunk,
//! or several when it exceeds the bound, cut at the best break the bound allows:
//! paragraph, then sentence, then comma or space, then any character.

use std::cmp::Reverse;
use std::sync::LazyLock;

use regex::Regex;

/// A chunk's section path (outermost first) and its byte span in the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub section: Vec<String>,
    pub start: usize,
    pub end: usize,
}

/// Break strengths, strongest last.
const WEAK: u8 = 1;
const SENTENCE: u8 = 2;
const PARAGRAPH: u8 = 3;

/// A clause sits below every Markdown heading level.
const CLAUSE_LEVEL: usize = 7;

/// A clause line up to this long (without sentence punctuation) is a title, and names
/// its section whole; a longer one is content, and only its marker names the section.
const CLAUSE_TITLE_MAX_CHARS: usize = 50;

const SENTENCE_END_CJK: &[char] = &['。', '！', '？', '；'];
const SENTENCE_END_ASCII: &[char] = &['.', ';', '!', '?'];
const CLOSERS: &[char] = &['”', '’', '"', '\'', '）', ')', '」', '』', '】', '》'];
const WEAK_AFTER: &[char] = &['，', '、', ',', '：', ':'];
const CLAUSE_TAIL: &[char] = &['.', ':', '：', '、', '．', ')', '）', '-', '—'];

static CLAUSE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:第\s*[0-9０-９零〇一二三四五六七八九十百千两]+\s*条|(?:Article|ARTICLE|Section|SECTION)\s+[0-9]+(?:\.[0-9]+)*[A-Za-z]?|§\s*[0-9]+(?:\.[0-9]+)*)",
    )
    .expect("clause pattern is valid")
});

#[derive(Debug, PartialEq)]
enum Kind {
    Blank,
    Text,
    /// A heading or clause line. `content` is set for a clause line that carries text
    /// of its own, so that it is a chunk even with nothing below it.
    Heading {
        level: usize,
        label: String,
        content: bool,
    },
}

struct Line {
    start: usize,
    /// End of the text, before the line break.
    end: usize,
    kind: Kind,
}

fn scan(body: &str) -> Vec<Line> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut fenced = false;
    for seg in body.split_inclusive('\n') {
        let text = seg.trim_end_matches(['\n', '\r']);
        let t = text.trim_start();
        let kind = if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
            Kind::Text
        } else if t.trim_end().is_empty() {
            Kind::Blank
        } else if fenced {
            Kind::Text
        } else if let Some((level, label)) = atx_heading(text) {
            Kind::Heading {
                level,
                label,
                content: false,
            }
        } else if let Some((label, content)) = clause(t) {
            Kind::Heading {
                level: CLAUSE_LEVEL,
                label,
                content,
            }
        } else {
            Kind::Text
        };
        out.push(Line {
            start,
            end: start + text.len(),
            kind,
        });
        start += seg.len();
    }
    out
}

fn atx_heading(line: &str) -> Option<(usize, String)> {
    let t = line.trim_start_matches(' ');
    if line.len() - t.len() > 3 {
        return None;
    }
    let level = t.bytes().take_while(|&b| b == b'#').count();
    let rest = &t[level..];
    if !(1..=6).contains(&level) || !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let mut label = rest.trim();
    let unclosed = label.trim_end_matches('#');
    if unclosed.is_empty() || unclosed.ends_with([' ', '\t']) {
        label = unclosed.trim_end();
    }
    (!label.is_empty()).then(|| (level, label.to_string()))
}

fn clause(t: &str) -> Option<(String, bool)> {
    let marker = CLAUSE.find(t)?.as_str();
    let rest = &t[marker.len()..];
    if rest
        .chars()
        .next()
        .is_some_and(|c| !c.is_whitespace() && !CLAUSE_TAIL.contains(&c))
    {
        return None;
    }
    let line = t.trim_end();
    let is_title = line.chars().count() <= CLAUSE_TITLE_MAX_CHARS
        && !line.ends_with(SENTENCE_END_CJK)
        && !line.ends_with(SENTENCE_END_ASCII);
    let label = if is_title { line } else { marker };
    Some((label.to_string(), !is_title))
}

/// Markdown headings of `body` in order, as (level, text).
pub(crate) fn headings(body: &str) -> impl Iterator<Item = (usize, String)> {
    scan(body).into_iter().filter_map(|l| match l.kind {
        Kind::Heading { level, label, .. } if level < CLAUSE_LEVEL => Some((level, label)),
        _ => None,
    })
}

/// Cuts `body` into chunks of at most `max_chars` characters (a bound of 0 counts as
/// 1). Spans are in order, do not overlap, start and end on non-whitespace, and
/// together cover every non-whitespace character of `body`.
///
/// A section with a heading and no content of its own (a document title directly
/// followed by a subheading) is not a chunk on its own: it joins the next section's
/// first chunk, which then carries the outer heading too.
pub fn chunk_text(body: &str, max_chars: usize) -> Vec<Span> {
    let max = max_chars.max(1);
    let lines = scan(body);
    let breaks = breaks(body, &lines);
    let mut out = Vec::new();
    let mut path: Vec<(usize, String)> = Vec::new();
    let mut start = 0;
    let mut has_content = false;
    let mut pending: Option<usize> = None;
    let mut close = |end: usize, path: &[(usize, String)], start: usize, has_content: bool| {
        let section = || path.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>();
        if has_content {
            let from = pending.take().unwrap_or(start);
            split(body, &breaks, from, end, max, &section(), &mut out);
        } else if !body[start..end].trim().is_empty() {
            pending.get_or_insert(start);
        }
        if end == body.len() {
            if let Some(from) = pending.take() {
                split(body, &breaks, from, end, max, &section(), &mut out);
            }
        }
    };
    for l in &lines {
        match &l.kind {
            Kind::Blank => {}
            Kind::Text => has_content = true,
            Kind::Heading {
                level,
                label,
                content,
            } => {
                close(l.start, &path, start, has_content);
                while path.last().is_some_and(|(lv, _)| lv >= level) {
                    path.pop();
                }
                path.push((*level, label.clone()));
                start = l.start;
                has_content = *content;
            }
        }
    }
    close(body.len(), &path, start, has_content);
    out
}

/// Break positions (byte offsets where a piece may start) with their strength.
fn breaks(body: &str, lines: &[Line]) -> Vec<(usize, u8)> {
    let mut out = Vec::new();
    let mut after_blank = true;
    let mut after_title = false;
    for l in lines {
        let title = matches!(l.kind, Kind::Heading { content: false, .. });
        match l.kind {
            Kind::Blank => {
                after_blank = true;
                continue;
            }
            // A heading is kept with what follows it.
            _ if after_title => {}
            Kind::Heading { .. } => out.push((l.start, PARAGRAPH)),
            Kind::Text => out.push((l.start, if after_blank { PARAGRAPH } else { SENTENCE })),
        }
        after_blank = false;
        after_title = title;
        let text = &body[l.start..l.end];
        let mut chars = text.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            let next = chars.peek().map(|&(_, n)| n);
            let at = l.start + i + c.len_utf8();
            let level = if SENTENCE_END_CJK.contains(&c)
                || (SENTENCE_END_ASCII.contains(&c) && next.is_none_or(char::is_whitespace))
            {
                SENTENCE
            } else if WEAK_AFTER.contains(&c)
                || (c.is_whitespace() && next.is_some_and(|n| !n.is_whitespace()))
            {
                WEAK
            } else {
                continue;
            };
            if level == SENTENCE {
                let mut at = at;
                while let Some(&(j, n)) = chars.peek().filter(|(_, n)| CLOSERS.contains(n)) {
                    at = l.start + j + n.len_utf8();
                    chars.next();
                }
                out.push((at, if title { WEAK } else { SENTENCE }));
            } else {
                out.push((at, WEAK));
            }
        }
    }
    out.sort_unstable_by_key(|&(at, level)| (at, Reverse(level)));
    out.dedup_by_key(|b| b.0);
    out
}

fn skip_ws(body: &str, at: usize, end: usize) -> usize {
    let s = &body[at..end];
    at + s.len() - s.trim_start().len()
}

/// Splits `body[from..to]` greedily: each piece is as long as the bound allows while
/// ending at the strongest break available within it.
fn split(
    body: &str,
    breaks: &[(usize, u8)],
    from: usize,
    to: usize,
    max: usize,
    section: &[String],
    out: &mut Vec<Span>,
) {
    let end = from + body[from..to].trim_end().len();
    let mut cur = skip_ws(body, from, end);
    while cur < end {
        let limit = body[cur..end]
            .char_indices()
            .nth(max)
            .map_or(end, |(i, _)| cur + i);
        let cut = if limit == end {
            end
        } else {
            let lo = breaks.partition_point(|b| b.0 <= cur);
            let hi = breaks.partition_point(|b| b.0 <= limit);
            let window = &breaks[lo..hi];
            let best = window.iter().map(|b| b.1).max();
            best.and_then(|lv| window.iter().rev().find(|b| b.1 == lv))
                .map_or(limit, |b| b.0)
        };
        out.push(Span {
            section: section.to_vec(),
            start: cur,
            end: cur + body[cur..cut].trim_end().len(),
        });
        cur = skip_ws(body, cut, end);
    }
}

/// A text longer than this many characters of letters and digits without a word
/// boundary, or with one character repeated this many times in a row, is degenerate.
pub const DEGENERATE_RUN_CHARS: usize = 10_000;

/// Below this many letters and digits a text is never degenerate by repetition: it
/// makes a handful of chunks at most.
pub const DEGENERATE_MIN_CHARS: usize = 4_096;

/// A text whose letters and digits are this share (in percent) or more of one word,
/// repeated, is degenerate.
pub const DEGENERATE_REPEAT_PERCENT: usize = 90;

/// Why `text` is not worth indexing, if it is not: one word repeated through it (at least
/// [`DEGENERATE_REPEAT_PERCENT`] % of its letters and digits, once it has
/// [`DEGENERATE_MIN_CHARS`] of them, and more than once), more than [`DEGENERATE_RUN_CHARS`] letters and
/// digits without a word boundary, or one character repeated more than that many times
/// in a row, whatever the script.
///
/// A word boundary is any character that is not a letter or digit: whitespace, and the
/// punctuation and symbols of every script. Chinese and Japanese prose, which has no
/// spaces, is cut by its own punctuation (。，、「」…) into runs of tens of characters.
///
/// Two passes over the text and no allocation: the repeated word is found by a
/// Boyer–Moore majority vote weighted by length, then counted.
pub fn degenerate(text: &str) -> Option<String> {
    let mut run = (0usize, 0usize); // (chars, byte start) of the current unbroken run
    let mut same = (0usize, 0usize, '\0'); // (count, byte start, char) of a repeat
    let mut letters = 0usize;
    let mut vote: (&str, usize) = ("", 0);
    let mut word_start = None;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            same.0 = 0;
        } else if same.0 > 0 && same.2 == c {
            same.0 += 1;
            if same.0 > DEGENERATE_RUN_CHARS {
                return Some(format!(
                    "{:?} (U+{:04X}) repeated more than {DEGENERATE_RUN_CHARS} times in a row, from byte {}",
                    c, c as u32, same.1
                ));
            }
        } else {
            same = (1, i, c);
        }
        if c.is_alphanumeric() {
            letters += 1;
            if run.0 == 0 {
                run.1 = i;
            }
            run.0 += 1;
            if run.0 > DEGENERATE_RUN_CHARS {
                return Some(format!(
                    "more than {DEGENERATE_RUN_CHARS} letters and digits without a word boundary (space or punctuation), from byte {}",
                    run.1
                ));
            }
            word_start.get_or_insert(i);
        } else {
            run.0 = 0;
            if let Some(s) = word_start.take() {
                vote = cast(vote, &text[s..i]);
            }
        }
    }
    if let Some(s) = word_start {
        vote = cast(vote, &text[s..]);
    }
    if letters < DEGENERATE_MIN_CHARS || vote.1 == 0 {
        return None;
    }
    let word = vote.0;
    let (times, held) = words(text)
        .filter(|w| *w == word)
        .fold((0usize, 0usize), |(n, h), w| (n + 1, h + w.chars().count()));
    (times > 1 && held * 100 >= letters * DEGENERATE_REPEAT_PERCENT).then(|| {
        let shown: String = word.chars().take(40).collect();
        let more = if shown.len() < word.len() { "…" } else { "" };
        format!(
            "one word, {shown:?}{more}, repeated {times} times: {}% of the {letters} letters and digits",
            held * 100 / letters
        )
    })
}

/// One step of the weighted majority vote: `word` counts as many votes as it has
/// characters.
fn cast<'a>((cand, n): (&'a str, usize), word: &'a str) -> (&'a str, usize) {
    let w = word.chars().count();
    if n > 0 && cand == word {
        (cand, n + w)
    } else if n >= w {
        (cand, n - w)
    } else {
        (word, w - n)
    }
}

/// The runs of letters and digits of `text`.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn texts<'a>(body: &'a str, spans: &[Span]) -> Vec<&'a str> {
        spans.iter().map(|s| &body[s.start..s.end]).collect()
    }

    #[test]
    fn headings_and_clauses_open_sections() {
        let body = "# 政策 V2\n\n## 第 1 条 退货\n七天内。\n\n## 第 2 条 检测\n三十天内。\n";
        let spans = chunk_text(body, 1000);
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[0].section, ["政策 V2", "第 1 条 退货"]);
        assert_eq!(
            texts(body, &spans)[0],
            "# 政策 V2\n\n## 第 1 条 退货\n七天内。"
        );
        assert_eq!(spans[1].section, ["政策 V2", "第 2 条 检测"]);

        let plain = "Terms\nArticle 1. Scope\nApplies to all.\nArticle 2 Fees\nNone.\n第三条 本办法自公布之日起施行。\n";
        let labels: Vec<_> = chunk_text(plain, 1000)
            .into_iter()
            .map(|s| s.section)
            .collect();
        assert_eq!(
            labels,
            [
                vec![],
                vec!["Article 1. Scope".to_string()],
                vec!["Article 2 Fees".to_string()],
                vec!["第三条".to_string()],
            ]
        );
    }

    #[test]
    fn code_fences_and_hashtags_are_not_headings() {
        let body = "#tag text\n```\n# comment\n```\n";
        let spans = chunk_text(body, 1000);
        assert_eq!(spans.len(), 1);
        assert!(spans[0].section.is_empty());
    }

    #[test]
    fn a_lone_title_is_still_a_chunk() {
        let spans = chunk_text("\n# Only a title\n\n", 1000);
        assert_eq!(spans.len(), 1);
        assert_eq!((spans[0].start, spans[0].end), (1, 15));
    }

    #[test]
    fn long_sections_split_at_sentence_ends() {
        let en: String = (0..40)
            .map(|i| format!("Sentence number {i} says something, at some length. "))
            .collect();
        let zh: String = (0..80)
            .map(|i| format!("这是第{i}句话，内容稍微长一些以便测试切分；"))
            .collect();
        for (body, end) in [
            (format!("## English\n{en}"), '.'),
            (format!("## 中文\n{zh}"), '；'),
        ] {
            let spans = chunk_text(&body, 200);
            assert!(spans.len() > 5);
            for (i, s) in spans.iter().enumerate() {
                let t = &body[s.start..s.end];
                assert!(t.chars().count() <= 200);
                assert!(t.ends_with(end), "chunk {i} ends mid-sentence: {t:?}");
                if i > 0 {
                    assert!(!t.starts_with(['，', ',']), "{t:?}");
                }
                assert_eq!(s.section.len(), 1);
            }
        }
    }

    #[test]
    fn an_overlong_sentence_is_cut_at_commas_or_chars() {
        let body = "甲".repeat(25) + "，" + &"乙".repeat(25);
        let spans = chunk_text(&body, 30);
        assert_eq!(texts(&body, &spans), [&body[..78], &body[78..]]);
        let spans = chunk_text(&"丙".repeat(65), 30);
        assert_eq!(
            spans.iter().map(|s| s.end - s.start).collect::<Vec<_>>(),
            [90, 90, 15]
        );
    }

    #[test]
    fn the_repeated_word_is_found_wherever_it_sits() {
        // Other words first and last: the weighted vote still ends on the word that
        // holds most of the letters.
        let body = "alpha beta gamma ".repeat(10) + &"x ".repeat(10_000) + &"delta ".repeat(50);
        let why = degenerate(&body).expect("degenerate");
        assert!(
            why.starts_with("one word, \"x\", repeated 10000 times: 96%"),
            "{why}"
        );
        // A word that holds most, but not 90 %, of the letters is not enough.
        let body = "word ".repeat(2_000) + &"other ".repeat(400);
        assert_eq!(degenerate(&body), None);
        // Runs: 10,000 is allowed, 10,001 is not; whitespace breaks a run of one
        // character, punctuation only a run of letters.
        assert_eq!(degenerate(&"ab".repeat(5_000)), None);
        assert!(degenerate(&("ab".repeat(5_000) + "c")).is_some());
        assert_eq!(degenerate(&"-".repeat(10_000)), None);
        assert!(degenerate(&"-".repeat(10_001)).is_some());
        assert_eq!(degenerate(&"a-".repeat(1_000)), None);
        assert_eq!(degenerate(""), None);
    }

    fn line() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            "#{1,4} [a-z中文 ]{0,12}",
            "第 [1-9] 条 [退货检测]{0,4}",
            "(Article|Section) [0-9] [A-Za-z]{0,8}",
            "([A-Za-z]{1,8}[ ,]{0,2}){0,12}[.!?;]? ?",
            "([一-龥]{1,12}[，、]?){0,6}[。！？；]?",
            "[ \t\u{3000}]{0,3}[a-z一-龥 .。\r]{0,30}",
            "\\PC{0,40}",
        ]
    }

    proptest! {
        #[test]
        fn spans_are_ordered_bounded_and_cover_the_text(
            lines in prop::collection::vec(line(), 0..30),
            max in 1usize..120,
        ) {
            let body = lines.join("\n");
            let spans = chunk_text(&body, max);
            let mut covered = vec![false; body.len()];
            let mut prev_end = 0;
            for s in &spans {
                prop_assert!(prev_end <= s.start && s.start < s.end && s.end <= body.len());
                prev_end = s.end;
                let t = body.get(s.start..s.end);
                prop_assert!(t.is_some(), "span not on char boundaries");
                let t = t.unwrap();
                prop_assert!(t.chars().count() <= max);
                prop_assert_eq!(t, t.trim());
                covered[s.start..s.end].iter_mut().for_each(|c| *c = true);
            }
            for (i, c) in body.char_indices() {
                prop_assert!(c.is_whitespace() || covered[i], "{:?} at {} not covered", c, i);
            }
        }
    }
}
