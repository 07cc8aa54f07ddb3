//! Documents, their versions and their chunks.

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

/// What a document was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DocKind {
    Markdown,
    Text,
    Html,
    /// One passage of a corpus JSONL file.
    Passage,
    Pdf,
    Docx,
    /// A spreadsheet or CSV file read as text (one with a schema is a record table).
    Sheet,
}

/// `ID@VERSION`, the way front matter names one version of a document.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VersionRef {
    pub doc_id: String,
    pub version: String,
}

impl VersionRef {
    /// Parses `ID@VERSION`.
    pub fn parse(s: &str) -> Option<VersionRef> {
        let (d, v) = s.trim().rsplit_once('@')?;
        let (d, v) = (d.trim(), v.trim().trim_matches('"'));
        (!d.is_empty() && !v.is_empty()).then(|| VersionRef {
            doc_id: d.to_string(),
            version: v.to_string(),
        })
    }
}

impl std::fmt::Display for VersionRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.doc_id, self.version)
    }
}

/// One version of one document, with everything the front matter declared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DocumentVersion {
    pub doc_id: String,
    pub version: String,
    pub title: String,
    pub tenant: String,
    pub kb: Option<String>,
    /// Groups that may read it; `None` means every principal of the tenant.
    pub acl: Option<Vec<String>>,
    pub effective_from: Option<NaiveDate>,
    /// An explicit end date from the front matter, if any.
    pub effective_to: Option<NaiveDate>,
    /// A confirmed supersession declared by this version.
    pub supersedes: Option<VersionRef>,
    pub supersedes_evidence: Option<String>,
    pub depends_on: Vec<String>,
    pub source_uri: String,
    pub kind: DocKind,
    /// blake3 of the source bytes plus the chunker's version: equal digest, no work.
    pub digest: String,
}

impl DocumentVersion {
    pub fn key(&self) -> VersionRef {
        VersionRef {
            doc_id: self.doc_id.clone(),
            version: self.version.clone(),
        }
    }

    /// Whether a principal with these groups may read this version (tenant checked apart).
    pub fn readable_by(&self, groups: &[String]) -> bool {
        match &self.acl {
            None => true,
            Some(acl) => acl
                .iter()
                .any(|g| g == "*" || groups.iter().any(|x| x == g)),
        }
    }
}

/// A retrievable piece of one document version. It carries its provenance whole so
/// that a hit can be cited and re-checked without another lookup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    /// `DOC@VERSION#ORDINAL`: stable for the same content and chunker.
    pub chunk_id: String,
    pub doc_id: String,
    pub version: String,
    pub ordinal: u32,
    /// Heading path, outermost first (e.g. `["耳机售后政策 V2", "第 1 条 无理由退货"]`).
    pub section: Vec<String>,
    pub text: String,
    /// Byte span of `text` in the document body (after front matter).
    pub byte_start: usize,
    pub byte_end: usize,
    pub source_uri: String,
    pub tenant: String,
    pub kb: Option<String>,
    pub acl: Option<Vec<String>>,
    /// Title of the document, kept for indexing (titles matter for retrieval).
    pub title: String,
}

impl Chunk {
    pub fn make_id(doc_id: &str, version: &str, ordinal: u32) -> String {
        format!("{doc_id}@{version}#{ordinal}")
    }

    /// The innermost heading, which is what a citation names; for a chunk of a paged
    /// format (PDF), its page and the heading: `p. 2 › Clause 2`.
    pub fn section_label(&self) -> String {
        let last = self.section.last().cloned().unwrap_or_default();
        match (self.page(), self.section.len()) {
            (Some(_), n) if n > 1 => format!("{} › {last}", self.section[0]),
            _ => last,
        }
    }

    /// The page the chunk is on, for a chunk read from a paged format (PDF): the first
    /// element of its section path is then `p. N`.
    pub fn page(&self) -> Option<u32> {
        page_of(&self.section)
    }
}

/// How a section path names the page its chunk is on: `p. 2`, always the first element.
pub const PAGE_PREFIX: &str = "p. ";

/// The page a section path names, if it names one.
pub fn page_of(section: &[String]) -> Option<u32> {
    section.first()?.strip_prefix(PAGE_PREFIX)?.parse().ok()
}
