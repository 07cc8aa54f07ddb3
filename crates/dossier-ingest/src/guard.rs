//! Hostile-input guards shared by the readers: text that is really binary, ids that
//! would corrupt keys, YAML that expands without bound, and files with endless bad
//! lines.

use std::path::Path;

use crate::{Error, Problem, Result};

/// Share of suspicious characters (see [`suspicious`]) above which text is binary.
const MAX_SUSPICIOUS_PERCENT: usize = 10;
/// Share of bytes that are not UTF-8 above which input is binary rather than text with
/// a stray byte in another encoding.
const MAX_INVALID_UTF8_PERCENT: usize = 20;

/// A character that ordinary text has almost none of: control characters other than
/// tab, line feed, form feed and carriage return; the replacement character; private
/// use; noncharacters; and the planes 4 to 13, where no character is assigned.
fn suspicious(c: char) -> bool {
    let u = c as u32;
    (c.is_control() && !matches!(c, '\t' | '\n' | '\r' | '\u{c}'))
        || c == '\u{fffd}'
        || (0xE000..=0xF8FF).contains(&u)
        || (0xFDD0..=0xFDEF).contains(&u)
        || (u & 0xFFFE) == 0xFFFE
        || (0x4_0000..=0xD_FFFF).contains(&u)
        || u >= 0xF_0000
}

fn binary(why: impl Into<String>) -> Error {
    Error::Binary { why: why.into() }
}

/// Refuses text that is mostly characters no text has: random bytes that happen to
/// decode, or a binary format with a text-looking header.
pub(crate) fn check_text(s: &str) -> Result<()> {
    let (mut total, mut odd) = (0usize, 0usize);
    for c in s.chars() {
        total += 1;
        odd += suspicious(c) as usize;
    }
    if odd > 0 && odd * 100 > total * MAX_SUSPICIOUS_PERCENT {
        return Err(binary(format!(
            "{}% of the characters are control or unassigned characters",
            odd * 100 / total
        )));
    }
    Ok(())
}

/// Decodes the bytes of a text file: UTF-8 (a byte-order mark is dropped), not binary
/// by content whatever the file is named. A NUL byte, UTF-16, or a high share of bytes
/// that are not UTF-8 make it binary; a few such bytes are an encoding mistake, reported
/// with the line of the first.
pub(crate) fn text(b: &[u8]) -> Result<&str> {
    if b.starts_with(&[0xFF, 0xFE]) || b.starts_with(&[0xFE, 0xFF]) {
        return Err(binary("UTF-16; save the file as UTF-8"));
    }
    if let Some(at) = b.iter().position(|&c| c == 0) {
        return Err(binary(format!("a NUL byte at offset {at}")));
    }
    let s = match std::str::from_utf8(b) {
        Ok(s) => s,
        Err(e) => {
            let invalid: usize = b.utf8_chunks().map(|c| c.invalid().len()).sum();
            if invalid * 100 > b.len() * MAX_INVALID_UTF8_PERCENT {
                return Err(binary(format!(
                    "{}% of the bytes are not UTF-8",
                    invalid * 100 / b.len()
                )));
            }
            let line = 1 + b[..e.valid_up_to()].iter().filter(|&&c| c == b'\n').count();
            return Err(Error::Utf8 { line });
        }
    };
    check_text(s)?;
    Ok(s.strip_prefix('\u{feff}').unwrap_or(s))
}

/// [`text`] for the first bytes of a stream, which may end inside a character.
pub(crate) fn check_head(b: &[u8]) -> Result<()> {
    let cut = b.len().saturating_sub(3);
    let valid = match std::str::from_utf8(b) {
        Ok(_) => b.len(),
        // An incomplete character at the very end is the cut, not a fault.
        Err(e) if e.error_len().is_none() && e.valid_up_to() >= cut => e.valid_up_to(),
        Err(_) => b.len(),
    };
    match text(&b[..valid]) {
        Err(e @ Error::Binary { .. }) => Err(e),
        // Lines with bad UTF-8 are reported one by one.
        _ => Ok(()),
    }
}

/// Checks an id with [`dossier_core::ids::check_id`], as an error at `line`.
pub(crate) fn id(kind: &str, s: &str, line: Option<usize>) -> Result<()> {
    dossier_core::ids::check_id(kind, s).map_err(|e| Error::invalid(line, e.to_string()))
}

/// A tenant: an id that is also a plain name (uploads are kept under it).
pub(crate) fn tenant(kind: &str, s: &str, line: Option<usize>) -> Result<()> {
    id(kind, s, line)?;
    dossier_core::ids::check_tenant(s).map_err(|e| Error::invalid(line, e.to_string()))
}

