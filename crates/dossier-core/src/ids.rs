//! What an identifier may be.
//!
//! Document ids, versions, tenants, knowledge bases, groups, table names, row keys and
//! principal ids come from files that users write, and they end up as parts of store
//! keys (the catalog joins them with U+001F), of chunk ids (`ID@VERSION#N`), of URIs and
//! of log and report lines. [`check_id`] is the one rule for all of them: not empty, at
//! most [`MAX_ID_BYTES`] bytes, no control character (so no key separator, NUL, line
//! break or tab), no invisible formatting character (so two ids that look the same are
//! the same), and no leading or trailing whitespace. Ids that only *look* like another
//! are refused the same way (issue 39): an id must be in Unicode's composed normal form
//! (NFC), hold no whitespace but the ASCII space, no combining mark on a Latin, Greek
//! or Cyrillic letter, no Latin letter beside a Cyrillic or Greek one that looks like a
//! Latin letter (`shоp` with a Cyrillic `о`), and is not a path that climbs (`../x`)
//! or starts at the root (`/etc/passwd`). A tenant is also a name, not a path
//! ([`check_tenant`]): uploads are kept in a directory named after it.
//!
//! Rules particular to one kind (a version must not contain `@`) stay with the reader
//! that knows the kind.

use std::fmt;

/// The longest id, in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// Why an id was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdFault {
    Empty,
    /// Its length in bytes.
    TooLong(usize),
    /// A control character (Unicode category Cc).
    Control(char),
    /// A character that renders as nothing or reorders text: zero-width characters,
    /// bidirectional controls, the byte-order mark, and the replacement character that
    /// marks text decoded badly.
    Invisible(char),
    /// Leading or trailing whitespace.
    Whitespace,
    /// Whitespace other than the ASCII space inside the id (a no-break space, an
    /// ideographic space): it reads as a space and is another id.
    OddSpace(char),
    /// Not in the composed normal form: the same text can be written another way.
    NotNormalised,
    /// A combining mark on a Latin, Greek or Cyrillic letter (the composed forms of
    /// real accents are single characters after NFC).
    CombiningMark(char),
    /// A Latin letter beside a Cyrillic or Greek letter that looks like a Latin one.
    MixedScript(char),
    /// A path that climbs out (`..`) or starts at the root.
    Path,
    /// A tenant holding a path separator or starting with a dot.
    NotAName,
}

impl fmt::Display for IdFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdFault::Empty => write!(f, "is empty"),
            IdFault::TooLong(n) => write!(f, "is {n} bytes long, limit {MAX_ID_BYTES}"),
            IdFault::Control(c) => {
                write!(f, "contains the control character U+{:04X}", *c as u32)
            }
            IdFault::Invisible(c) => {
                write!(f, "contains the invisible character U+{:04X}", *c as u32)
            }
            IdFault::Whitespace => write!(f, "starts or ends with whitespace"),
            IdFault::OddSpace(c) => write!(
                f,
                "contains the space U+{:04X}; only the ASCII space is allowed",
                *c as u32
            ),
            IdFault::NotNormalised => write!(
                f,
                "is not in Unicode's composed form (NFC); write it composed"
            ),
            IdFault::CombiningMark(c) => write!(
                f,
                "puts the combining mark U+{:04X} on a letter; use the composed letter",
                *c as u32
            ),
            IdFault::MixedScript(c) => write!(
                f,
                "mixes Latin letters with U+{:04X}, which looks like a Latin letter",
                *c as u32
            ),
            IdFault::Path => write!(f, "is a path that starts at the root or climbs with `..`"),
            IdFault::NotAName => write!(f, "must be a name: no `/` or `\\`, not starting with `.`"),
        }
    }
}

/// An id that [`check_id`] refused: what kind of id, the id as shown (escaped, and
/// shortened when long) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {shown} {fault}")]
pub struct IdError {
    pub kind: String,
    pub shown: String,
    pub fault: IdFault,
}

