//! Dossier's retrieval indexes, compute only.
//!
//! - [`bm25`]: a tantivy index with a Chinese + English analyzer ([`analyzer`]).
//! - [`vector`]: an exact [`vector::FlatIndex`] (the test oracle) and an
//!   [`vector::HnswIndex`] for approximate search, both filtered *during* search.
//! - [`fusion`]: reciprocal-rank fusion of ranked lists.
//!
//! Every search takes an [`Admit`] set of document-version ordinals: the caller's
//! tenant, ACL and version filter, resolved before the query runs. Nothing outside it is
//! scored into a top-k, so no hit is lost to, or leaked by, a cut made before filtering.
//!
//! **Architecture invariant:** this crate knows nothing of principals, catalogs or
//! documents; it ranks integer ids under an admission set.

pub mod admit;
pub mod analyzer;
pub mod bm25;
pub mod fusion;
pub mod vector;

pub use admit::Admit;

/// Errors of the index layer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("text index: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
    #[error("index file {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("index file {path} is corrupt: {reason}")]
    Corrupt { path: String, reason: String },
    #[error("vector has dimension {got}, index expects {want}")]
    Dimension { got: usize, want: usize },
}

pub type Result<T> = std::result::Result<T, Error>;

/// A ranked hit: the chunk's sequence number and a score (higher is better).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    pub seq: u64,
    pub score: f32,
}