/// Problems of one file, at most [`crate::MAX_PROBLEMS_PER_FILE`] of them listed; the
/// rest are counted in a last one, so that a file of a million bad lines is reported
/// in a hundred and one.
pub(crate) struct Problems<'a> {
    path: &'a Path,
    list: Vec<Problem>,
    unlisted: usize,
}

impl<'a> Problems<'a> {
    pub(crate) fn new(path: &'a Path) -> Self {
        Problems {
            path,
            list: Vec::new(),
            unlisted: 0,
        }
    }

    pub(crate) fn push(&mut self, line: Option<usize>, message: impl Into<String>) {
        if self.list.len() < crate::MAX_PROBLEMS_PER_FILE {
            self.list.push(Problem::new(self.path, line, message));
        } else {
            self.unlisted += 1;
        }
    }

    pub(crate) fn finish(mut self) -> Vec<Problem> {
        if self.unlisted > 0 {
            let msg = format!("{} more problems in this file, not listed", self.unlisted);
            self.list.push(Problem::new(self.path, None, msg));
        }
        self.list
    }
}

/// Nesting allowed in YAML: far beyond any front matter, schema or principals file, and
/// below serde_norway's own limit (128).
const MAX_YAML_DEPTH: usize = 64;

/// Values a YAML text of `len` bytes may expand to. Without aliases a text has fewer
/// values than bytes; with them, a few lines can stand for billions ("billion laughs"),
/// which serde_norway's own limit on alias jumps does not stop (one alias of a long list
/// is one jump).
fn yaml_budget(len: usize) -> u64 {
    len as u64 + 10_000
}

/// Reads a YAML text as libyaml's events, keeping nothing, and refuses it once it nests
/// deeper than [`MAX_YAML_DEPTH`] or expands (aliases followed) to more values than
/// [`yaml_budget`]. This runs before serde_norway sees the text, and it must: libyaml's
/// scanner walks every open flow level at each token (40 000 nested `[` take 2 s, a
/// megabyte of them hours), and serde_norway would first scan the whole text and then
/// expand every alias. Here the walk stops at the first level too many. Syntax errors
/// are left to serde_norway, which reports them with their line.
///
/// The events come from unsafe-libyaml-norway, the same parser serde_norway (the
/// maintained fork of serde_yaml) uses, so the depth and the expansion are measured
/// exactly, not guessed from the text. The two must stay the same parser: the workspace
/// pins both, and a change of YAML crate brings its parser here.
pub(crate) fn check_yaml(src: &str) -> std::result::Result<(), String> {
    use std::collections::HashMap;

    let budget = yaml_budget(src.len());
    let mut parser = YamlParser::new(src);
    let (mut depth, mut values) = (0usize, 0u64);
    // Values each anchor stands for, and, for each open collection, its anchor and the
    // value count before it.
    let mut anchors: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut open: Vec<(Option<Vec<u8>>, u64)> = Vec::new();
    while let Some(event) = parser.next() {
        match event {
            YamlEvent::StreamEnd => break,
            YamlEvent::Other => {}
            YamlEvent::Scalar(anchor) => {
                values += 1;
                if let Some(a) = anchor {
                    anchors.insert(a, 1);
                }
            }
            YamlEvent::Alias(a) => values += anchors.get(&a).copied().unwrap_or(1),
            YamlEvent::Start(anchor) => {
                depth += 1;
                if depth > MAX_YAML_DEPTH {
                    return Err(format!("nested more than {MAX_YAML_DEPTH} levels deep"));
                }
                open.push((anchor, values));
                values += 1;
            }
            YamlEvent::End => {
                depth = depth.saturating_sub(1);
                if let Some((Some(a), before)) = open.pop() {
                    anchors.insert(a, values - before);
                }
            }
        }
        if values > budget {
            return Err(format!(
                "expands to more than {budget} values (aliases repeating large parts?)"
            ));
        }
    }
    Ok(())
}

enum YamlEvent {
    StreamEnd,
    /// A scalar, with its anchor.
    Scalar(Option<Vec<u8>>),
    /// An alias, by its anchor.
    Alias(Vec<u8>),
    /// The start of a sequence or mapping, with its anchor.
    Start(Option<Vec<u8>>),
    /// The end of a sequence or mapping.
    End,
    Other,
}

/// A libyaml parser over a borrowed text.
struct YamlParser<'a> {
    /// Boxed, since libyaml keeps a pointer to the parser in itself.
    sys: Box<std::mem::MaybeUninit<unsafe_libyaml_norway::yaml_parser_t>>,
    failed: bool,
    _input: std::marker::PhantomData<&'a str>,
}

