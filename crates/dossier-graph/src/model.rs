//! The vocabulary of the graph: where a fact comes from, what was mentioned, and the
//! relations and alias statements that extraction hands to a [`crate::TenantGraph`].

use std::fmt;

use serde::{Deserialize, Serialize};

/// How a fact entered the graph.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Source {
    /// Front matter or a record schema link: the author said so.
    Declared,
    /// A deterministic text rule of [`crate::extract()`].
    Extracted,
    /// A document's name found in another passage's text by the mention linker
    /// ([`crate::TitleTable`]); `specificity` in (0, 1] says how surely the words name
    /// that document (1: its whole, unshared title).
    Linked { specificity: f32 },
    /// A model's proposal; a candidate until a written policy accepts it.
    Model { confidence: f32 },
}

/// Where a fact was read: the exact document version, and the chunk and byte span in it
/// when it came from text. Record rows use `doc_id = "records/<table>"` and
/// `version = "<row key>"`, so that row-level visibility can be decided by the caller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    pub tenant: String,
    pub doc_id: String,
    pub version: String,
    pub chunk_id: Option<String>,
    /// Byte span in the chunk's text.
    pub span: Option<(usize, usize)>,
    pub source: Source,
}

impl Provenance {
    /// What a citation names: the chunk id, or `DOC@VERSION` for a fact without a chunk.
    pub fn cite(&self) -> String {
        match &self.chunk_id {
            Some(c) => c.clone(),
            None => format!("{}@{}", self.doc_id, self.version),
        }
    }

    /// The record table this provenance points into, if it is a record row.
    pub fn record_table(&self) -> Option<&str> {
        self.doc_id.strip_prefix(RECORDS_PREFIX)
    }
}

/// `doc_id` prefix of record-row provenance.
pub const RECORDS_PREFIX: &str = "records/";

/// What an entity is, as far as the rules can tell. A guess from cue words, a record
/// schema or the role in a relation; an entity's kind in a view is the majority of its
/// readable mentions.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum EntityKind {
    /// A document id (all its versions).
    Document,
    /// One version of a document, `ID@VERSION`.
    Version,
    /// A document named by its title in text; a title alias links it to its [`Document`](Self::Document).
    Title,
    Product,
    Supplier,
    Event,
    Incident,
    Change,
    Alert,
    Customer,
    Order,
    Release,
    Service,
    Team,
    /// An identifier whose kind no cue gave.
    Identifier,
    /// Any other name.
    Concept,
    /// A kind named by a record schema that is none of the above.
    Other(String),
}

impl EntityKind {
    /// Reads a kind name (`Supplier`, `supplier`, `products`); unknown names are kept.
    pub fn parse(s: &str) -> EntityKind {
        let l = s.trim().to_lowercase();
        crate::text::kind_of_word(&l)
            .or_else(|| l.strip_suffix('s').and_then(crate::text::kind_of_word))
            .unwrap_or(EntityKind::Other(s.trim().to_string()))
    }

    /// Kinds that say nothing specific; any specific kind outvotes them.
    pub fn is_generic(&self) -> bool {
        matches!(
            self,
            EntityKind::Identifier | EntityKind::Concept | EntityKind::Title
        )
    }
}

/// A name as written, with the kind it was taken for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Mention {
    pub text: String,
    pub kind: EntityKind,
}

impl Mention {
    pub fn new(text: impl Into<String>, kind: EntityKind) -> Mention {
        Mention {
            text: text.into(),
            kind,
        }
    }

    /// The key names are matched by within a tenant: document and version ids exactly,
    /// every other name normalised (NFKC, case, no punctuation or whitespace). `None` for
    /// a name that normalises to nothing.
    pub fn key(&self) -> Option<String> {
        let k = match self.kind {
            EntityKind::Document => format!("doc:{}", self.text.trim()),
            EntityKind::Version => format!("ver:{}", self.text.trim()),
            _ => dossier_core::text::normalize(&self.text),
        };
        (!k.is_empty() && k != "doc:" && k != "ver:").then_some(k)
    }
}

/// A typed, sourced statement `from —relation→ to`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Relation {
    pub from: Mention,
    /// Lower snake case, e.g. `supplied_by`, `depends_on`, `supersedes`.
    pub relation: String,
    pub to: Mention,
    pub provenance: Provenance,
    /// Text that backs a declared relation without a chunk (e.g. `supersedes_evidence`).
    pub evidence: Option<String>,
}

/// A statement that two names denote one entity ("X, also known as Y").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alias {
    pub alias: Mention,
    pub canonical: Mention,
    /// Why, in words (e.g. the statement's text).
    pub reason: String,
    pub provenance: Provenance,
}

/// What one extraction pass found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Extraction {
    /// Names seen in text or rows (the entity–passage links).
    pub mentions: Vec<(Mention, Provenance)>,
    pub relations: Vec<Relation>,
    pub aliases: Vec<Alias>,
}

impl Extraction {
    pub fn extend(&mut self, other: Extraction) {
        self.mentions.extend(other.mentions);
        self.relations.extend(other.relations);
        self.aliases.extend(other.aliases);
    }

    pub fn is_empty(&self) -> bool {
        self.mentions.is_empty() && self.relations.is_empty() && self.aliases.is_empty()
    }
}

/// An entity of one tenant's graph: the tenant and the key of its representative name.
/// The tenant is part of the identity, so an id never resolves in another tenant.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct EntityId {
    pub tenant: String,
    pub key: String,
}

impl fmt::Display for EntityId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.tenant, self.key)
    }
}
