//! Documents: Markdown with front matter, plain text and HTML.

use std::path::Path;

use chrono::NaiveDate;
use dossier_core::{DocKind, DocumentVersion, VersionRef};
use scraper::Selector;
use serde_norway::{Mapping, Value};

use crate::html::{self, collapse};
use crate::{
    chunk, digest, document, from_yaml, guard, Error, IngestOptions, ParsedDocument, Result,
};

/// Front-matter fields, with the YAML text they came from (for line numbers and for
/// numbers written as `1.0`, which must stay `"1.0"`).
struct Fields<'a> {
    map: Mapping,
    src: Option<&'a str>,
    /// File line of the first line of `src`.
    first_line: usize,
}

impl Fields<'_> {
    fn line(&self, key: &str) -> Option<usize> {
        let src = self.src?;
        src.lines()
            .position(|l| {
                l.strip_prefix(key)
                    .is_some_and(|r| r.trim_start().starts_with(':'))
            })
            .map(|i| i + self.first_line)
    }

    fn err(&self, key: &str, msg: impl Into<String>) -> Error {
        Error::invalid(self.line(key).or(self.src.map(|_| self.first_line)), msg)
    }

    fn string(&self, key: &str) -> Result<Option<String>> {
        let s = match self.map.get(key) {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::String(s)) => s.trim().to_string(),
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::Number(n)) => self.raw(key).unwrap_or_else(|| n.to_string()),
            Some(_) => return Err(self.err(key, format!("`{key}` must be a single value"))),
        };
        Ok((!s.is_empty()).then_some(s))
    }

    /// The scalar as written, so that `version: 1.0` is "1.0", not "1".
    fn raw(&self, key: &str) -> Option<String> {
        let src = self.src?;
        let line = src
            .lines()
            .find_map(|l| l.strip_prefix(key)?.trim_start().strip_prefix(':'))?;
        let v = line.split(" #").next()?.trim();
        Some(v.trim_matches(['"', '\'']).to_string())
    }

    /// A list, a single value, or a comma-separated string.
    fn list(&self, key: &str) -> Result<Option<Vec<String>>> {
        let items = match self.map.get(key) {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Sequence(seq)) => seq
                .iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s.trim().to_string()),
                    Value::Number(n) => Ok(n.to_string()),
                    _ => Err(self.err(key, format!("`{key}` must be a list of names"))),
                })
                .collect::<Result<Vec<_>>>()?,
            Some(_) => self
                .string(key)?
                .unwrap_or_default()
                .split(',')
                .map(|s| s.trim().to_string())
                .collect(),
        };
        Ok(Some(items.into_iter().filter(|s| !s.is_empty()).collect()))
    }

    fn date(&self, key: &str) -> Result<Option<NaiveDate>> {
        self.string(key)?
            .map(|s| {
                NaiveDate::parse_from_str(&s, "%Y-%m-%d").map_err(|_| {
                    self.err(key, format!("`{key}` must be a YYYY-MM-DD date, not {s:?}"))
                })
            })
            .transpose()
    }
}

/// What the file itself supplies when the fields do not.
struct Defaults {
    /// `None` where a missing `id` is an error.
    id: Option<String>,
    title: String,
    kind: DocKind,
    source_uri: String,
    digest: String,
}

