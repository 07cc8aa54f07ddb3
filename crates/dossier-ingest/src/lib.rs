//! Dossier's readers: source files in, typed items out.
//!
//! This crate owns the accepted input formats — Markdown with YAML front matter, plain
//! text, HTML, corpus JSONL, record tables (`TABLE.jsonl` + `TABLE.schema.yaml`) and
//! `principals.yaml` — and the section-aware chunker ([`chunk_text`]) whose spans point
//! back into each document body. A bad file or line becomes a [`Problem`]; everything
//! else in the batch still lands.
//!
//! Every reader is bounded ([`IngestOptions`]): file and line size, front-matter and
//! YAML size, YAML alias expansion, JSON and HTML nesting, HTML elements and parse time,
//! rows per table and problems listed per file. Text is told from binary by content,
//! not by name, and ids are checked with [`dossier_core::ids::check_id`].
//! [`parse_bytes`] is the whole reading path without the disk, for fuzzing.
//!
//! **Architecture invariant:** this crate only reads. It does no storage, no indexing
//! and no embedding, and it never decides which version is in force (that is
//! `dossier_core::validity`).

mod chunk;
mod corpus;
mod doc;
mod docx;
mod guard;
mod html;
pub mod keys;
mod office;
pub mod pdf;
mod records;
mod sheet;

use std::fmt;
use std::fs;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::Duration;

use dossier_core::{Chunk, DocumentVersion, Principal, RecordRow, RecordSchema};

pub use chunk::{
    chunk_text, degenerate, Span, DEGENERATE_MIN_CHARS, DEGENERATE_REPEAT_PERCENT,
    DEGENERATE_RUN_CHARS,
};
pub use corpus::parse_corpus_jsonl;

/// Part of every digest: bump it when chunking changes so that unchanged files re-chunk.
pub const CHUNKER_VERSION: u32 = 1;

/// What can go wrong reading one file or line.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read: {0}")]
    Io(#[from] std::io::Error),
    #[error("oversized: {size} bytes, limit {limit}")]
    Oversized { size: u64, limit: u64 },
    #[error("invalid UTF-8")]
    Utf8 { line: usize },
    #[error("invalid YAML: {msg}")]
    Yaml { line: Option<usize>, msg: String },
    #[error("invalid JSON: {msg}")]
    Json { line: Option<usize>, msg: String },
    #[error("{msg}")]
    Invalid { line: Option<usize>, msg: String },
    /// A text format whose content is not text.
    #[error("binary content, not text: {why}")]
    Binary { why: String },
    /// A document with nothing but whitespace (or only front matter) to index.
    #[error("no text to index")]
    Empty,
    /// Text not worth indexing: one word or character repeated through it, or megabytes
    /// without a word boundary ([`degenerate`]).
    #[error("degenerate text, not indexed: {why}")]
    Degenerate { why: String },
    /// A document that would make more chunks than
    /// [`IngestOptions::max_chunks_per_document`]; refused whole, never truncated.
    #[error(
        "{chunks} chunks, more than the {limit} one document may have \
         (max_chunks_per_document, `dossier ingest --max-chunks-per-document`); \
         refused whole, not truncated"
    )]
    TooManyChunks { chunks: usize, limit: usize },
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn invalid(line: Option<usize>, msg: impl Into<String>) -> Error {
        Error::Invalid {
            line,
            msg: msg.into(),
        }
    }

    /// The 1-based line in the file the error points at, where known.
    pub fn line(&self) -> Option<usize> {
        match self {
            Error::Utf8 { line } => Some(*line),
            Error::Yaml { line, .. } | Error::Json { line, .. } | Error::Invalid { line, .. } => {
                *line
            }
            Error::Io(_)
            | Error::Oversized { .. }
            | Error::Binary { .. }
            | Error::Empty
            | Error::Degenerate { .. }
            | Error::TooManyChunks { .. } => None,
        }
    }
}