impl<'a> YamlParser<'a> {
    fn new(input: &'a str) -> Self {
        let mut boxed =
            Box::new(std::mem::MaybeUninit::<unsafe_libyaml_norway::yaml_parser_t>::uninit());
        let parser = boxed.as_mut_ptr();
        // SAFETY: `parser` points at memory owned by the box, which is neither moved nor
        // freed before `Drop` deletes the parser. The input outlives the parser ('a).
        let ok = unsafe {
            let ok = unsafe_libyaml_norway::yaml_parser_initialize(parser).ok;
            if ok {
                unsafe_libyaml_norway::yaml_parser_set_encoding(
                    parser,
                    unsafe_libyaml_norway::YAML_UTF8_ENCODING,
                );
                unsafe_libyaml_norway::yaml_parser_set_input_string(
                    parser,
                    input.as_ptr(),
                    input.len() as u64,
                );
            }
            ok
        };
        assert!(ok, "libyaml could not allocate a parser");
        YamlParser {
            sys: boxed,
            failed: false,
            _input: std::marker::PhantomData,
        }
    }

    /// The next event; `None` after the end or at the first error.
    fn next(&mut self) -> Option<YamlEvent> {
        if self.failed {
            return None;
        }
        let parser = self.sys.as_mut_ptr();
        let mut event = std::mem::MaybeUninit::<unsafe_libyaml_norway::yaml_event_t>::uninit();
        let event = event.as_mut_ptr();
        // SAFETY: the parser was initialised in `new`. A successful parse initialises
        // the event, whose anchor pointers are NUL-terminated strings owned by it until
        // `yaml_event_delete`; they are copied before that.
        unsafe {
            if unsafe_libyaml_norway::yaml_parser_parse(parser, event).fail {
                self.failed = true;
                return None;
            }
            let anchor = |p: *mut u8| {
                (!p.is_null()).then(|| std::ffi::CStr::from_ptr(p.cast()).to_bytes().to_vec())
            };
            let out = match (*event).type_ {
                unsafe_libyaml_norway::YAML_STREAM_END_EVENT => YamlEvent::StreamEnd,
                unsafe_libyaml_norway::YAML_SCALAR_EVENT => {
                    YamlEvent::Scalar(anchor((*event).data.scalar.anchor))
                }
                unsafe_libyaml_norway::YAML_ALIAS_EVENT => {
                    YamlEvent::Alias(anchor((*event).data.alias.anchor).unwrap_or_default())
                }
                unsafe_libyaml_norway::YAML_SEQUENCE_START_EVENT => {
                    YamlEvent::Start(anchor((*event).data.sequence_start.anchor))
                }
                unsafe_libyaml_norway::YAML_MAPPING_START_EVENT => {
                    YamlEvent::Start(anchor((*event).data.mapping_start.anchor))
                }
                unsafe_libyaml_norway::YAML_SEQUENCE_END_EVENT
                | unsafe_libyaml_norway::YAML_MAPPING_END_EVENT => YamlEvent::End,
                _ => YamlEvent::Other,
            };
            unsafe_libyaml_norway::yaml_event_delete(event);
            Some(out)
        }
    }
}

impl Drop for YamlParser<'_> {
    fn drop(&mut self) {
        // SAFETY: initialised in `new` and deleted only here.
        unsafe { unsafe_libyaml_norway::yaml_parser_delete(self.sys.as_mut_ptr()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_binary() {
        assert!(text("plain\ttext\r\n\u{c}page two\n".as_bytes()).is_ok());
        assert!(text("耳机售后政策：七天内可退货。\n".as_bytes()).is_ok());
        assert_eq!(text("\u{feff}bom".as_bytes()).unwrap(), "bom");
        assert!(matches!(text(b"a\0b"), Err(Error::Binary { .. })));
        assert!(matches!(text(b"\xff\xfea\0"), Err(Error::Binary { .. })));
        assert!(matches!(
            text(b"caf\xe9 au lait\n"),
            Err(Error::Utf8 { line: 1 })
        ));
        assert!(matches!(
            text(b"\x01\x02\x03\x04 abcdefghijkl"),
            Err(Error::Binary { .. })
        ));
        // A stream cut inside a character is not binary for that.
        assert!(check_head("abc政".as_bytes().split_at(5).0).is_ok());
    }

    #[test]
    fn yaml_expansion_and_depth_are_bounded() {
        assert!(check_yaml("a: &x [1, 2, {b: c}]\nd: !tag x\ne: *x\n").is_ok());
        // Syntax errors are serde_norway's to report.
        assert!(check_yaml("a: [unclosed\n").is_ok());
        let deep = "[".repeat(65) + &"]".repeat(65);
        assert!(check_yaml(&deep)
            .unwrap_err()
            .contains("more than 64 levels"));
        assert!(check_yaml(&("[".repeat(64) + &"]".repeat(64))).is_ok());
        let mut lol = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for (l, p) in ('b'..='j').zip('a'..) {
            lol += &format!("{l}: &{l} [{}]\n", vec![format!("*{p}"); 10].join(", "));
        }
        let e = check_yaml(&lol).unwrap_err();
        assert!(e.contains("expands to more than"), "{e}");
    }
}