fn build(f: &Fields, d: Defaults, opts: &IngestOptions) -> Result<DocumentVersion> {
    let doc_id = match (f.string("id")?, d.id) {
        (Some(id), _) | (None, Some(id)) => id,
        (None, None) => return Err(f.err("id", "front matter has no `id`")),
    };
    let version = f.string("version")?.unwrap_or_else(|| "1".into());
    guard::id("`id`", &doc_id, f.line("id"))?;
    guard::id("`version`", &version, f.line("version"))?;
    // Chunk ids and `ID@VERSION` references are built from these.
    if version.contains(['@', '#']) || doc_id.contains('#') {
        return Err(f.err(
            "version",
            "`id` must not contain '#', nor `version` '@' or '#'",
        ));
    }
    let effective_from = f.date("effective_from")?;
    let effective_to = f.date("effective_to")?;
    if let (Some(a), Some(b)) = (effective_from, effective_to) {
        if b <= a {
            return Err(f.err(
                "effective_to",
                "`effective_to` must be after `effective_from`",
            ));
        }
    }
    let supersedes = match f.string("supersedes")? {
        None => None,
        Some(s) => Some(VersionRef::parse(&s).ok_or_else(|| {
            f.err(
                "supersedes",
                format!("`supersedes` must be ID@VERSION, not {s:?}"),
            )
        })?),
    };
    if let Some(s) = &supersedes {
        guard::id("`supersedes` id", &s.doc_id, f.line("supersedes"))?;
        guard::id("`supersedes` version", &s.version, f.line("supersedes"))?;
    }
    let tenant = f
        .string("tenant")?
        .unwrap_or_else(|| opts.default_tenant.clone());
    guard::id("`tenant`", &tenant, f.line("tenant"))?;
    let kb = f.string("kb")?;
    if let Some(kb) = &kb {
        guard::id("`kb`", kb, f.line("kb"))?;
    }
    let acl = f.list("acl")?;
    for g in acl.iter().flatten() {
        guard::id("`acl` group", g, f.line("acl"))?;
    }
    let depends_on = f.list("depends_on")?.unwrap_or_default();
    for d in &depends_on {
        guard::id("`depends_on` id", d, f.line("depends_on"))?;
    }
    Ok(DocumentVersion {
        doc_id,
        version,
        title: f.string("title")?.unwrap_or(d.title),
        tenant,
        kb,
        acl,
        effective_from,
        effective_to,
        supersedes,
        supersedes_evidence: f.string("supersedes_evidence")?,
        depends_on,
        source_uri: f.string("source_uri")?.unwrap_or(d.source_uri),
        kind: d.kind,
        digest: d.digest,
    })
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The first level-1 heading, else the first heading of any level.
fn first_heading(body: &str) -> Option<String> {
    let hs: Vec<_> = chunk::headings(body).collect();
    let best = hs.iter().find(|h| h.0 == 1).or(hs.first());
    best.map(|h| h.1.clone())
}

/// Splits off the front matter: (its YAML, the body).
fn front_matter(text: &str, max_bytes: usize) -> Result<(Option<&str>, &str)> {
    let mut lines = text.split_inclusive('\n');
    if lines.next().map(str::trim_end) != Some("---") {
        return Ok((None, text));
    }
    let yaml_start = text.find('\n').map_or(text.len(), |i| i + 1);
    let mut at = yaml_start;
    for l in lines {
        if matches!(l.trim_end(), "---" | "...") {
            return Ok((Some(&text[yaml_start..at]), &text[at + l.len()..]));
        }
        at += l.len();
        if at - yaml_start > max_bytes {
            return Err(Error::invalid(
                Some(1),
                format!("front matter is longer than {max_bytes} bytes"),
            ));
        }
    }
    Err(Error::invalid(
        Some(1),
        "front matter is not closed by a `---` line",
    ))
}

fn yaml_mapping(src: &str, first_line: usize) -> Result<Mapping> {
    let v: Value = from_yaml(src, first_line)?;
    match v {
        Value::Null => Ok(Mapping::new()),
        Value::Mapping(m) => Ok(m),
        _ => Err(Error::invalid(
            Some(first_line),
            "front matter is not a mapping",
        )),
    }
}

pub(crate) fn parse_markdown(
    path: &Path,
    text: &str,
    raw: &[u8],
    uri: &str,
    opts: &IngestOptions,
) -> Result<ParsedDocument> {
    let (yaml, body) = front_matter(text, opts.max_front_matter_bytes)?;
    let fields = Fields {
        map: yaml
            .map(|y| yaml_mapping(y, 2))
            .transpose()?
            .unwrap_or_default(),
        src: yaml,
        first_line: 2,
    };
    let defaults = Defaults {
        // A Markdown file without front matter is read like text; with front matter,
        // a missing id is a mistake worth reporting.
        id: yaml.is_none().then(|| stem(path)),
        title: first_heading(body).unwrap_or_else(|| stem(path)),
        kind: DocKind::Markdown,
        source_uri: uri.to_string(),
        digest: digest(raw, opts),
    };
    document(build(&fields, defaults, opts)?, body, opts)
}

pub(crate) fn parse_text(
    path: &Path,
    text: &str,
    raw: &[u8],
    uri: &str,
    opts: &IngestOptions,
) -> Result<ParsedDocument> {
    let fields = Fields {
        map: Mapping::new(),
        src: None,
        first_line: 1,
    };
    let defaults = Defaults {
        id: Some(stem(path)),
        title: stem(path),
        kind: DocKind::Text,
        source_uri: uri.to_string(),
        digest: digest(raw, opts),
    };
    document(build(&fields, defaults, opts)?, text, opts)
}

/// Reads visible text; headings become `#` lines so that the chunker sees sections.
/// `<meta name="dossier-FIELD" content="...">` sets a front-matter field. Spans point
/// into the extracted text, which is what chunks carry.
pub(crate) fn parse_html(
    path: &Path,
    text: &str,
    raw: &[u8],
    uri: &str,
    opts: &IngestOptions,
) -> Result<ParsedDocument> {
    let html = html::parse(text, opts)?;
    let sel = |s: &str| Selector::parse(s).expect("static selector");
    let mut map = Mapping::new();
    for m in html.select(&sel("meta[name][content]")) {
        let (name, content) = (
            m.attr("name").unwrap_or(""),
            m.attr("content").unwrap_or(""),
        );
        if let Some(key) = name.strip_prefix("dossier-") {
            map.insert(key.replace('-', "_").into(), content.into());
        }
    }
    let title = html
        .select(&sel("head title"))
        .next()
        .map(|t| collapse(&t.text().collect::<String>()))
        .filter(|t| !t.is_empty());
    let text = html
        .select(&sel("body"))
        .next()
        .map(html::visible_text)
        .unwrap_or_default();
    let body = text.trim_end().to_string() + "\n";
    let fields = Fields {
        map,
        src: None,
        first_line: 1,
    };
    let defaults = Defaults {
        id: Some(stem(path)),
        title: title
            .or_else(|| first_heading(&body))
            .unwrap_or_else(|| stem(path)),
        kind: DocKind::Html,
        source_uri: uri.to_string(),
        digest: digest(raw, opts),
    };
    document(build(&fields, defaults, opts)?, &body, opts)
}
