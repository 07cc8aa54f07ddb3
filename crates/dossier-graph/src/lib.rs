//! Dossier's knowledge graph, compute only: entities and typed relations drawn from
//! document versions, chunks and record tables, each with its provenance; entity
//! resolution within a tenant; a principal's view of the graph; graph retrieval
//! (neighbourhoods, paths, personalised PageRank over entities and passages); and
//! hierarchical communities with extractive reports.
//!
//! How it fits: [`declared_versions`], [`declared_records`] and [`extract`] turn ingested
//! items into an [`Extraction`]; a [`TenantGraph`] collects them for one tenant and keeps
//! a [`Resolver`] (names, merge log); [`TenantGraph::view`] applies a reader's
//! `may_read` and yields the [`GraphView`] every query runs on. Persisting the graph
//! (dossier-store) and wiring it into search modes (dossier-engine) live elsewhere.
//!
//! Invariants:
//! - **Every edge carries provenance**: document, version, chunk and span where it came
//!   from text, and whether it was declared, extracted by a rule, or proposed by a model.
//! - **A relation is visible only through provenance the principal may read; an entity
//!   reachable only through invisible relations does not exist for them.** Names,
//!   aliases, kinds, paths, scores, communities and reports are all computed from the
//!   view, so nothing hidden leaks through a name, a count or a report.
//! - **Entities never merge across tenants**: a graph holds one tenant, refuses facts of
//!   another, and entity ids carry the tenant.
//! - **Every merge is explained and reversible**: the merge log keeps each merge's reason
//!   and provenance; `unmerge` reverses one; similar names are only candidates.
//!
//! This crate does no I/O and knows no storage format.
//!
//! ```
//! use dossier_graph::{EntityKind, Extraction, Mention, Provenance, Relation, Source, TenantGraph};
//!
//! let prov = |doc: &str| Provenance {
//!     tenant: "shop".into(),
//!     doc_id: doc.into(),
//!     version: "v1".into(),
//!     chunk_id: Some(format!("{doc}@v1#0")),
//!     span: None,
//!     source: Source::Extracted,
//! };
//! let mut g = TenantGraph::new("shop");
//! g.add(Extraction {
//!     relations: vec![Relation {
//!         from: Mention::new("P-1", EntityKind::Product),
//!         relation: "supplied_by".into(),
//!         to: Mention::new("S-1", EntityKind::Supplier),
//!         provenance: prov("notice"),
//!         evidence: None,
//!     }],
//!     ..Extraction::default()
//! })
//! .unwrap();
//! let everyone = g.view(&|_| true);
//! assert_eq!(everyone.edges().len(), 1);
//! let outsider = g.view(&|p| p.doc_id != "notice");
//! assert!(outsider.resolve("S-1").is_none());
//! ```

mod community;
mod declared;
mod extract;
mod graph;
mod link;
mod model;
mod resolve;
#[cfg(test)]
mod testing;
mod text;

pub use community::{Cited, Community, CommunityOptions, Report};
pub use declared::{declared_records, declared_versions};
pub use extract::extract;
pub use graph::{Edge, EdgeRef, Entity, GraphView, NodeRef, Subgraph, TenantGraph};
pub use link::TitleTable;
pub use model::{
    Alias, EntityId, EntityKind, Extraction, Mention, Provenance, Relation, Source, RECORDS_PREFIX,
};
pub use resolve::{Candidate, Merge, MergeId, Resolver};

/// What the graph refuses.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    /// A fact of another tenant was offered to a tenant's graph.
    #[error("tenant mismatch: graph of {expected:?} given a fact of {found:?}")]
    TenantMismatch { expected: String, found: String },
    #[error("unknown name {0:?}")]
    UnknownName(String),
    #[error("cannot merge {0:?} with itself")]
    SameName(String),
    #[error("unknown merge {0}")]
    UnknownMerge(u32),
    #[error("merge {0} is already reversed")]
    AlreadyReversed(u32),
}

/// `Result` with [`GraphError`].
pub type Result<T> = std::result::Result<T, GraphError>;