/// How files are read and chunked, and the bounds every reader keeps to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngestOptions {
    /// Upper bound of a chunk, in characters.
    pub max_chunk_chars: usize,
    /// A document (a file, or one corpus passage) that would make more chunks than this
    /// is refused whole, with a problem that names the limit: a document indexed in
    /// part would answer as if it were whole. 5,000 chunks is about 5 MB of English
    /// prose (more of Chinese), or a civil code of 2,500 articles, each its own chunk;
    /// at e5's ingest rate on a 2-core machine (about 6 chunks a second) it is some 14
    /// minutes of embedding.
    pub max_chunks_per_document: usize,
    /// Files above this are refused; for corpus JSONL it bounds each line instead, since
    /// those are streamed.
    pub max_file_bytes: u64,
    /// `principals.yaml` and `TABLE.schema.yaml` files above this are refused (the
    /// lesser of this and `max_file_bytes` applies): YAML is loaded whole, at tens of
    /// bytes of memory per byte of text.
    pub max_yaml_bytes: u64,
    /// Front matter above this is refused.
    pub max_front_matter_bytes: usize,
    /// HTML that nests elements deeper than this is refused: the HTML parser's scope
    /// checks walk the open elements, so its time grows with depth × tags.
    pub max_html_depth: usize,
    /// HTML with more elements than this is refused (and with more than twice as many
    /// tags, end tags included).
    pub max_html_elements: usize,
    /// HTML whose parse takes longer than this is refused. A backstop: the bounds above
    /// keep ordinary and hostile files alike far below it.
    pub max_html_time: Duration,
    /// Rows read from one record table; a table with more is reported and its further
    /// rows are not read.
    pub max_rows: usize,
    /// Reading one PDF (poppler runs as a child process) may take this long; a file
    /// that takes longer is refused and the process killed.
    pub max_convert_time: Duration,
    /// Tenant of documents that name none.
    pub default_tenant: String,
}

impl Default for IngestOptions {
    fn default() -> Self {
        IngestOptions {
            max_chunk_chars: 1000,
            max_chunks_per_document: 5_000,
            max_file_bytes: 16 << 20,
            max_yaml_bytes: 1 << 20,
            max_front_matter_bytes: 64 << 10,
            max_html_depth: 256,
            max_html_elements: 200_000,
            max_html_time: Duration::from_secs(10),
            max_rows: 500_000,
            max_convert_time: Duration::from_secs(60),
            default_tenant: "default".into(),
        }
    }
}

/// Problems listed for one file; further ones are counted in one last problem.
pub const MAX_PROBLEMS_PER_FILE: usize = 100;

/// One document version and its chunks.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedDocument {
    pub meta: DocumentVersion,
    pub chunks: Vec<Chunk>,
}

/// One record table: its schema and the rows that were read whole.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordTable {
    pub schema: RecordSchema,
    pub rows: Vec<RecordRow>,
    /// The `TABLE.jsonl` file.
    pub path: PathBuf,
}

/// What a file yields.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Document(ParsedDocument),
    Records(RecordTable),
    Principals {
        path: PathBuf,
        principals: Vec<Principal>,
    },
}

/// A file or line that could not be taken in, with where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub path: PathBuf,
    pub line: Option<usize>,
    pub message: String,
}

impl Problem {
    pub(crate) fn new(path: &Path, line: Option<usize>, message: impl Into<String>) -> Problem {
        Problem {
            path: path.to_path_buf(),
            line,
            message: message.into(),
        }
    }

    pub(crate) fn from_error(path: &Path, e: &Error) -> Problem {
        Problem::new(path, e.line(), e.to_string())
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{}: {}", self.path.display(), l, self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

/// The outcome of [`parse_paths`].
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    pub items: Vec<Item>,
    pub problems: Vec<Problem>,
    pub files_seen: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Markdown,
    Text,
    Html,
    Pdf,
    Docx,
    Xlsx,
    Csv,
    Jsonl,
    Principals,
}

impl Kind {
    /// Whether the kind is read as bytes, not as text.
    fn binary(self) -> bool {
        matches!(self, Kind::Pdf | Kind::Docx | Kind::Xlsx)
    }

