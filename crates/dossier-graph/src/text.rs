//! Small text helpers shared by the rules: sentence and clause spans, brackets, the
//! shapes of identifiers, and the cue words that hint at an entity's kind.

use std::sync::LazyLock;

use regex::Regex;

use crate::model::EntityKind;

/// `P-204`, `INC-4821`, `RA-77`, `REL-2026-04`: capitals (and digits), a hyphen, digits.
pub(crate) static IDENTIFIER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[A-Z][A-Z0-9]{0,4}-[0-9]{1,6}(?:-[0-9]{1,6})*").expect("identifier pattern")
});

/// `payment-gateway`, `pay-gw`, `acme-ledger`: lower-case words joined by hyphens.
pub(crate) static KEBAB: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)+").expect("kebab pattern"));

/// Cue words and the kind they announce. General vocabulary of business documents in
/// both languages, not names from any corpus. Longer Chinese cues first, so that the
/// nearest, most specific one wins a tie.
const CUES: &[(&str, EntityKind)] = &[
    ("供应商", EntityKind::Supplier),
    ("supplier", EntityKind::Supplier),
    ("vendor", EntityKind::Supplier),
    ("产品", EntityKind::Product),
    ("商品", EntityKind::Product),
    ("product", EntityKind::Product),
    ("sku", EntityKind::Product),
    ("事件", EntityKind::Event),
    ("event", EntityKind::Event),
    ("事故", EntityKind::Incident),
    ("故障", EntityKind::Incident),
    ("incident", EntityKind::Incident),
    ("outage", EntityKind::Incident),
    ("变更单", EntityKind::Change),
    ("变更", EntityKind::Change),
    ("change", EntityKind::Change),
    ("告警", EntityKind::Alert),
    ("预警", EntityKind::Alert),
    ("异常", EntityKind::Alert),
    ("alert", EntityKind::Alert),
    ("alarm", EntityKind::Alert),
    ("客户", EntityKind::Customer),
    ("customer", EntityKind::Customer),
    ("client", EntityKind::Customer),
    ("订单", EntityKind::Order),
    ("order", EntityKind::Order),
    ("发布", EntityKind::Release),
    ("release", EntityKind::Release),
    ("服务", EntityKind::Service),
    ("service", EntityKind::Service),
    ("团队", EntityKind::Team),
    ("小组", EntityKind::Team),
    ("team", EntityKind::Team),
    ("squad", EntityKind::Team),
];

/// Last segments of a hyphenated name that usually name an organisational unit.
const TEAM_SUFFIXES: &[&str] = &["core", "infra", "ops", "sre", "team", "squad", "platform"];

/// The kind a lower-case cue word announces.
pub(crate) fn kind_of_word(lower: &str) -> Option<EntityKind> {
    CUES.iter()
        .find(|(w, _)| *w == lower)
        .map(|(_, k)| k.clone())
}

pub(crate) fn is_han(c: char) -> bool {
    matches!(c, '\u{3400}'..='\u{4dbf}' | '\u{4e00}'..='\u{9fff}' | '\u{f900}'..='\u{faff}')
}

pub(crate) fn has_han(s: &str) -> bool {
    s.chars().any(is_han)
}

/// Whether `s` is exactly one identifier or one hyphenated lower-case name.
pub(crate) fn is_id_like(s: &str) -> bool {
    let full = |re: &Regex| {
        re.find(s)
            .is_some_and(|m| m.start() == 0 && m.end() == s.len())
    };
    full(&IDENTIFIER) || full(&KEBAB)
}

pub(crate) fn is_identifier(s: &str) -> bool {
    IDENTIFIER
        .find(s)
        .is_some_and(|m| m.start() == 0 && m.end() == s.len())
}

/// The guess for a hyphenated name with no cue: a team by its suffix, else a service.
pub(crate) fn kebab_kind(s: &str) -> EntityKind {
    match s.rsplit('-').next() {
        Some(last) if TEAM_SUFFIXES.contains(&last) => EntityKind::Team,
        _ => EntityKind::Service,
    }
}

/// Whether the byte at `i` may border an identifier or a hyphenated name: no letter,
/// digit, hyphen or underscore of the same run on that side.
pub(crate) fn ascii_boundary(text: &str, start: usize, end: usize) -> bool {
    let before = text[..start].chars().next_back();
    let after = text[end..].chars().next();
    let joins =
        |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || "-_/.@".contains(c));
    // A trailing full stop ends a sentence; it does not glue the name to anything.
    let after_joins = match after {
        Some('.') => text[end + 1..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric()),
        _ => joins(after),
    };
    !joins(before) && !after_joins
}

/// The kind announced by a cue word just before `pos` (within the clause, a few
/// characters back for Chinese, the previous word for English).
pub(crate) fn cue_before(text: &str, pos: usize) -> Option<EntityKind> {
    let head = &text[..pos];
    let head = head
        .rfind(['。', '；', '，', ',', ';', '：', ':', '、', '\n'])
        .map_or(head, |i| &head[i..]);
    let window: String = {
        let chars: Vec<char> = head.trim_end().chars().collect();
        chars[chars.len().saturating_sub(8)..].iter().collect()
    };
    // Chinese: the cue ending nearest the name.
    let han = CUES
        .iter()
        .filter(|(w, _)| has_han(w))
        .filter_map(|(w, k)| window.rfind(w).map(|i| (i + w.len(), w.len(), k)))
        .max_by_key(|&(end, len, _)| (end, len))
        .map(|(_, _, k)| k.clone());
    if han.is_some() {
        return han;
    }
    let word: String = window
        .trim_end()
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let word = word.to_lowercase();
    kind_of_word(&word).filter(|_| !word.is_empty())
}

