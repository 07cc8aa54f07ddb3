//! Dossier's store: an embedded directory (below), or a shared PostgreSQL + pgvector
//! database behind the same catalog seam ([`postgres`]; [`StoreLocation`] says which).
//! The embedded store is one directory holding
//!
//! - `manifest.json`: the format version and the embedding model the vectors came from;
//! - `catalog.redb`: the **source of truth** — document versions, chunks, vectors,
//!   records, principals — plus a change log written in the same transaction as
//!   every commit ([`catalog`]);
//! - `indexes/`: index generations (BM25 + HNSW) derived from the catalog, one of them
//!   active ([`generations`]).
//!
//! Beside the catalog, outside its change log, each backend keeps the server's audit log
//! and the agent traces stored with it ([`audit`]).
//!
//! **Architecture invariants:**
//! - A commit is one redb transaction: a reader sees all of it or none of it; a killed
//!   writer leaves the last commit intact.
//! - Indexes are derived data. Each records the catalog generation it reflects and is
//!   brought up to date from the change log when opened, so a crash between the catalog
//!   commit and the index commit loses nothing.
//! - Hydration reads chunks from the catalog, never from an index, so an index entry
//!   the catalog no longer has can never be shown.
//!
//! The persisted formats carry [`FORMAT_VERSION`]; a change must stay readable or
//! migrate.

pub mod audit;
pub mod catalog;
pub mod generations;
pub mod idempotency;
pub mod postgres;
pub mod principals;
mod scope;
mod store;
pub mod testing;
mod view;

pub use audit::{
    AuditEntry, AuditLog, AuditPage, AuditQuery, AuditReason, AuditRecord, AuditTool,
    Cursor as AuditCursor, Pruned,
};
pub use catalog::{Catalog, CatalogBackend, ChangeSet, DocEntry, FoldStats, StoredChunk};
pub use generations::GenerationInfo;
pub use idempotency::{Claim as IdempotencyClaim, IdempotencyLog, StoredResponse};
pub use scope::{ReaderKey, Scope};
pub use store::{CommitStats, Manifest, Snapshot, Store, StoreLocation, FORMAT_VERSION};
pub use view::DocsView;

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("catalog: {0}")]
    Catalog(String),
    #[error("index: {0}")]
    Index(#[from] dossier_index::Error),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("store {path} has format version {found}, this build reads {expected}")]
    Format {
        path: String,
        found: u32,
        expected: u32,
    },
    #[error("store {path} holds vectors from {found} (dim {found_dim}); this run uses {wanted} (dim {wanted_dim}) — use another --store or the same model")]
    EmbedderMismatch {
        path: String,
        found: String,
        found_dim: usize,
        wanted: String,
        wanted_dim: usize,
    },
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
}

pub type Result<T> = std::result::Result<T, Error>;

macro_rules! from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for Error {
            fn from(e: $t) -> Self { Error::Catalog(e.to_string()) }
        }
    )*};
}
from_redb!(
    redb::Error,
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
    serde_json::Error
);

pub(crate) fn io_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.display().to_string(),
        source,
    }
}