    /// Whether a file of the kind may be a record table (with a schema beside it).
    fn tabular(self) -> bool {
        matches!(self, Kind::Xlsx | Kind::Csv)
    }
}

fn kind_of(path: &Path) -> Option<Kind> {
    let name = path.file_name()?.to_str()?.to_ascii_lowercase();
    if name == "principals.yaml" || name == "principals.yml" {
        return Some(Kind::Principals);
    }
    let ext = name.rsplit_once('.')?.1;
    Some(match ext {
        "md" | "markdown" => Kind::Markdown,
        "txt" => Kind::Text,
        "html" | "htm" => Kind::Html,
        "pdf" => Kind::Pdf,
        "docx" => Kind::Docx,
        "xlsx" => Kind::Xlsx,
        "csv" => Kind::Csv,
        "jsonl" => Kind::Jsonl,
        _ => return None,
    })
}

/// Lists the files to read under `paths`: directories are walked recursively (hidden
/// entries and symlinked directories skipped), files of unknown kinds found there are
/// ignored, and the result is sorted and without duplicates. A path that does not exist,
/// or a file named explicitly whose kind is unknown, is a [`Problem`].
///
/// What a walk follows: a symlink to a file inside the directory named is followed; one
/// that leads out of it (`secret.md -> /etc/passwd`) is a problem and is not read —
/// name the target itself to ingest it. A FIFO, socket or device named like a document
/// is a problem, never opened.
pub fn discover(paths: &[PathBuf]) -> (Vec<PathBuf>, Vec<Problem>) {
    let mut files = Vec::new();
    let mut problems = Vec::new();
    for p in paths {
        match fs::metadata(p) {
            Err(e) => problems.push(Problem::new(p, None, format!("cannot read: {e}"))),
            Ok(m) if m.is_dir() => {
                // Symlinks are judged against the directory as it really is.
                let root = fs::canonicalize(p).unwrap_or_else(|_| p.clone());
                walk(p, &root, &mut files, &mut problems)
            }
            Ok(_) if kind_of(p).is_some() || records::schema_stands_alone(p) => {
                files.push(p.clone())
            }
            Ok(_) => problems.push(Problem::new(p, None, "unsupported file kind")),
        }
    }
    files.sort();
    files.dedup();
    (files, problems)
}

/// What a walk says of a FIFO, socket or device, met directly or through a symlink.
const NOT_REGULAR: &str = "not a regular file (a FIFO, socket or device); skipped";

fn walk(dir: &Path, root: &Path, files: &mut Vec<PathBuf>, problems: &mut Vec<Problem>) {
    let entries = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) => return problems.push(Problem::new(dir, None, format!("cannot read: {e}"))),
    };
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                problems.push(Problem::new(dir, None, format!("cannot read: {e}")));
                continue;
            }
        };
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().to_ascii_lowercase();
        // A directory's README describes the directory; it is not one of its documents.
        // Named explicitly, it is ingested like any other file.
        if name.starts_with('.') || name == "readme.md" || name == "readme.txt" {
            continue;
        }
        let Ok(ft) = entry.file_type() else { continue };
        if ft.is_dir() {
            walk(&path, root, files, problems);
            continue;
        }
        // Files of kinds Dossier does not read are ignored, whatever they are.
        if kind_of(&path).is_none() && !records::schema_stands_alone(&path) {
            continue;
        }
        if ft.is_symlink() {
            // Symlinked directories are not followed (a loop cannot make the walk
            // endless); a symlinked file is, while it stays inside the tree.
            match fs::canonicalize(&path) {
                Ok(target) if !target.starts_with(root) => problems.push(Problem::new(
                    &path,
                    None,
                    "a symlink that leads out of the directory being ingested; not followed \
                     (name its target to ingest it)",
                )),
                Ok(target) if target.is_file() => files.push(path),
                Ok(target) if target.is_dir() => {}
                Ok(_) => problems.push(Problem::new(&path, None, NOT_REGULAR)),
                Err(e) => problems.push(Problem::new(&path, None, format!("cannot read: {e}"))),
            }
        } else if ft.is_file() {
            files.push(path);
        } else {
            // A FIFO would block the read; a device or socket is no document.
            problems.push(Problem::new(&path, None, NOT_REGULAR));
        }
    }
}

/// Discovers and parses everything under `paths`.
pub fn parse_paths(paths: &[PathBuf], opts: &IngestOptions) -> Parsed {
    let (files, mut problems) = discover(paths);
    let mut items = Vec::new();
    for f in &files {
        let (i, p) = parse_file(f, opts);
        items.extend(i);
        problems.extend(p);
    }
    Parsed {
        items,
        problems,
        files_seen: files.len(),
    }
}

