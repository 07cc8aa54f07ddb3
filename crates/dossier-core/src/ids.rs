//! What an identifier may be.
//!
//! Document ids, versions, tenants, knowledge bases, groups, table names, row keys and
//! principal ids come from files that users write, and they end up as parts of store
//! keys (the catalog joins them with U+001F), of chunk ids (`ID@VERSION#N`), of URIs and
//! of log and report lines. [`check_id`] is the one rule for all of them: not empty, at
//! most [`MAX_ID_BYTES`] bytes, no control character (so no key separator, NUL, line
//! break or tab), no invisible formatting character (so two ids that look the same are
//! the same), and no leading or trailing whitespace.
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
    ('\u{061C}', '\u{061C}'),   // Arabic letter mark
    ('\u{180E}', '\u{180E}'),   // Mongolian vowel separator
    ('\u{200B}', '\u{200F}'),   // zero-width space, joiners, LRM, RLM
    ('\u{2028}', '\u{202E}'),   // line and paragraph separators, bidi embeddings
    ('\u{2060}', '\u{206F}'),   // word joiner, invisible operators, bidi isolates
    ('\u{FEFF}', '\u{FEFF}'),   // byte-order mark
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
    } else {
        None
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
}
