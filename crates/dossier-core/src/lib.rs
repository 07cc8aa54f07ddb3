//! Dossier's shared vocabulary.
//!
//! This crate owns the types every other crate speaks in — document versions, chunks,
//! records, principals — and the rules that are pure
//! functions of them: which version is in force on a date ([`validity`]). It also holds the seam traits ([`Embedder`]).
//!
//! **Architecture invariant:** this crate does no I/O and knows no storage format.

pub mod cancel;
pub mod doc;
pub mod error;
pub mod ids;
pub mod lru;
pub mod pii;
pub mod record;
pub mod review;
pub mod scope;
pub mod text;
pub mod validity;

pub use doc::{Chunk, DocKind, DocumentVersion, VersionRef};
pub use error::{Error, Result};
pub use record::{RecordLink, RecordRow, RecordSchema, RecordSource};
pub use scope::Principal;

/// Turns text into dense vectors. Implementations: the in-process e5 model, an
/// OpenAI-compatible HTTP provider, and a hashing embedder for tests.
///
/// Contract: vectors are L2-normalised, `dim()` long, and deterministic for a given
/// model; `name()` identifies the model so that a store refuses vectors from another.
pub trait Embedder: Send + Sync {
    /// A stable identifier of the model (stored in the manifest).
    fn name(&self) -> &str;
    /// Length of every vector this embedder returns.
    fn dim(&self) -> usize;
    /// Embeds passages (documents) in one batch.
    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;
    /// Embeds one query.
    fn embed_query(&self, text: &str) -> Result<Vec<f32>>;
}
