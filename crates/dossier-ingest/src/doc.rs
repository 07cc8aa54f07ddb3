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
    guard::tenant("`tenant`", &tenant, f.line("tenant"))?;
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

/// A file to read as a document: its path, bytes, sidecar metadata and URI.
pub(crate) struct Source<'a> {
    pub path: &'a Path,
    pub raw: &'a [u8],
    /// The content of `FILE.meta.yaml`, if there is one.
    pub meta: Option<&'a str>,
    pub uri: &'a str,
}

impl Source<'_> {
    /// The digest of what the chunks are a function of: the file, its sidecar and the
    /// reader that turned it into text.
    fn digest(&self, reader: &str, opts: &IngestOptions) -> String {
        let mut all = self.raw.to_vec();
        if let Some(m) = self.meta {
            all.extend_from_slice(b"\0meta\0");
            all.extend_from_slice(m.as_bytes());
            all.extend_from_slice(reader.as_bytes());
        } else if !reader.is_empty() {
            all.extend_from_slice(reader.as_bytes());
        }
        digest(&all, opts)
    }

    /// The sidecar's fields, or none.
    fn sidecar(&self) -> Result<Option<Fields<'_>>> {
        let Some(src) = self.meta else {
            return Ok(None);
        };
        let map = yaml_mapping(src, 1).map_err(|e| self.in_sidecar(e))?;
        Ok(Some(Fields {
            map,
            src: Some(src),
            first_line: 1,
        }))
    }

    /// An error in the sidecar names the sidecar, since the problem is reported against
    /// the file it describes.
    fn in_sidecar(&self, e: Error) -> Error {
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let line = e.line();
        let msg = match e {
            Error::Yaml { msg, .. } | Error::Invalid { msg, .. } => msg,
            other => other.to_string(),
        };
        let at = line.map(|l| format!(":{l}")).unwrap_or_default();
        Error::invalid(None, format!("{name}.meta.yaml{at}: {msg}"))
    }

    /// Fields from the file itself, or else from the sidecar; both is an error, since
    /// one would silently lose to the other.
    fn fields<'f>(&'f self, own: Option<Fields<'f>>) -> Result<(Fields<'f>, bool)> {
        match (own, self.sidecar()?) {
            (Some(_), Some(_)) => Err(Error::invalid(
                Some(1),
                "metadata is given twice: in the file and in its .meta.yaml sidecar; keep one",
            )),
            (Some(f), None) => Ok((f, false)),
            (None, Some(f)) => Ok((f, true)),
            (None, None) => Ok((
                Fields {
                    map: Mapping::new(),
                    src: None,
                    first_line: 1,
                },
                false,
            )),
        }
    }

    fn build(
        &self,
        own: Option<Fields>,
        d: Defaults,
        opts: &IngestOptions,
    ) -> Result<DocumentVersion> {
        let (fields, from_sidecar) = self.fields(own)?;
        build(&fields, d, opts).map_err(|e| if from_sidecar { self.in_sidecar(e) } else { e })
    }
}

pub(crate) fn parse_markdown(
    src: &Source,
    text: &str,
    opts: &IngestOptions,
) -> Result<ParsedDocument> {
    let (yaml, body) = front_matter(text, opts.max_front_matter_bytes)?;
    let own = yaml
        .map(|y| {
            Ok::<_, Error>(Fields {
                map: yaml_mapping(y, 2)?,
                src: Some(y),
                first_line: 2,
            })
        })
        .transpose()?;
    let defaults = Defaults {
        // A Markdown file without front matter (or sidecar) is read like text; with
        // front matter, a missing id is a mistake worth reporting.
        id: (yaml.is_none() && src.meta.is_none()).then(|| stem(src.path)),
        title: first_heading(body).unwrap_or_else(|| stem(src.path)),
        kind: DocKind::Markdown,
        source_uri: src.uri.to_string(),
        digest: src.digest("", opts),
    };
    document(src.build(own, defaults, opts)?, body, None, opts)
}

pub(crate) fn parse_text(src: &Source, text: &str, opts: &IngestOptions) -> Result<ParsedDocument> {
    let defaults = Defaults {
        id: Some(stem(src.path)),
        title: stem(src.path),
        kind: DocKind::Text,
        source_uri: src.uri.to_string(),
        digest: src.digest("", opts),
    };
    document(src.build(None, defaults, opts)?, text, None, opts)
}

/// Reads visible text; headings become `#` lines so that the chunker sees sections.
/// `<meta name="dossier-FIELD" content="...">` sets a front-matter field. Spans point
/// into the extracted text, which is what chunks carry.
pub(crate) fn parse_html(src: &Source, text: &str, opts: &IngestOptions) -> Result<ParsedDocument> {
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
    let own = (!map.is_empty()).then_some(Fields {
        map,
        src: None,
        first_line: 1,
    });
    let defaults = Defaults {
        id: Some(stem(src.path)),
        title: title
            .or_else(|| first_heading(&body))
            .unwrap_or_else(|| stem(src.path)),
        kind: DocKind::Html,
        source_uri: src.uri.to_string(),
        digest: src.digest("", opts),
    };
    document(src.build(own, defaults, opts)?, &body, None, opts)
}

/// Version of the PDF, DOCX and sheet readers, part of their documents' digests: bump
/// it when what they extract changes, so that unchanged files are read again.
const EXTRACT_VERSION: &str = "extract-1";

/// PDF, DOCX, and spreadsheets or CSV read as text. Metadata comes from the sidecar
/// only. Returns what was noticed on the way (pages without a text layer).
pub(crate) fn parse_binary(
    src: &Source,
    kind: crate::Kind,
    opts: &IngestOptions,
) -> Result<(ParsedDocument, Vec<String>)> {
    use crate::Kind;
    let mut notes = Vec::new();
    let (body, title, layout, doc_kind) = match kind {
        Kind::Pdf => {
            let layout = crate::pdf::extract(src.raw, opts)?;
            if !layout.empty_pages.is_empty() {
                notes.push(format!(
                    "pages without a text layer (scanned?), not indexed: {}",
                    layout
                        .empty_pages
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            (layout.body.clone(), None, Some(layout), DocKind::Pdf)
        }
        Kind::Docx => {
            let d = crate::docx::extract(src.raw, opts)?;
            (d.body, d.title, None, DocKind::Docx)
        }
        Kind::Xlsx => {
            let grids = crate::sheet::read_xlsx(src.raw, opts)?;
            (crate::sheet::text(&grids), None, None, DocKind::Sheet)
        }
        Kind::Csv => {
            let grid = crate::sheet::read_csv(&stem(src.path), src.raw, opts)?;
            (crate::sheet::text(&[grid]), None, None, DocKind::Sheet)
        }
        _ => unreachable!("text kinds are read as text"),
    };
    if body.trim().is_empty() {
        return Err(Error::Empty);
    }
    let defaults = Defaults {
        id: Some(stem(src.path)),
        title: title
            .or_else(|| first_heading(&body))
            .unwrap_or_else(|| stem(src.path)),
        kind: doc_kind,
        source_uri: src.uri.to_string(),
        digest: src.digest(EXTRACT_VERSION, opts),
    };
    let doc = document(
        src.build(None, defaults, opts)?,
        &body,
        layout.as_ref(),
        opts,
    )?;
    Ok((doc, notes))
}