/// Parses one file by its kind. A corpus JSONL yields one document per good line.
pub fn parse_file(path: &Path, opts: &IngestOptions) -> (Vec<Item>, Vec<Problem>) {
    if records::schema_stands_alone(path) {
        return records::parse_lone_schema(path, opts);
    }
    let Some(kind) = kind_of(path) else {
        return unsupported(path);
    };
    let result = match kind {
        Kind::Jsonl => {
            return match records::schema_path(path) {
                Some(schema) => {
                    let (table, problems) = records::parse_table_file(path, &schema, opts);
                    (table.map(Item::Records).into_iter().collect(), problems)
                }
                None => {
                    let mut docs = Vec::new();
                    let problems = parse_corpus_jsonl(path, opts, |d| docs.push(Item::Document(d)));
                    (docs, problems)
                }
            }
        }
        k if k.tabular() => {
            if let Some(schema) = records::schema_path(path) {
                let (table, problems) = records::parse_grid_file(path, &schema, opts);
                return (table.map(Item::Records).into_iter().collect(), problems);
            }
            read_whole(path, kind, opts)
        }
        _ => read_whole(path, kind, opts),
    };
    one(path, result)
}

/// Reads a file and its metadata sidecar, if it has one, and parses both.
fn read_whole(path: &Path, kind: Kind, opts: &IngestOptions) -> Result<(Item, Vec<String>)> {
    let bytes = read_bytes(path, size_limit(kind, opts))?;
    let meta = match (kind, sidecar_path(path)) {
        (Kind::Principals, _) | (_, None) => None,
        (_, Some(p)) => Some(read_bytes(
            &p,
            opts.max_yaml_bytes.min(opts.max_file_bytes),
        )?),
    };
    parse_whole(path, kind, &bytes, meta.as_deref(), &file_uri(path), opts)
}

/// `FILE.meta.yaml` (or `.meta.yml`) beside `FILE`: the metadata a Markdown file would
/// carry in front matter, for files that have no place for it.
pub fn sidecar_path(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?;
    ["meta.yaml", "meta.yml"]
        .iter()
        .map(|ext| path.with_file_name(format!("{name}.{ext}")))
        .find(|p| p.is_file())
}

/// Parses one file's content as [`parse_file`] would, by the kind its name gives, but
/// without the disk: documents get a `file://` URI of the path as given, and a `.jsonl`
/// is read as a corpus (a record table needs its schema: [`parse_table_bytes`]). This
/// is the path the fuzz targets take.
pub fn parse_bytes(
    path: impl AsRef<Path>,
    bytes: &[u8],
    opts: &IngestOptions,
) -> (Vec<Item>, Vec<Problem>) {
    parse_bytes_with_meta(path, bytes, None, opts)
}

/// [`parse_bytes`] with the content of a metadata sidecar (`FILE.meta.yaml`): YAML with
/// the fields of Markdown front matter. A spreadsheet or CSV is read as text here.
pub fn parse_bytes_with_meta(
    path: impl AsRef<Path>,
    bytes: &[u8],
    meta: Option<&[u8]>,
    opts: &IngestOptions,
) -> (Vec<Item>, Vec<Problem>) {
    let path = path.as_ref();
    let Some(kind) = kind_of(path) else {
        return unsupported(path);
    };
    if kind == Kind::Jsonl {
        let mut docs = Vec::new();
        let problems = corpus::parse_reader(path, bytes, opts, |d| docs.push(Item::Document(d)));
        return (docs, problems);
    }
    let uri = format!("file://{}", path.display());
    let result = check_size(bytes.len() as u64, size_limit(kind, opts))
        .and_then(|()| match meta {
            Some(m) => check_size(m.len() as u64, opts.max_yaml_bytes),
            None => Ok(()),
        })
        .and_then(|()| parse_whole(path, kind, bytes, meta, &uri, opts));
    one(path, result)
}

/// Parses a record table from the content of its schema and of its rows, as
/// [`parse_file`] does for a `TABLE.jsonl` beside a `TABLE.schema.yaml`.
pub fn parse_table_bytes(
    path: impl AsRef<Path>,
    schema_path: impl AsRef<Path>,
    schema: &[u8],
    rows: &[u8],
    opts: &IngestOptions,
) -> (Option<RecordTable>, Vec<Problem>) {
    records::parse_table(path.as_ref(), schema_path.as_ref(), schema, rows, opts)
}

fn unsupported(path: &Path) -> (Vec<Item>, Vec<Problem>) {
    (
        vec![],
        vec![Problem::new(path, None, "unsupported file kind")],
    )
}