/// The kind announced by a cue word right after `end` (`X 服务`, `X team`).
pub(crate) fn cue_after(text: &str, end: usize) -> Option<EntityKind> {
    let tail = text[end..].trim_start();
    for (w, k) in [
        ("服务", EntityKind::Service),
        ("团队", EntityKind::Team),
        ("小组", EntityKind::Team),
    ] {
        if tail.starts_with(w) {
            return Some(k);
        }
    }
    let word: String = tail
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect::<String>()
        .to_lowercase();
    match word.as_str() {
        "service" | "services" => Some(EntityKind::Service),
        "team" | "squad" => Some(EntityKind::Team),
        _ => None,
    }
}

/// Byte ranges `[open, close_end)` of bracketed asides `(…)` / `（…）`, outermost only.
pub(crate) fn paren_ranges(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut open = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' | '（' => {
                if depth == 0 {
                    open = i;
                }
                depth += 1;
            }
            ')' | '）' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    out.push((open, i + c.len_utf8()));
                }
            }
            '\n' => depth = 0,
            _ => {}
        }
    }
    out
}

pub(crate) fn inside(ranges: &[(usize, usize)], pos: usize) -> bool {
    ranges.iter().any(|&(a, b)| a < pos && pos < b)
}

/// Sentence spans (trimmed), cut at Chinese and English sentence ends and line breaks,
/// never inside brackets or after an abbreviation such as `a.k.a.`.
pub(crate) fn sentences(text: &str) -> Vec<(usize, usize)> {
    let parens = paren_ranges(text);
    let mut out = Vec::new();
    let mut start = 0;
    let mut prev: [char; 2] = [' ', ' '];
    let mut it = text.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        let next = it.peek().map(|&(_, n)| n);
        let cut = match c {
            '\n' => true,
            '。' | '！' | '？' | '；' => !inside(&parens, i),
            '.' | '!' | '?' | ';' => {
                let abbrev = c == '.' && prev[0] == '.';
                next.is_none_or(char::is_whitespace) && !abbrev && !inside(&parens, i)
            }
            _ => false,
        };
        prev = [prev[1], c];
        if cut {
            push_trimmed(text, start, i + c.len_utf8(), &mut out);
            start = i + c.len_utf8();
        }
    }
    push_trimmed(text, start, text.len(), &mut out);
    out
}

/// Clause spans of `text[start..end]`, cut at commas outside brackets and quotes.
pub(crate) fn clauses(text: &str, start: usize, end: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut quoted = false;
    let mut from = start;
    for (i, c) in text[start..end].char_indices() {
        let i = start + i;
        match c {
            '(' | '（' | '“' | '「' | '『' | '‘' => depth += 1,
            ')' | '）' | '”' | '」' | '』' | '’' => depth = (depth - 1).max(0),
            '"' => quoted = !quoted,
            '，' | ',' if depth == 0 && !quoted => {
                push_trimmed(text, from, i, &mut out);
                from = i + c.len_utf8();
            }
            _ => {}
        }
    }
    push_trimmed(text, from, end, &mut out);
    out
}

fn push_trimmed(text: &str, a: usize, b: usize, out: &mut Vec<(usize, usize)>) {
    let s = &text[a..b];
    let lead = s.len() - s.trim_start().len();
    let trail = s.len() - s.trim_end().len();
    if a + lead < b - trail {
        out.push((a + lead, b - trail));
    }
}

/// Strips quotes, brackets and spaces around a name.
pub(crate) fn strip_quotes(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || "\"'“”‘’「」『』《》`*".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans<'a>(t: &'a str, v: &[(usize, usize)]) -> Vec<&'a str> {
        v.iter().map(|&(a, b)| &t[a..b]).collect()
    }

    #[test]
    fn sentences_keep_brackets_and_abbreviations_whole() {
        let t = "甲（又称乙。丙）依赖丁。Vendor V-1, a.k.a. Volt. Then e.g. more!\n末行";
        assert_eq!(
            spans(t, &sentences(t)),
            [
                "甲（又称乙。丙）依赖丁。",
                "Vendor V-1, a.k.a. Volt.",
                "Then e.g. more!",
                "末行"
            ]
        );
    }

    #[test]
    fn clauses_ignore_commas_in_brackets_and_quotes() {
        let t = "甲（又称“乙”，全称“丙”）受到丁影响，依赖戊";
        assert_eq!(
            spans(t, &clauses(t, 0, t.len())),
            ["甲（又称“乙”，全称“丙”）受到丁影响", "依赖戊"]
        );
    }

    #[test]
    fn cue_words_give_kinds() {
        let t = "由供应商 S-8 供应";
        let p = t.find("S-8").unwrap();
        assert_eq!(cue_before(t, p), Some(EntityKind::Supplier));
        let t = "hit risk alert RA-12";
        assert_eq!(
            cue_before(t, t.find("RA").unwrap()),
            Some(EntityKind::Alert)
        );
        assert_eq!(cue_after("x 团队负责", 1), Some(EntityKind::Team));
        assert_eq!(kebab_kind("billing-infra"), EntityKind::Team);
        assert_eq!(kebab_kind("risk-engine"), EntityKind::Service);
    }

    #[test]
    fn identifier_shapes() {
        for s in ["P-204", "INC-4821", "REL-2026-04", "S-8", "E-1"] {
            assert!(is_identifier(s), "{s}");
        }
        for s in ["2026-04-01", "X-Api-Key", "p-204"] {
            assert!(!is_identifier(s), "{s}");
        }
        assert!(is_id_like("pay-gw") && !is_id_like("支付网关"));
    }
}