/// Characters refused although they are not control characters.
const INVISIBLE: &[(char, char)] = &[
    ('\u{00AD}', '\u{00AD}'),   // soft hyphen
    ('\u{034F}', '\u{034F}'),   // combining grapheme joiner
    ('\u{115F}', '\u{1160}'),   // Hangul choseong and jungseong fillers
    ('\u{17B4}', '\u{17B5}'),   // Khmer inherent vowels
    ('\u{180B}', '\u{180D}'),   // Mongolian free variation selectors
    ('\u{061C}', '\u{061C}'),   // Arabic letter mark
    ('\u{180E}', '\u{180E}'),   // Mongolian vowel separator
    ('\u{200B}', '\u{200F}'),   // zero-width space, joiners, LRM, RLM
    ('\u{2028}', '\u{202E}'),   // line and paragraph separators, bidi embeddings
    ('\u{2060}', '\u{206F}'),   // word joiner, invisible operators, bidi isolates
    ('\u{2800}', '\u{2800}'),   // Braille pattern blank
    ('\u{3164}', '\u{3164}'),   // Hangul filler
    ('\u{FE00}', '\u{FE0F}'),   // variation selectors
    ('\u{FEFF}', '\u{FEFF}'),   // byte-order mark
    ('\u{FFA0}', '\u{FFA0}'),   // halfwidth Hangul filler
    ('\u{FFF9}', '\u{FFFB}'),   // interlinear annotation
    ('\u{FFFD}', '\u{FFFD}'),   // replacement character
    ('\u{E0000}', '\u{E007F}'), // tags
];

fn invisible(c: char) -> bool {
    INVISIBLE.iter().any(|&(lo, hi)| (lo..=hi).contains(&c))
}

/// Checks one id; `kind` names it in the error (`"tenant"`, `"document id"`).
pub fn check_id(kind: &str, s: &str) -> Result<(), IdError> {
    let fault = if s.is_empty() {
        Some(IdFault::Empty)
    } else if s.len() > MAX_ID_BYTES {
        Some(IdFault::TooLong(s.len()))
    } else if let Some(c) = s.chars().find(|c| c.is_control()) {
        Some(IdFault::Control(c))
    } else if let Some(c) = s.chars().find(|&c| invisible(c)) {
        Some(IdFault::Invisible(c))
    } else if s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        Some(IdFault::Whitespace)
    } else if let Some(c) = s.chars().find(|&c| c.is_whitespace() && c != ' ') {
        Some(IdFault::OddSpace(c))
    } else {
        look_alike_fault(s)
    };
    match fault {
        None => Ok(()),
        Some(fault) => Err(IdError {
            kind: kind.to_string(),
            shown: shown(s),
            fault,
        }),
    }
}

/// Checks a tenant: an id ([`check_id`]) that is also a plain name, since uploads are
/// kept in a directory named after it.
pub fn check_tenant(s: &str) -> Result<(), IdError> {
    check_id("tenant", s)?;
    if s.contains(['/', '\\']) || s.starts_with('.') {
        return Err(IdError {
            kind: "tenant".into(),
            shown: shown(s),
            fault: IdFault::NotAName,
        });
    }
    Ok(())
}

