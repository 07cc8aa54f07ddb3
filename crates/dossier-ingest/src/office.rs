//! Office Open XML packages (DOCX, XLSX): a zip of XML parts, read under limits.
//!
//! A zip's headers say how large each part is, but a hostile file can lie, and a small
//! file can inflate a thousandfold. Parts are therefore read through a budget that
//! counts the bytes actually inflated, for the whole package: past
//! [`UNPACK_RATIO`] × `max_file_bytes` the file is refused, whatever its headers say.

use std::borrow::Cow;
use std::io::{Cursor, Read};

use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

use crate::{Error, IngestOptions, Result};

/// A package may inflate to this many times the file size limit, all parts together.
pub(crate) const UNPACK_RATIO: u64 = 8;

/// A package with more entries than this is refused: every entry costs a header read.
const MAX_ENTRIES: usize = 10_000;

/// An opened package and what is left of its inflation budget.
pub(crate) struct Package<'a> {
    zip: zip::ZipArchive<Cursor<&'a [u8]>>,
    budget: u64,
    what: &'static str,
}

impl<'a> Package<'a> {
    /// Opens `bytes` as a package; `what` names the format in errors ("DOCX").
    pub(crate) fn open(bytes: &'a [u8], what: &'static str, opts: &IngestOptions) -> Result<Self> {
        let zip = zip::ZipArchive::new(Cursor::new(bytes))
            .map_err(|e| Error::invalid(None, format!("not a {what} file (a zip package): {e}")))?;
        if zip.len() > MAX_ENTRIES {
            return Err(Error::invalid(
                None,
                format!(
                    "the {what} package has {} parts, limit {MAX_ENTRIES}",
                    zip.len()
                ),
            ));
        }
        Ok(Package {
            zip,
            budget: opts.max_file_bytes.saturating_mul(UNPACK_RATIO),
            what,
        })
    }

    /// The text of part `name`, or `None` where the package has no such part.
    pub(crate) fn part(&mut self, name: &str) -> Result<Option<String>> {
        let what = self.what;
        let entry = match self.zip.by_name(name) {
            Ok(e) => e,
            Err(zip::result::ZipError::FileNotFound) => return Ok(None),
            Err(e) => return Err(Error::invalid(None, format!("{what} part {name}: {e}"))),
        };
        let mut bytes = Vec::new();
        let read = entry
            .take(self.budget + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::invalid(None, format!("{what} part {name}: {e}")))?;
        if read as u64 > self.budget {
            return Err(Error::invalid(
                None,
                format!(
                    "the {what} package inflates past {} bytes ({UNPACK_RATIO} × the file size limit)",
                    self.budget
                ),
            ));
        }
        self.budget -= read as u64;
        let text = String::from_utf8(bytes)
            .map_err(|_| Error::invalid(None, format!("{what} part {name} is not UTF-8")))?;
        Ok(Some(text))
    }

    /// Like [`Package::part`], for a part the format cannot do without.
    pub(crate) fn required(&mut self, name: &str) -> Result<String> {
        let what = self.what;
        self.part(name)?
            .ok_or_else(|| Error::invalid(None, format!("not a {what} file: no {name}")))
    }
}

/// One XML event, reduced to what the readers use. Text arrives already unescaped.
pub(crate) enum Tag<'x> {
    Open(BytesStart<'x>),
    /// An element without content (`<w:tab/>`): an open and a close at once.
    Empty(BytesStart<'x>),
    Close(Vec<u8>),
    Text(Cow<'x, str>),
}

/// Walks an XML text, calling `f` with each event; stops at the first XML error.
pub(crate) fn walk<'x>(xml: &'x str, mut f: impl FnMut(Tag<'x>)) -> Result<()> {
    let mut r = Reader::from_str(xml);
    loop {
        let ev = r
            .read_event()
            .map_err(|e| Error::invalid(None, format!("invalid XML: {e}")))?;
        match ev {
            Event::Start(e) => f(Tag::Open(e)),
            Event::Empty(e) => f(Tag::Empty(e)),
            Event::End(e) => f(Tag::Close(local(e.name().as_ref()).to_vec())),
            Event::Text(t) => f(Tag::Text(t.xml10_content())),
            Event::CData(t) => f(Tag::Text(t.into_inner())),
            Event::GeneralRef(r) => {
                let c = match r.resolve_char_ref() {
                    Ok(Some(c)) => Some(c),
                    _ => match r.into_inner().as_ref() {
                        "amp" => Some('&'),
                        "lt" => Some('<'),
                        "gt" => Some('>'),
                        "quot" => Some('"'),
                        "apos" => Some('\''),
                        _ => None,
                    },
                };
                if let Some(c) = c {
                    f(Tag::Text(Cow::Owned(c.to_string())));
                }
            }
            Event::Eof => return Ok(()),
            _ => {}
        }
    }
}

/// An element's name without its namespace prefix.
pub(crate) fn local(name: &str) -> &[u8] {
    name.rsplit(':').next().unwrap_or(name).as_bytes()
}

/// The name of an opened element, without prefix.
pub(crate) fn name_of<'b>(e: &'b BytesStart) -> &'b [u8] {
    local(e.name().into_inner())
}

/// The value of attribute `key` (matched without prefix), unescaped.
pub(crate) fn attr(e: &BytesStart, key: &[u8]) -> Option<String> {
    e.attributes().flatten().find_map(|a| {
        (local(a.key.as_ref()) == key).then(|| {
            a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                .map(|v| v.into_owned())
                .unwrap_or_default()
        })
    })
}