/// A file's item and what was noticed reading it (pages without text, say), or why it
/// could not be read.
fn one(path: &Path, r: Result<(Item, Vec<String>)>) -> (Vec<Item>, Vec<Problem>) {
    match r {
        Ok((item, notes)) => (
            vec![item],
            notes
                .into_iter()
                .map(|n| Problem::new(path, None, n))
                .collect(),
        ),
        Err(e) => (vec![], vec![Problem::from_error(path, &e)]),
    }
}

fn size_limit(kind: Kind, opts: &IngestOptions) -> u64 {
    match kind {
        Kind::Principals => opts.max_yaml_bytes.min(opts.max_file_bytes),
        _ => opts.max_file_bytes,
    }
}

/// Everything read whole: documents and principals. `meta` is the sidecar's content.
fn parse_whole(
    path: &Path,
    kind: Kind,
    bytes: &[u8],
    meta: Option<&[u8]>,
    uri: &str,
    opts: &IngestOptions,
) -> Result<(Item, Vec<String>)> {
    let meta = meta.map(guard::text).transpose()?;
    let src = doc::Source {
        path,
        raw: bytes,
        meta,
        uri,
    };
    if kind.binary() || kind == Kind::Csv {
        return doc::parse_binary(&src, kind, opts).map(|(d, notes)| (Item::Document(d), notes));
    }
    let text = guard::text(bytes)?;
    let item = match kind {
        Kind::Principals => records::parse_principals(path, text)?,
        Kind::Markdown => Item::Document(doc::parse_markdown(&src, text, opts)?),
        Kind::Html => Item::Document(doc::parse_html(&src, text, opts)?),
        Kind::Text => Item::Document(doc::parse_text(&src, text, opts)?),
        _ => unreachable!("JSONL is read line by line; binary kinds above"),
    };
    Ok((item, vec![]))
}

fn file_uri(path: &Path) -> String {
    let p = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    format!("file://{}", p.display())
}

/// Parses YAML that starts on line `first_line` of its file. The text is parsed behind
/// as many blank lines, so that the lines the error and its message name are the file's.
pub(crate) fn from_yaml<T: serde::de::DeserializeOwned>(src: &str, first_line: usize) -> Result<T> {
    let padded;
    let src = if first_line > 1 {
        padded = "\n".repeat(first_line - 1) + src;
        &padded
    } else {
        src
    };
    guard::check_yaml(src).map_err(|msg| Error::Yaml { line: None, msg })?;
    serde_norway::from_str(src).map_err(|e| Error::Yaml {
        line: e.location().map(|l| l.line()),
        msg: e.to_string(),
    })
}

/// A JSON error on one line; the line number is the caller's, the column is kept.
pub(crate) fn json_error(e: serde_json::Error) -> Error {
    let s = e.to_string();
    let msg = s.rsplit_once(" at line ").map_or(s.as_str(), |(m, _)| m);
    // serde_json stops at 128 levels of nesting, before its recursion could overflow.
    let msg = match msg {
        "recursion limit exceeded" => "nested more than 128 levels deep",
        m => m,
    };
    Error::Json {
        line: None,
        msg: format!("{msg} (column {})", e.column()),
    }
}

/// Calls `f` with each line (1-based number, text without the line break) of a stream,
/// so that a corpus larger than memory can be read. A line over `max_line` bytes or with
/// invalid UTF-8 is passed as an error and the reading goes on, until `f` returns false.
/// A stream whose first bytes are binary is refused whole.
pub(crate) fn each_line(
    mut r: impl BufRead,
    max_line: u64,
    mut f: impl FnMut(usize, Result<&str>) -> bool,
) -> Result<()> {
    use std::io::Read;
    const HEAD: usize = 8 << 10;
    let head = r.fill_buf()?;
    guard::check_head(&head[..head.len().min(HEAD)])?;
    let mut buf = Vec::new();
    for n in 1.. {
        buf.clear();
        if (&mut r).take(max_line + 1).read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        let go_on = if !buf.ends_with(b"\n") && buf.len() as u64 > max_line {
            let rest = r.skip_until(b'\n')? as u64;
            let size = buf.len() as u64 + rest.saturating_sub(1);
            f(
                n,
                Err(Error::Oversized {
                    size,
                    limit: max_line,
                }),
            )
        } else {
            let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let text = std::str::from_utf8(line).map_err(|_| Error::Utf8 { line: n });
            f(n, text.map(|t| t.strip_prefix('\u{feff}').unwrap_or(t)))
        };
        if !go_on {
            break;
        }
    }
    Ok(())
}