/// The faults of an id that looks like another one, or like a path.
fn look_alike_fault(s: &str) -> Option<IdFault> {
    if !unicode_normalization::is_nfc(s) {
        return Some(IdFault::NotNormalised);
    }
    let mut prev: Option<char> = None;
    for c in s.chars() {
        if unicode_normalization::char::is_combining_mark(c)
            && prev.is_some_and(|p| script_of(p) != Script::Other)
        {
            return Some(IdFault::CombiningMark(c));
        }
        prev = Some(c);
    }
    if let Some(c) = latin_look_alike(s) {
        return Some(IdFault::MixedScript(c));
    }
    let climbs = s.split(['/', '\\']).any(|part| part == "..");
    if climbs || s.starts_with(['/', '\\']) {
        return Some(IdFault::Path);
    }
    None
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Script {
    Latin,
    /// Cyrillic or Greek: the scripts with letters drawn like Latin ones.
    LatinLike,
    Other,
}

fn script_of(c: char) -> Script {
    match c {
        'a'..='z' | 'A'..='Z' | '\u{00C0}'..='\u{024F}' if c.is_alphabetic() => Script::Latin,
        '\u{0370}'..='\u{03FF}' | '\u{0400}'..='\u{052F}' if c.is_alphabetic() => Script::LatinLike,
        _ => Script::Other,
    }
}

/// Cyrillic and Greek letters drawn like a Latin letter.
const LATIN_HOMOGLYPHS: &str = "аеорсуххіјѕԁԛԝһӏвкмнтАВЕКМНОРСТХІЈЅԌԚԜҮΑΒΕΖΗΙΚΜΝΟΡΤΥΧονικρτυχ";

/// A Cyrillic or Greek letter that looks Latin, in an id that also holds Latin letters
/// or is made of nothing but such letters (so `ѕһор` cannot pass for `shop`). Words
/// of Cyrillic or Greek that are not all look-alikes (`отдел`) stay allowed.
fn latin_look_alike(s: &str) -> Option<char> {
    let has_latin = s.chars().any(|c| script_of(c) == Script::Latin);
    let like: Vec<char> = s
        .chars()
        .filter(|&c| script_of(c) == Script::LatinLike)
        .collect();
    let look_alike = like
        .iter()
        .copied()
        .find(|&c| LATIN_HOMOGLYPHS.contains(c))?;
    let all_look_alike = like.iter().all(|&c| LATIN_HOMOGLYPHS.contains(c));
    if all_look_alike || (has_latin && mixed_in_a_word(s)) {
        Some(look_alike)
    } else {
        None
    }
}

/// Whether one word (a run of letters and digits) holds Latin and Cyrillic or Greek.
fn mixed_in_a_word(s: &str) -> bool {
    s.split(|c: char| !c.is_alphanumeric()).any(|w| {
        w.chars().any(|c| script_of(c) == Script::Latin)
            && w.chars().any(|c| script_of(c) == Script::LatinLike)
    })
}

/// The id quoted and escaped, cut to its first 40 characters.
fn shown(s: &str) -> String {
    const MAX: usize = 40;
    match s.char_indices().nth(MAX) {
        None => format!("{s:?}"),
        Some((i, _)) => format!("{:?}…", &s[..i]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_ids_pass() {
        for id in [
            "headphone-policy",
            "V2",
            "1.0",
            "shop",
            "耳机售后政策",
            "alice@example.com",
            "Customer Support",
            "orders/2026",
            "Café",
            "отдел-hr",
            "α-helix",
            "Nguyễn Văn A",
            "v1..v2",
            &"x".repeat(MAX_ID_BYTES),
        ] {
            assert_eq!(check_id("id", id), Ok(()), "{id:?}");
        }
    }

    #[test]
    fn bad_ids_are_refused_with_the_reason() {
        let fault = |s: &str| check_id("tenant", s).unwrap_err().fault;
        assert_eq!(fault(""), IdFault::Empty);
        assert_eq!(fault(&"x".repeat(257)), IdFault::TooLong(257));
        // 86 three-byte characters are 258 bytes: the bound is bytes, not characters.
        assert_eq!(fault(&"政".repeat(86)), IdFault::TooLong(258));
        for c in ['\0', '\u{1f}', '\n', '\t', '\r', '\u{7f}', '\u{85}'] {
            assert_eq!(fault(&format!("a{c}b")), IdFault::Control(c));
        }
        for c in ['\u{200b}', '\u{202e}', '\u{feff}', '\u{fffd}', '\u{2028}'] {
            assert_eq!(fault(&format!("a{c}b")), IdFault::Invisible(c));
        }
        for s in [" a", "a ", "a\u{3000}", "\u{a0}a"] {
            assert_eq!(fault(s), IdFault::Whitespace, "{s:?}");
        }
        let e = check_id("tenant", "shop\u{1f}x").unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"tenant "shop\u{1f}x" contains the control character U+001F"#
        );
        let long = check_id("key", &format!("{}\n", "k".repeat(300))).unwrap_err();
        assert!(long.shown.ends_with('…') && long.shown.len() < 50, "{long}");
    }

    /// Issue 39: ids that look like another id, or like a path, were accepted.
    #[test]
    fn ids_that_look_like_another_or_like_a_path_are_refused() {
        let fault = |s: &str| check_id("principal id", s).map_err(|e| e.fault);
        let cases: &[(&str, IdFault)] = &[
            ("shop\u{3164}admin", IdFault::Invisible('\u{3164}')),
            ("\u{3164}", IdFault::Invisible('\u{3164}')),
            ("shop\u{a0}admin", IdFault::OddSpace('\u{a0}')),
            ("shop\u{3000}admin", IdFault::OddSpace('\u{3000}')),
            ("sh\u{043e}p-admin", IdFault::MixedScript('\u{043e}')),
            (
                "\u{0455}\u{04bb}\u{043e}\u{0440}",
                IdFault::MixedScript('\u{0455}'),
            ),
            ("shop-\u{0430}dmin", IdFault::MixedScript('\u{0430}')),
            ("Cafe\u{301}", IdFault::NotNormalised),
            ("a\u{336}dmin", IdFault::CombiningMark('\u{336}')),
            ("../../etc/x", IdFault::Path),
            ("a/../../b", IdFault::Path),
            ("/etc/passwd", IdFault::Path),
            ("\\\\server\\share", IdFault::Path),
        ];
        for (id, want) in cases {
            assert_eq!(fault(id), Err(*want), "{id:?}");
        }
    }

    #[test]
    fn a_tenant_is_a_name_not_a_path() {
        assert_eq!(check_tenant("shop"), Ok(()));
        assert_eq!(check_tenant("耳机商城"), Ok(()));
        for t in ["../../../../outside", "a/b", "a\\b", ".hidden", "..", "/"] {
            assert!(check_tenant(t).is_err(), "{t:?}");
        }
    }
}