fn check_size(size: u64, limit: u64) -> Result<()> {
    match size > limit {
        true => Err(Error::Oversized { size, limit }),
        false => Ok(()),
    }
}

/// Opens a regular file (a symlink to one is followed) and tells its size. A device,
/// pipe or socket given a text file's name is refused before it is opened: reading one
/// might never end.
pub(crate) fn open_regular(path: &Path) -> Result<(fs::File, u64)> {
    let m = fs::metadata(path)?;
    if !m.is_file() {
        return Err(Error::invalid(None, "not a regular file"));
    }
    Ok((fs::File::open(path)?, m.len()))
}

/// Reads a whole file of at most `limit` bytes.
pub(crate) fn read_bytes(path: &Path, limit: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    let (file, size) = open_regular(path)?;
    check_size(size, limit)?;
    let mut bytes = Vec::with_capacity(size as usize);
    // The file may have grown since.
    file.take(limit + 1).read_to_end(&mut bytes)?;
    check_size(bytes.len() as u64, limit)?;
    Ok(bytes)
}

/// blake3 of what the chunks are a function of: chunker, chunk bound and source bytes.
pub(crate) fn digest(source: &[u8], opts: &IngestOptions) -> String {
    let mut h = blake3::Hasher::new();
    h.update(&CHUNKER_VERSION.to_le_bytes());
    h.update(&(opts.max_chunk_chars as u64).to_le_bytes());
    h.update(source);
    h.finalize().to_hex().to_string()
}

/// Chunks `body` and fills every chunk field from the document; a body with nothing to
/// index is an error, not a document without chunks. Degenerate text, and a body that
/// makes more than `max_chunks_per_document` chunks, are refused before any chunk is
/// built.
pub(crate) fn document(
    meta: DocumentVersion,
    body: &str,
    pages: Option<&pdf::Layout>,
    opts: &IngestOptions,
) -> Result<ParsedDocument> {
    if let Some(why) = degenerate(body) {
        return Err(Error::Degenerate { why });
    }
    let mut spans = chunk_text(body, opts.max_chunk_chars);
    if let Some(layout) = pages {
        spans = on_pages(spans, body, layout);
    }
    if spans.len() > opts.max_chunks_per_document {
        return Err(Error::TooManyChunks {
            chunks: spans.len(),
            limit: opts.max_chunks_per_document,
        });
    }
    let chunks: Vec<Chunk> = spans
        .into_iter()
        .enumerate()
        .map(|(i, s)| Chunk {
            chunk_id: Chunk::make_id(&meta.doc_id, &meta.version, i as u32),
            doc_id: meta.doc_id.clone(),
            version: meta.version.clone(),
            ordinal: i as u32,
            text: body[s.start..s.end].to_string(),
            section: s.section,
            byte_start: s.start,
            byte_end: s.end,
            source_uri: meta.source_uri.clone(),
            tenant: meta.tenant.clone(),
            kb: meta.kb.clone(),
            acl: meta.acl.clone(),
            title: meta.title.clone(),
        })
        .collect();
    if chunks.is_empty() {
        return Err(Error::Empty);
    }
    Ok(ParsedDocument { meta, chunks })
}

/// Cuts every span that runs over a page break at the break, and puts its page first
/// in its section path (`p. 2 › Clause 2 …`), so that a citation names one page.
fn on_pages(spans: Vec<Span>, body: &str, layout: &pdf::Layout) -> Vec<Span> {
    let mut out = Vec::with_capacity(spans.len());
    for s in spans {
        let mut start = s.start;
        let breaks = layout
            .pages
            .iter()
            .map(|(_, at)| *at)
            .filter(|at| *at > s.start && *at < s.end);
        for at in breaks.chain([s.end]) {
            let (a, b) = (start, at);
            start = at;
            // Keep the cut's text trimmed, as the chunker does, and drop empty pieces.
            let piece = &body[a..b];
            let lead = piece.len() - piece.trim_start().len();
            let trail = piece.len() - piece.trim_end().len();
            if lead + trail >= piece.len() {
                continue;
            }
            let (a, b) = (a + lead, b - trail);
            let page = layout.page_at(a).unwrap_or(1);
            let mut section = vec![format!("{}{page}", dossier_core::doc::PAGE_PREFIX)];
            section.extend(s.section.iter().cloned());
            out.push(Span {
                section,
                start: a,
                end: b,
            });
        }
    }
    out
}
