//! The knowledge graph in the engine: one [`TenantGraph`] per tenant, built from the
//! catalog on first use and rebuilt when the catalog generation moves on (a commit or a
//! delete), so nothing derived from a removed source survives; the caller's view of it
//! (provenance the scope may read); the `local` and `graph` retrieval modes; and the
//! inspection calls behind `dossier graph`.
//!
//! Visibility: a document provenance is readable iff its document version is admitted by
//! the store's view for the scope (tenant, ACL, in force at `scope.at()`); a record-row
//! provenance iff the table's schema lets the principal read the row. Every query runs
//! on that view, and every hit is hydrated (checked again) like any other search.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use dossier_core::review::{Subject, Verdict};
use dossier_core::text::normalize;
use dossier_core::{Chunk, RecordRow, RecordSchema};
use dossier_graph::{
    declared_records, declared_versions, extract, EntityId, EntityKind, GraphView, Provenance,
    Source, Subgraph, TenantGraph, TitleTable,
};
use dossier_index::fusion::{rrf, DEFAULT_RRF_K};
use dossier_index::{Admit, Scored};
use dossier_store::Scope;
use serde::{Deserialize, Serialize};

use crate::global::{ReportJson, ReportSet};
use crate::{Engine, Error, Mode, Result};

/// PageRank damping and iterations of the graph modes.
const DAMPING: f32 = 0.85;
const ITERS: usize = 30;
/// Query entities kept as seeds (longest names first).
const MAX_SEEDS: usize = 8;
/// Hops of the neighbourhood `local` returns.
const LOCAL_HOPS: usize = 2;
/// How far DEPENDS_ON is followed from a hit.
const MAX_DEPENDS_ON_DEPTH: usize = 3;
/// The best hits whose named documents are second-hop candidates in `graph` mode.
/// A document a passage names, as [`Engine::documents_named_by`] gives it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NamedDocument {
    pub doc_id: String,
    /// The document's title, as the passage names it.
    pub title: String,
    /// The first passage (of those asked about) that names it.
    pub named_by: String,
}

const BRIDGE_FROM_HITS: usize = 5;
/// At most this many named documents are scored as second hops.
const MAX_BRIDGE_DOCS: usize = 64;
/// The weight of the second-hop list in `graph` mode's fusion (chosen on
/// hotpotqa-dev100 and musique-dev100; BENCHMARKS.md).
const BRIDGE_WEIGHT: f32 = 1.0;

/// Tenant graphs by tenant, each with the generation of its tenant it reflects. Each
/// tenant has its own slot, locked while its graph is built in a request: concurrent
/// requests of one tenant wait for the one build (single flight), and no tenant waits
/// for another's.
#[derive(Default)]
pub(crate) struct GraphCache {
    slots: Mutex<HashMap<String, Arc<GraphSlot>>>,
    /// Set where something calls [`Engine::refresh_graphs`] beside requests (the
    /// server's maintenance loop): a graph behind its tenant's documents then keeps
    /// answering, filtered against the current document view, while the next is built.
    serve_stale: AtomicBool,
    /// One background refresh at a time.
    refreshing: Mutex<()>,
    /// Graphs built inside a request (first use, or behind and not servable) and
    /// beside requests ([`Engine::refresh_graphs`]): what operators watch and tests pin.
    built_in_requests: AtomicU64,
    built_beside_requests: AtomicU64,
}

/// How many tenant graphs were built where (see [`Engine::graph_builds`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GraphBuilds {
    pub in_requests: u64,
    pub beside_requests: u64,
}

impl GraphCache {
    fn slot(&self, tenant: &str) -> Arc<GraphSlot> {
        self.slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(tenant.to_string())
            .or_default()
            .clone()
    }
}

/// One tenant's graph, once built.
type GraphSlot = Mutex<Option<Arc<TenantState>>>;

/// One tenant's graph and what queries need beside it.
pub(crate) struct TenantState {
    /// The tenant generation its documents, records and decisions were read at.
    generation: u64,
    /// The last generation that replaced one of the tenant's record tables, as of the
    /// build. A graph served after a later one filters its record facts against the
    /// tables as they are now ([`Engine::tables_now`]).
    records_generation: u64,
    pub(crate) graph: TenantGraph,
    /// chunk id → sequence number, and back to chunk id and document id.
    pub(crate) chunk_seq: HashMap<String, u64>,
    pub(crate) seq_chunk: HashMap<u64, (String, String)>,
    /// The versions of each document the graph read (to find a named document's
    /// versions in the document view without a walk over it).
    doc_versions: HashMap<String, BTreeSet<String>>,
    /// Record tables by name: schema and rows by key, as read for this graph.
    tables: Tables,
    /// The tenant's record tables as of a later records generation, read when this
    /// graph is served behind a record change (see [`Engine::tables_now`]).
    tables_now: Mutex<Option<(u64, Arc<Tables>)>>,
    /// Views already computed from this graph, by scope, each with the tenant
    /// generation whose document view it was filtered against: a view is reused only
    /// while that generation is current, so one computed before a delete or a
    /// restriction is never served after it, even from a graph built before it.
    views: Mutex<HashMap<ScopeKey, ScopedView>>,
    /// Community reports by view (keyed by the view's address; the view is kept alive).
    pub(crate) reports: Mutex<ReportCache>,
}

impl TenantState {
    /// `(doc_id, version)` of one of the graph's chunks.
    pub(crate) fn version_of_chunk<'a>(&'a self, chunk: &'a str) -> Option<(&'a str, &'a str)> {
        let seq = self.chunk_seq.get(chunk)?;
        let (_, doc) = self.seq_chunk.get(seq)?;
        let version = chunk.strip_prefix(doc.as_str())?.strip_prefix('@')?;
        Some((doc.as_str(), version.rsplit_once('#')?.0))
    }
}

/// A scope's view of a tenant graph.
struct ScopedView {
    /// The tenant generation of the document view it was filtered against.
    generation: u64,
    /// Whose view it is (kept so that a refresh can compute it again in advance).
    scope: Scope,
    view: Arc<GraphView>,
}

/// Record tables by name: schema and rows by key.
type Tables = HashMap<String, (RecordSchema, HashMap<String, RecordRow>)>;

pub(crate) type ReportCache = HashMap<usize, (Arc<GraphView>, Arc<ReportSet>)>;

/// What a view depends on beside the graph: principal (record owners), groups, date.
type ScopeKey = (String, dossier_store::ReaderKey, chrono::NaiveDate);

/// Distinct scopes whose views one tenant graph keeps.
const VIEW_CACHE_SIZE: usize = 256;

/// Scopes whose views (and reports) a background refresh computes before the new graph
/// replaces the old, so that their next request finds them ready.
const PREWARM_SCOPES: usize = 32;

/// A node as graph results show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GraphNode {
    /// The entity key within the tenant.
    pub id: String,
    pub name: String,
    pub kind: EntityKind,
}

/// An edge as graph results show it: ends by name, provenance as citations (chunk ids,
/// or `DOC@VERSION` for declared facts without a chunk).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GraphEdge {
    pub from: String,
    pub relation: String,
    pub to: String,
    pub provenance: Vec<String>,
}

/// `{"nodes": [...], "edges": [...]}`, always computed from the caller's view.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SubgraphJson {
    pub nodes: Vec<GraphNode>,
    pub edges: Vec<GraphEdge>,
}

/// An entity as `dossier graph entity` shows it, with its edges.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EntityReport {
    pub id: String,
    pub name: String,
    pub kind: EntityKind,
    pub aliases: Vec<String>,
    pub sources: Vec<String>,
    pub edges: Vec<GraphEdge>,
}

impl SubgraphJson {
    fn from_subgraph(view: &GraphView, s: &Subgraph) -> SubgraphJson {
        let name = |id: &EntityId| view.entity(id).map_or(id.key.clone(), |e| e.name.clone());
        SubgraphJson {
            nodes: s
                .nodes
                .iter()
                .map(|n| GraphNode {
                    id: n.id.key.clone(),
                    name: n.name.clone(),
                    kind: n.kind.clone(),
                })
                .collect(),
            edges: s
                .edges
                .iter()
                .map(|e| GraphEdge {
                    from: name(&e.from),
                    relation: e.relation.clone(),
                    to: name(&e.to),
                    provenance: e.provenance.clone(),
                })
                .collect(),
        }
    }

    /// Adds what `other` has that this one lacks.
    pub(crate) fn merge(&mut self, other: SubgraphJson) {
        for n in other.nodes {
            if !self.nodes.iter().any(|m| m.id == n.id) {
                self.nodes.push(n);
            }
        }
        for e in other.edges {
            if !self.edges.contains(&e) {
                self.edges.push(e);
            }
        }
    }

    /// GraphML (nodes keyed by entity key, edges by name of their ends' keys).
    pub fn to_graphml(&self) -> String {
        let by_name: HashMap<&str, &str> = self
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), n.id.as_str()))
            .collect();
        let id = |name: &str| by_name.get(name).copied().unwrap_or(name).to_string();
        let mut out = String::from(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <graphml xmlns=\"http://graphml.graphdrawing.org/xmlns\">\n\
             \x20 <key id=\"name\" for=\"node\" attr.name=\"name\" attr.type=\"string\"/>\n\
             \x20 <key id=\"kind\" for=\"node\" attr.name=\"kind\" attr.type=\"string\"/>\n\
             \x20 <key id=\"relation\" for=\"edge\" attr.name=\"relation\" attr.type=\"string\"/>\n\
             \x20 <key id=\"provenance\" for=\"edge\" attr.name=\"provenance\" attr.type=\"string\"/>\n\
             \x20 <graph id=\"G\" edgedefault=\"directed\">\n",
        );
        for n in &self.nodes {
            let kind = serde_json::to_value(&n.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| format!("{:?}", n.kind));
            let _ = writeln!(
                out,
                "    <node id=\"{}\"><data key=\"name\">{}</data><data key=\"kind\">{}</data></node>",
                xml(&n.id),
                xml(&n.name),
                xml(&kind)
            );
        }
        for e in &self.edges {
            let _ = writeln!(
                out,
                "    <edge source=\"{}\" target=\"{}\"><data key=\"relation\">{}</data><data key=\"provenance\">{}</data></edge>",
                xml(&id(&e.from)),
                xml(&id(&e.to)),
                xml(&e.relation),
                xml(&e.provenance.join(" "))
            );
        }
        out.push_str("  </graph>\n</graphml>\n");
        out
    }
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// What a graph-mode ranking found: the ranked chunks (with DEPENDS_ON expansions
/// appended) and the subgraph it used.
pub(crate) struct GraphRanked {
    pub ranked: Vec<Scored>,
    pub expansions: usize,
    pub subgraph: SubgraphJson,
    /// `global` and `drift`: the community reports drawn on.
    pub reports: Vec<ReportJson>,
}

impl Engine {
    /// The graph of `tenant` for a request. Built here when missing, or when behind its
    /// tenant and nothing refreshes graphs in the background; with a background refresh
    /// (the server's maintenance loop, [`Engine::serve_stale_graphs`]) a graph behind
    /// only by documents and decisions keeps answering until the next one is ready:
    /// every view of it is filtered against the current document view
    /// ([`Engine::scoped_graph`]), so a deleted or newly restricted source is not shown
    /// meanwhile; a new document's entities appear once the refresh lands. Record facts
    /// are likewise filtered against the tables as they are now: a row deleted, changed
    /// or no longer readable drops its facts at once.
    pub(crate) fn tenant_graph(&self, tenant: &str) -> Result<Arc<TenantState>> {
        self.tenant_graph_as(tenant, self.graphs.serve_stale.load(Ordering::Relaxed))
    }

    /// The graph of `tenant` as of the current generation, built now if behind (for
    /// review and administration, which must see what was just committed).
    pub(crate) fn current_graph(&self, tenant: &str) -> Result<Arc<TenantState>> {
        self.tenant_graph_as(tenant, false)
    }

    fn tenant_graph_as(&self, tenant: &str, allow_stale: bool) -> Result<Arc<TenantState>> {
        // Keyed by the tenant's own generation: a commit in another tenant leaves this
        // graph (and the views and reports hanging off it) alone.
        let snap = self.store.snapshot();
        let generation = snap.tenant_generation(tenant);
        drop(snap);
        let slot = self.graphs.slot(tenant);
        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = slot.as_ref() {
            if s.generation >= generation || allow_stale {
                return Ok(s.clone());
            }
        }
        let state = Arc::new(self.build_graph(tenant)?);
        self.graphs
            .built_in_requests
            .fetch_add(1, Ordering::Relaxed);
        *slot = Some(state.clone());
        Ok(state)
    }

    /// Tenant graphs built so far, inside requests and beside them.
    pub fn graph_builds(&self) -> GraphBuilds {
        GraphBuilds {
            in_requests: self.graphs.built_in_requests.load(Ordering::Relaxed),
            beside_requests: self.graphs.built_beside_requests.load(Ordering::Relaxed),
        }
    }

    /// Makes graph requests answer from a graph behind its tenant while
    /// [`Engine::refresh_graphs`], called beside requests, builds the next one. Off by
    /// default: an engine without such a caller builds on use.
    pub fn serve_stale_graphs(&self, on: bool) {
        self.graphs.serve_stale.store(on, Ordering::Relaxed);
    }

    /// Rebuilds every cached tenant graph that is behind its tenant, computing the
    /// views and reports of its recently used scopes on the new graph before it
    /// replaces the old one, so no request waits for any of it. One refresh at a time
    /// (returns 0 at once while another runs); returns the graphs replaced.
    pub fn refresh_graphs(&self) -> Result<usize> {
        let Ok(_refreshing) = self.graphs.refreshing.try_lock() else {
            return Ok(0);
        };
        let slots: Vec<(String, Arc<GraphSlot>)> = self
            .graphs
            .slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(t, s)| (t.clone(), s.clone()))
            .collect();
        let mut replaced = 0;
        for (tenant, slot) in slots {
            replaced += usize::from(self.refresh_slot(&tenant, &slot)?);
        }
        Ok(replaced)
    }

    /// Rebuilds `tenant`'s graph now if one is cached and behind (the writer's own
    /// refresh at the end of an ingest job, so that the job's end means its documents
    /// are in the graph). Returns whether it replaced one.
    pub fn refresh_graph(&self, tenant: &str) -> Result<bool> {
        let slot = self
            .graphs
            .slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(tenant)
            .cloned();
        match slot {
            Some(slot) => self.refresh_slot(tenant, &slot),
            None => Ok(false),
        }
    }

    fn refresh_slot(&self, tenant: &str, slot: &GraphSlot) -> Result<bool> {
        let Some(old) = slot.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
            return Ok(false);
        };
        if old.generation >= self.store.snapshot().tenant_generation(tenant) {
            return Ok(false);
        }
        let new = Arc::new(self.build_graph(tenant)?);
        self.graphs
            .built_beside_requests
            .fetch_add(1, Ordering::Relaxed);
        let warm: Vec<(Scope, bool)> = {
            let views = old.views.lock().unwrap_or_else(|e| e.into_inner());
            let reports = old.reports.lock().unwrap_or_else(|e| e.into_inner());
            views
                .values()
                .take(PREWARM_SCOPES)
                .map(|v| {
                    let had_reports = reports.contains_key(&(Arc::as_ptr(&v.view) as usize));
                    (v.scope.clone(), had_reports)
                })
                .collect()
        };
        for (scope, had_reports) in warm {
            let view = self.view_in(&new, &scope)?;
            if had_reports {
                self.view_reports(&new, &view)?;
            }
        }
        let mut current = slot.lock().unwrap_or_else(|e| e.into_inner());
        if current
            .as_ref()
            .is_none_or(|c| c.generation < new.generation)
        {
            *current = Some(new);
            return Ok(true);
        }
        Ok(false)
    }

    /// Reads one tenant's documents, chunks and record tables from the catalog and
    /// builds its graph. Retried while a commit lands in between, so the generation it
    /// is labelled with is the one it reflects.
    fn build_graph(&self, tenant: &str) -> Result<TenantState> {
        let catalog = self.store.catalog();
        loop {
            // The label is read before the content, so the content is never older than
            // the generation it is cached under.
            let snap = self.store.snapshot();
            let (label, records_label) = (
                snap.tenant_generation(tenant),
                snap.records_generation(tenant),
            );
            drop(snap);
            let before = catalog.generation()?;
            let entries: Vec<_> = catalog
                .documents()?
                .into_iter()
                .filter(|e| e.meta.tenant == tenant)
                .collect();
            let dvs: HashSet<u32> = entries.iter().map(|e| e.dv).collect();
            let seqs: Vec<u64> = entries.iter().flat_map(|e| e.seqs.clone()).collect();
            let mut chunks: Vec<Chunk> = Vec::with_capacity(seqs.len());
            let mut chunk_seq = HashMap::new();
            let mut seq_chunk = HashMap::new();
            let mut doc_versions: HashMap<String, BTreeSet<String>> = HashMap::new();
            catalog.for_each_chunk(Some(&seqs), &mut |c, _| {
                if c.chunk.tenant == tenant && dvs.contains(&c.dv) {
                    doc_versions
                        .entry(c.chunk.doc_id.clone())
                        .or_default()
                        .insert(c.chunk.version.clone());
                    chunk_seq.insert(c.chunk.chunk_id.clone(), c.seq);
                    seq_chunk.insert(c.seq, (c.chunk.chunk_id.clone(), c.chunk.doc_id.clone()));
                    chunks.push(c.chunk);
                }
                Ok(())
            })?;
            let tables = tenant_tables(catalog, tenant)?;
            if catalog.generation()? != before {
                continue;
            }
            let versions: Vec<_> = entries.into_iter().map(|e| e.meta).collect();
            let mut titles = TitleTable::new(&versions);
            titles.learn_aliases(&chunks);
            let mut graph = TenantGraph::new(tenant);
            graph.add(declared_versions(&versions))?;
            graph.add(extract(&chunks, &titles))?;
            for (schema, rows) in &tables {
                graph.add(declared_records(schema, rows))?;
            }
            let confidence: HashMap<String, f32> = catalog
                .model_candidates()?
                .into_iter()
                .map(|c| (c.id, c.confidence))
                .collect();
            let mut approved = dossier_graph::Extraction::default();
            for d in catalog.decisions()? {
                if d.tenant != tenant || d.verdict != Verdict::Approved {
                    continue;
                }
                // An approved model relation becomes an edge whose provenance is the
                // chunk it was read from (so it is visible exactly where that chunk is).
                if let Subject::Relation {
                    from,
                    relation,
                    to,
                    chunk_id,
                } = &d.subject
                {
                    let Some(chunk) = chunks.iter().find(|c| &c.chunk_id == chunk_id) else {
                        continue; // its source is gone
                    };
                    let mention = |n: &str| dossier_graph::Mention::new(n, EntityKind::Concept);
                    approved.relations.push(dossier_graph::Relation {
                        from: mention(from),
                        relation: relation.clone(),
                        to: mention(to),
                        provenance: Provenance {
                            tenant: tenant.to_string(),
                            doc_id: chunk.doc_id.clone(),
                            version: chunk.version.clone(),
                            chunk_id: Some(chunk_id.clone()),
                            span: None,
                            source: dossier_graph::Source::Model {
                                confidence: confidence.get(&d.id).copied().unwrap_or(0.0),
                            },
                        },
                        evidence: Some(format!("approved by {}: {}", d.by, d.note)),
                    });
                }
            }
            if !approved.is_empty() {
                graph.add(approved)?;
            }
            for d in catalog.decisions()? {
                if let (Subject::Merge { alias, canonical }, Verdict::Approved) =
                    (&d.subject, d.verdict)
                {
                    if d.tenant != tenant {
                        continue;
                    }
                    let reason = format!("approved in review {} by {}: {}", d.id, d.by, d.note);
                    // A name can be gone with a deleted source; then nothing is merged.
                    let _ = graph.resolver_mut().merge(alias, canonical, &reason);
                }
            }
            return Ok(TenantState {
                generation: label,
                records_generation: records_label,
                graph,
                chunk_seq,
                seq_chunk,
                doc_versions,
                tables: tables_by_name(tables),
                tables_now: Mutex::new(None),
                views: Mutex::new(HashMap::new()),
                reports: Mutex::new(HashMap::new()),
            });
        }
    }

    /// The scope's view of its tenant's graph: only facts whose provenance it may read.
    pub fn graph_view(&self, scope: &Scope) -> Result<Arc<GraphView>> {
        Ok(self.scoped_graph(scope)?.1)
    }

    /// The tenant graph and the scope's view of it.
    pub(crate) fn scoped_graph(&self, scope: &Scope) -> Result<(Arc<TenantState>, Arc<GraphView>)> {
        let state = self.tenant_graph(scope.tenant())?;
        let view = self.view_in(&state, scope)?;
        Ok((state, view))
    }

    /// The scope's view of `state`: only facts whose provenance it may read now. Cached
    /// by scope for as long as the tenant's generation stays the same; computed again
    /// against the current document view after a commit in the tenant, whatever
    /// generation `state` was built at.
    fn view_in(&self, state: &TenantState, scope: &Scope) -> Result<Arc<GraphView>> {
        let snap = self.store.snapshot();
        let docs = snap.view.clone();
        let current = snap.tenant_generation(scope.tenant());
        let records = snap.records_generation(scope.tenant());
        drop(snap);
        let key = (
            scope.principal_id().to_string(),
            scope.reader_key(),
            scope.at(),
        );
        let previous = match state
            .views
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            Some(v) if v.generation >= current => return Ok(v.view.clone()),
            Some(v) => Some(v.view.clone()),
            None => None,
        };
        let admitted = |doc_id: &str, version: &str| {
            docs.find(scope.tenant(), doc_id, version)
                .is_some_and(|i| docs.admits(i, scope))
        };
        let tables_now = self.tables_now(state, scope.tenant(), records)?;
        let may_read = |p: &Provenance| -> bool {
            if p.tenant != scope.tenant() {
                return false;
            }
            match p.record_table() {
                Some(t) => state.tables.get(t).is_some_and(|(schema, rows)| {
                    let Some(row) = rows.get(&p.version) else {
                        return false;
                    };
                    // A graph behind a record change shows a row's facts only while the
                    // row and its table's schema are as the graph read them: a row
                    // deleted or changed (owner, links) hides them until the refresh.
                    let unchanged = tables_now.as_ref().is_none_or(|now| {
                        now.get(t)
                            .is_some_and(|(s, rs)| s == schema && rs.get(&p.version) == Some(row))
                    });
                    unchanged
                        && schema.tenant == scope.tenant()
                        && schema.row_readable_by(row, scope.principal_id(), scope.groups())
                }),
                None => admitted(&p.doc_id, &p.version),
            }
        };
        let view = Arc::new(state.graph.view(&may_read));
        // The same graph seen by the same scope before this commit: its reports still
        // stand if every source they quote is admitted now and every community member
        // is still in the view (a commit that only adds documents, which the graph does
        // not hold yet, changes neither).
        if let Some(previous) = previous {
            let mut reports = state.reports.lock().unwrap_or_else(|e| e.into_inner());
            let kept = reports
                .get(&(Arc::as_ptr(&previous) as usize))
                .map(|(_, set)| set.clone())
                .filter(|set| {
                    set.still_holds(&view, &|chunk| {
                        state
                            .version_of_chunk(chunk)
                            .is_some_and(|(doc, version)| admitted(doc, version))
                    })
                });
            if let Some(set) = kept {
                reports.insert(Arc::as_ptr(&view) as usize, (view.clone(), set));
            }
        }
        {
            let mut views = state.views.lock().unwrap_or_else(|e| e.into_inner());
            if views.len() >= VIEW_CACHE_SIZE {
                views.clear();
            }
            views.insert(
                key,
                ScopedView {
                    generation: current,
                    scope: scope.clone(),
                    view: view.clone(),
                },
            );
        }
        Ok(view)
    }

    /// The tenant's record tables as of `records` (its current records generation) when
    /// `state` was read before it; `None` when `state`'s own tables are current. Read
    /// once per records generation and graph.
    fn tables_now(
        &self,
        state: &TenantState,
        tenant: &str,
        records: u64,
    ) -> Result<Option<Arc<Tables>>> {
        if state.records_generation >= records {
            return Ok(None);
        }
        let mut cached = state.tables_now.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((g, t)) = cached.as_ref() {
            if *g >= records {
                return Ok(Some(t.clone()));
            }
        }
        // Read after `records` was: what is read is at least that current.
        let tables = Arc::new(tables_by_name(tenant_tables(self.store.catalog(), tenant)?));
        *cached = Some((records, tables.clone()));
        Ok(Some(tables))
    }

    /// Ranks for the `local` and `graph` modes.
    pub(crate) fn graph_rank(
        &self,
        scope: &Scope,
        query: &str,
        mode: Mode,
        k: usize,
        cancel: &dossier_core::cancel::Cancel,
    ) -> Result<GraphRanked> {
        let (state, view) = self.scoped_graph(scope)?;
        crate::search::cancelled(cancel)?;
        let seeds = query_entities(&view, query);
        // Counts only: entity names can be another reader's text.
        tracing::Span::current().record("graph.seed_entities", seeds.len());
        let depth = (k * 4).max(40);
        let hybrid = self.rank_until(scope, query, Mode::Hybrid, depth, cancel)?;
        crate::search::cancelled(cancel)?;
        let hybrid_chunks: Vec<&str> = hybrid
            .iter()
            .filter_map(|s| state.seq_chunk.get(&s.seq).map(|(c, _)| c.as_str()))
            .collect();
        let to_scored = |scores: &[(String, f32)]| -> Vec<Scored> {
            scores
                .iter()
                .filter_map(|(c, s)| {
                    Some(Scored {
                        seq: *state.chunk_seq.get(c)?,
                        score: *s,
                    })
                })
                .collect()
        };
        let mut subgraph = SubgraphJson::default();
        let mut reports = Vec::new();
        let local = |subgraph: &mut SubgraphJson| -> Vec<Scored> {
            // Seeds: entities named in the query; failing that, the entities the best
            // lexical/dense passages mention, with those passages.
            let (entity_seeds, chunk_seeds, hops) = if seeds.is_empty() {
                let top: HashSet<&str> = hybrid_chunks.iter().take(3).copied().collect();
                let ents: Vec<EntityId> = view
                    .entities()
                    .iter()
                    .filter(|e| e.kind != EntityKind::Version)
                    .filter(|e| e.sources.iter().any(|s| top.contains(s.as_str())))
                    .map(|e| e.id.clone())
                    .collect();
                let cs: Vec<(String, f32)> = top.iter().map(|c| (c.to_string(), 1.0)).collect();
                (ents, cs, 1)
            } else {
                (seeds.clone(), vec![], LOCAL_HOPS)
            };
            for id in &entity_seeds {
                subgraph.merge(SubgraphJson::from_subgraph(
                    &view,
                    &view.neighbors(id, hops, None),
                ));
            }
            let mut candidates: HashSet<String> = subgraph
                .edges
                .iter()
                .flat_map(|e| e.provenance.iter().cloned())
                .collect();
            candidates.extend(chunk_seeds.iter().map(|(c, _)| c.clone()));
            for id in &entity_seeds {
                candidates.extend(view.chunks_of(id).into_iter().map(str::to_string));
            }
            let weighted: Vec<(EntityId, f32)> =
                entity_seeds.iter().map(|e| (e.clone(), 1.0)).collect();
            let mut scores = view.chunk_scores(&weighted, &chunk_seeds, DAMPING, ITERS);
            scores.retain(|(c, _)| candidates.contains(c));
            let mut out = to_scored(&scores);
            out.truncate(k);
            out
        };
        let ranked = match mode {
            Mode::Local => local(&mut subgraph),
            Mode::Global | Mode::Drift => {
                let r = self.report_rank(&state, &view, query, mode, &hybrid_chunks, k)?;
                reports = r.reports;
                subgraph.merge(subgraph_among(&view, &|id| r.entities.contains(id)));
                if mode == Mode::Global {
                    // No report touches the query: the hybrid hits, rather than nothing.
                    let mut out = if r.ranked.is_empty() {
                        hybrid.clone()
                    } else {
                        r.ranked
                    };
                    out.truncate(k);
                    out
                } else {
                    let l = local(&mut subgraph);
                    rrf(
                        &[(&l, 1.0), (&r.ranked, 1.0), (&hybrid, 1.0)],
                        DEFAULT_RRF_K,
                        k,
                    )
                }
            }
            Mode::Graph | Mode::Bm25 | Mode::Vector | Mode::Hybrid => {
                for id in &seeds {
                    subgraph.merge(SubgraphJson::from_subgraph(
                        &view,
                        &view.neighbors(id, LOCAL_HOPS, None),
                    ));
                }
                // Hits by reciprocal rank, all of them together weighing one unit.
                let total: f32 = (1..=hybrid_chunks.len()).map(|i| 1.0 / i as f32).sum();
                let chunk_seeds: Vec<(String, f32)> = hybrid_chunks
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (c.to_string(), 1.0 / ((i + 1) as f32 * total.max(1.0))))
                    .collect();
                let per_entity = 1.0 / seeds.len().max(1) as f32;
                let weighted: Vec<(EntityId, f32)> =
                    seeds.iter().map(|e| (e.clone(), per_entity)).collect();
                let mut ppr =
                    to_scored(&view.chunk_scores(&weighted, &chunk_seeds, DAMPING, ITERS));
                ppr.truncate(depth);
                let bridges =
                    self.bridge_rank(scope, &state, &view, query, &hybrid_chunks, &seeds, cancel)?;
                tracing::Span::current().record("graph.bridges", bridges.len());
                let mut fused = rrf(
                    &[(&hybrid, 1.0), (&ppr, 1.0), (&bridges, BRIDGE_WEIGHT)],
                    DEFAULT_RRF_K,
                    k,
                );
                // A second hop is reached from the first: the passage that leads the
                // one-hop ranking keeps the lead.
                let lead = rrf(&[(&hybrid, 1.0), (&ppr, 1.0)], DEFAULT_RRF_K, 1);
                if let Some(first) = lead.first() {
                    if let Some(at) = fused.iter().position(|s| s.seq == first.seq) {
                        let lead = fused.remove(at);
                        fused.insert(0, lead);
                    } else if !bridges.is_empty() {
                        fused.insert(0, *first);
                        fused.truncate(k);
                    }
                    // Scores stay in rank order for whatever sorts by them later.
                    if let [a, b, ..] = fused.as_mut_slice() {
                        a.score = a.score.max(b.score + f32::EPSILON);
                    }
                }
                fused
            }
        };
        let expansion = self.depends_on_expansion(scope, &state, &view, query, &ranked)?;
        let expansions = expansion.len();
        let mut ranked = ranked;
        ranked.extend(expansion);
        Ok(GraphRanked {
            ranked,
            expansions,
            subgraph,
            reports,
        })
    }

    /// Second hops: the documents the best hits name (their `mentions_document` edges,
    /// which the scope's view holds only where it may read the naming text) and the
    /// documents the question names, ranked against the question — BM25 and dense, fused
    /// — within those documents' versions the scope admits, and nothing else. A bridge
    /// passage ("the director of film X" → the director's own passage) enters the
    /// fusion on its own score, not as a neighbour of a hit.
    #[allow(clippy::too_many_arguments)]
    fn bridge_rank(
        &self,
        scope: &Scope,
        state: &TenantState,
        view: &GraphView,
        query: &str,
        hybrid_chunks: &[&str],
        seeds: &[EntityId],
        cancel: &dossier_core::cancel::Cancel,
    ) -> Result<Vec<Scored>> {
        let from: HashSet<&str> = hybrid_chunks
            .iter()
            .take(BRIDGE_FROM_HITS)
            .copied()
            .collect();
        let hit_docs: HashSet<&str> = from
            .iter()
            .filter_map(|c| {
                let seq = state.chunk_seq.get(*c)?;
                state.seq_chunk.get(seq).map(|(_, d)| d.as_str())
            })
            .collect();
        let mut named: Vec<&str> = Vec::new();
        fn add<'a>(
            state: &'a TenantState,
            hit_docs: &HashSet<&str>,
            d: &str,
            named: &mut Vec<&'a str>,
        ) {
            if let Some((doc, _)) = state.doc_versions.get_key_value(d) {
                if !hit_docs.contains(doc.as_str()) && !named.contains(&doc.as_str()) {
                    named.push(doc.as_str());
                }
            }
        }
        for s in seeds {
            if let Some(d) = s.key.strip_prefix("doc:") {
                add(state, &hit_docs, d, &mut named);
            }
        }
        // The hits' links, the most specific first (a whole title before a name that
        // had to be told apart from others), when there are more than fit.
        let mut linked: Vec<(f32, &str)> = Vec::new();
        for e in view.edges() {
            if e.relation != "mentions_document" {
                continue;
            }
            let specificity = e
                .provenance
                .iter()
                .filter(|p| p.chunk_id.as_deref().is_some_and(|c| from.contains(c)))
                .map(|p| match p.source {
                    Source::Linked { specificity } => specificity,
                    _ => 1.0,
                })
                .reduce(f32::max);
            if let (Some(s), Some(d)) = (specificity, e.to.key.strip_prefix("doc:")) {
                linked.push((s, d));
            }
        }
        linked.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (_, d) in linked {
            if named.len() >= MAX_BRIDGE_DOCS {
                break;
            }
            add(state, &hit_docs, d, &mut named);
        }
        named.truncate(MAX_BRIDGE_DOCS);
        if named.is_empty() {
            return Ok(vec![]);
        }
        let snap = self.store.snapshot();
        let admitted = snap.view.admit(scope);
        let mut dvs = Vec::new();
        for doc in named {
            for version in state.doc_versions.get(doc).into_iter().flatten() {
                if let Some(i) = snap.view.find(scope.tenant(), doc, version) {
                    let dv = snap.view.entry(i).dv;
                    if admitted.contains(dv) {
                        dvs.push(dv);
                    }
                }
            }
        }
        if dvs.is_empty() {
            return Ok(vec![]);
        }
        let within = Admit::from_ordinals(dvs);
        self.rank_in(
            &snap,
            scope,
            cancel,
            query,
            Mode::Hybrid,
            BRIDGE_FROM_HITS * 2,
            &within,
        )
    }

    /// The documents the passages `chunks` name — `mentions_document` edges of the
    /// scope's own view, so only from passages it may read — that the scope may read
    /// too (some version admitted), each with its title and the first passage naming
    /// it, in the order of `chunks`. A document the scope may not read is left out
    /// exactly as one that does not exist: its id never reaches the caller.
    pub fn documents_named_by(&self, scope: &Scope, chunks: &[&str]) -> Result<Vec<NamedDocument>> {
        let (state, view) = self.scoped_graph(scope)?;
        let order: HashMap<&str, usize> = chunks.iter().enumerate().map(|(i, c)| (*c, i)).collect();
        let mut found: Vec<(usize, NamedDocument)> = Vec::new();
        for e in view.edges() {
            if e.relation != "mentions_document" {
                continue;
            }
            let Some(doc) = e.to.key.strip_prefix("doc:") else {
                continue;
            };
            let Some((rank, by)) = e
                .provenance
                .iter()
                .filter_map(|p| p.chunk_id.as_deref())
                .filter_map(|c| order.get(c).map(|&i| (i, c)))
                .min()
            else {
                continue;
            };
            match found.iter_mut().find(|(_, n)| n.doc_id == doc) {
                Some((r, n)) if rank < *r => {
                    *r = rank;
                    n.named_by = by.to_string();
                }
                Some(_) => {}
                None => found.push((
                    rank,
                    NamedDocument {
                        doc_id: doc.to_string(),
                        title: String::new(),
                        named_by: by.to_string(),
                    },
                )),
            }
        }
        let snap = self.store.snapshot();
        let admitted = snap.view.admit(scope);
        // Only what the scope may read, titled as its admitted version is.
        found.retain_mut(|(_, n)| {
            let title = state
                .doc_versions
                .get(&n.doc_id)
                .into_iter()
                .flatten()
                .filter_map(|v| snap.view.find(scope.tenant(), &n.doc_id, v))
                .map(|i| snap.view.entry(i))
                .find(|e| admitted.contains(e.dv))
                .map(|e| e.meta.title.clone());
            match title {
                Some(t) => {
                    n.title = t;
                    true
                }
                None => false,
            }
        });
        found.sort_by_key(|(r, _)| *r);
        Ok(found.into_iter().map(|(_, n)| n).collect())
    }

    /// For every hit document that `depends_on` another (through an edge the scope may
    /// read; transitively, up to [`MAX_DEPENDS_ON_DEPTH`]), the best chunk of each
    /// version of that document in force and visible to the scope, unless a hit already
    /// comes from that document.
    fn depends_on_expansion(
        &self,
        scope: &Scope,
        state: &TenantState,
        view: &GraphView,
        query: &str,
        ranked: &[Scored],
    ) -> Result<Vec<Scored>> {
        let docs = self.store.view();
        let mut hit_docs: Vec<&str> = Vec::new();
        for s in ranked {
            if let Some((_, d)) = state.seq_chunk.get(&s.seq) {
                if !hit_docs.contains(&d.as_str()) {
                    hit_docs.push(d);
                }
            }
        }
        // Readable `depends_on` edges between documents, followed transitively (a rule
        // the dependency itself relies on comes too), a few levels deep.
        let mut edges: HashMap<&str, Vec<&str>> = HashMap::new();
        for e in view.edges().iter().filter(|e| e.relation == "depends_on") {
            if let (Some(a), Some(b)) = (
                e.from.key.strip_prefix("doc:"),
                e.to.key.strip_prefix("doc:"),
            ) {
                edges.entry(a).or_default().push(b);
            }
        }
        let mut seen: HashSet<&str> = hit_docs.iter().copied().collect();
        let mut deps: Vec<&str> = Vec::new();
        let mut frontier = hit_docs.clone();
        for _ in 0..MAX_DEPENDS_ON_DEPTH {
            let mut next = Vec::new();
            for d in &frontier {
                for &dep in edges.get(d).into_iter().flatten() {
                    if seen.insert(dep) {
                        next.push(dep);
                    }
                }
            }
            deps.extend(&next);
            frontier = next;
        }
        let floor = ranked.last().map_or(0.0, |s| s.score * 0.5);
        let generation = self.store.active();
        let mut out = Vec::new();
        for dep in deps {
            let versions: Vec<usize> = docs
                .visible_versions(dep, scope)
                .filter(|&i| docs.entry(i).meta.tenant == scope.tenant())
                .collect();
            for i in versions {
                let entry = &docs.entry(i);
                let admit = Admit::from_ordinals([entry.dv]);
                let best = generation
                    .bm25
                    .search(query, 1, &admit)?
                    .into_iter()
                    .next()
                    .map(|s| s.seq)
                    .or_else(|| entry.seqs.first().copied());
                if let Some(seq) = best {
                    out.push(Scored { seq, score: floor });
                }
            }
        }
        Ok(out)
    }

    fn entity_id(&self, view: &GraphView, name: &str) -> Result<EntityId> {
        view.resolve(name)
            .ok_or_else(|| Error::NotFound(format!("no entity {name}")))
    }

    /// An entity the scope can see, with its edges; unknown and invisible read the same.
    pub fn graph_entity(&self, scope: &Scope, name: &str) -> Result<EntityReport> {
        let view = self.graph_view(scope)?;
        let id = self.entity_id(&view, name)?;
        let e = view
            .entity(&id)
            .ok_or_else(|| Error::NotFound(format!("no entity {name}")))?;
        let sub = SubgraphJson::from_subgraph(&view, &view.neighbors(&id, 1, None));
        Ok(EntityReport {
            id: id.key.clone(),
            name: e.name.clone(),
            kind: e.kind.clone(),
            aliases: e.aliases.clone(),
            sources: e.sources.clone(),
            edges: sub.edges,
        })
    }

    /// The neighbourhood of an entity within `hops` edges.
    pub fn graph_neighbors(&self, scope: &Scope, name: &str, hops: usize) -> Result<SubgraphJson> {
        let view = self.graph_view(scope)?;
        let id = self.entity_id(&view, name)?;
        Ok(SubgraphJson::from_subgraph(
            &view,
            &view.neighbors(&id, hops, None),
        ))
    }

    /// A shortest chain of visible edges from `a` to `b` (at most `max_hops`); `None`
    /// when there is none.
    pub fn graph_path(
        &self,
        scope: &Scope,
        a: &str,
        b: &str,
        max_hops: usize,
    ) -> Result<Option<Vec<GraphEdge>>> {
        let view = self.graph_view(scope)?;
        let (ia, ib) = (self.entity_id(&view, a)?, self.entity_id(&view, b)?);
        let name = |id: &EntityId| view.entity(id).map_or(id.key.clone(), |e| e.name.clone());
        Ok(view.path(&ia, &ib, max_hops).map(|p| {
            p.iter()
                .map(|e| GraphEdge {
                    from: name(&e.from),
                    relation: e.relation.clone(),
                    to: name(&e.to),
                    provenance: e.provenance.clone(),
                })
                .collect()
        }))
    }

    /// The evidence subgraph of an answer: the edges of the scope's view with
    /// provenance among `cites` (chunk ids, or `DOC@VERSION` for facts without a chunk)
    /// and the entities they join.
    pub fn evidence_subgraph(&self, scope: &Scope, cites: &[String]) -> Result<SubgraphJson> {
        let view = self.graph_view(scope)?;
        let wanted: BTreeSet<&str> = cites.iter().map(String::as_str).collect();
        let mut keep: BTreeSet<&EntityId> = BTreeSet::new();
        let mut edges = Vec::new();
        let name = |id: &EntityId| view.entity(id).map_or(id.key.clone(), |e| e.name.clone());
        for e in view.edges() {
            let cited: BTreeSet<String> = e
                .provenance
                .iter()
                .map(Provenance::cite)
                .filter(|c| wanted.contains(c.as_str()))
                .collect();
            if cited.is_empty() {
                continue;
            }
            keep.insert(&e.from);
            keep.insert(&e.to);
            edges.push(GraphEdge {
                from: name(&e.from),
                relation: e.relation.clone(),
                to: name(&e.to),
                provenance: cited.into_iter().collect(),
            });
        }
        let nodes = view
            .entities()
            .iter()
            .filter(|e| keep.contains(&e.id))
            .map(|e| GraphNode {
                id: e.id.key.clone(),
                name: e.name.clone(),
                kind: e.kind.clone(),
            })
            .collect();
        Ok(SubgraphJson { nodes, edges })
    }

    /// The whole graph as the scope sees it.
    pub fn graph_export(&self, scope: &Scope) -> Result<SubgraphJson> {
        let view = self.graph_view(scope)?;
        Ok(subgraph_among(&view, &|_| true))
    }
}

/// The entities of `view` that `keep` accepts and the edges between them, with each
/// edge's provenance as citations.
pub(crate) fn subgraph_among(view: &GraphView, keep: &dyn Fn(&EntityId) -> bool) -> SubgraphJson {
    let names: BTreeMap<&EntityId, &str> = view
        .entities()
        .iter()
        .filter(|e| keep(&e.id))
        .map(|e| (&e.id, e.name.as_str()))
        .collect();
    let nodes = view
        .entities()
        .iter()
        .filter(|e| names.contains_key(&e.id))
        .map(|e| GraphNode {
            id: e.id.key.clone(),
            name: e.name.clone(),
            kind: e.kind.clone(),
        })
        .collect();
    let edges = view
        .edges()
        .iter()
        .filter_map(|e| {
            let (from, to) = (names.get(&e.from)?, names.get(&e.to)?);
            let cites: BTreeSet<String> = e.provenance.iter().map(Provenance::cite).collect();
            Some(GraphEdge {
                from: from.to_string(),
                relation: e.relation.clone(),
                to: to.to_string(),
                provenance: cites.into_iter().collect(),
            })
        })
        .collect();
    SubgraphJson { nodes, edges }
}

/// Entities of the view named in the query (name or alias, normalised; names with an
/// ASCII end only where the query has a word boundary there), longest name first.
pub(crate) fn query_entities(view: &Arc<GraphView>, query: &str) -> Vec<EntityId> {
    let q = NormalizedQuery::new(query);
    let index = NameIndex::of(view);
    let mut best: HashMap<&EntityId, usize> = HashMap::new();
    for (at, _) in q.text.char_indices() {
        for &len in &index.lengths {
            let end = at + len;
            if end > q.text.len() {
                break;
            }
            if !q.text.is_char_boundary(end) {
                continue;
            }
            let needle = &q.text[at..end];
            let Some(ids) = index.by_name.get(needle) else {
                continue;
            };
            if q.occurs_at(at, needle) {
                let chars = needle.chars().count();
                for id in ids {
                    let b = best.entry(id).or_default();
                    *b = (*b).max(chars);
                }
            }
        }
    }
    let mut found: Vec<(usize, EntityId)> =
        best.into_iter().map(|(id, l)| (l, id.clone())).collect();
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    found.truncate(MAX_SEEDS);
    found.into_iter().map(|(_, id)| id).collect()
}

/// A view's entity names (and aliases), normalised, for finding them in a query by
/// looking up its substrings instead of scanning every entity.
struct NameIndex {
    by_name: HashMap<String, Vec<EntityId>>,
    /// Byte lengths of the names, ascending.
    lengths: Vec<usize>,
}

/// Name indexes of live views (a dead view's entry is dropped on the next lookup).
type NameIndexCache = Vec<(std::sync::Weak<GraphView>, Arc<NameIndex>)>;
static NAME_INDEXES: Mutex<NameIndexCache> = Mutex::new(Vec::new());

impl NameIndex {
    fn of(view: &Arc<GraphView>) -> Arc<NameIndex> {
        let mut cache = NAME_INDEXES.lock().unwrap_or_else(|e| e.into_inner());
        cache.retain(|(w, _)| w.strong_count() > 0);
        if let Some((_, ix)) = cache
            .iter()
            .find(|(w, _)| std::ptr::eq(w.as_ptr(), Arc::as_ptr(view)))
        {
            return ix.clone();
        }
        let mut by_name: HashMap<String, Vec<EntityId>> = HashMap::new();
        for e in view
            .entities()
            .iter()
            .filter(|e| e.kind != EntityKind::Version)
        {
            for n in std::iter::once(&e.name).chain(&e.aliases) {
                let n = normalize(n);
                if n.chars().count() >= 2 {
                    let ids = by_name.entry(n).or_default();
                    if !ids.contains(&e.id) {
                        ids.push(e.id.clone());
                    }
                }
            }
        }
        let lengths: BTreeSet<usize> = by_name.keys().map(String::len).collect();
        let ix = Arc::new(NameIndex {
            by_name,
            lengths: lengths.into_iter().collect(),
        });
        cache.push((Arc::downgrade(view), ix.clone()));
        ix
    }
}

/// A query normalised like names are, remembering where the original had a break
/// (whitespace or punctuation, which normalisation drops).
struct NormalizedQuery {
    text: String,
    /// Byte offsets in `text` with a break (or the start) before them.
    breaks: HashSet<usize>,
}

impl NormalizedQuery {
    fn new(query: &str) -> NormalizedQuery {
        let mut text = String::new();
        let mut breaks = HashSet::from([0]);
        let mut buf = [0u8; 4];
        for c in query.chars() {
            let n = normalize(c.encode_utf8(&mut buf));
            if n.is_empty() {
                breaks.insert(text.len());
            }
            text.push_str(&n);
        }
        breaks.insert(text.len());
        NormalizedQuery { text, breaks }
    }

    /// Whether `needle` (normalised) occurs without an ASCII letter or digit glued to
    /// an ASCII end of it (so `e1` is not found in `e10`, but is in `e-1` or `事件e1`).
    #[cfg(test)]
    fn occurs(&self, needle: &str) -> bool {
        self.text
            .match_indices(needle)
            .any(|(i, _)| self.occurs_at(i, needle))
    }

    /// Whether `needle`, found at byte `i`, stands there as a word (see `occurs`).
    fn occurs_at(&self, i: usize, needle: &str) -> bool {
        let ascii = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
        let hay = &self.text;
        let j = i + needle.len();
        let glued_before = !self.breaks.contains(&i)
            && ascii(needle.chars().next())
            && ascii(hay[..i].chars().next_back());
        let glued_after = !self.breaks.contains(&j)
            && ascii(needle.chars().next_back())
            && ascii(hay[j..].chars().next());
        !glued_before && !glued_after
    }
}

/// `tenant`'s record tables as the catalog holds them now.
fn tenant_tables(
    catalog: &dyn dossier_store::CatalogBackend,
    tenant: &str,
) -> Result<Vec<(RecordSchema, Vec<RecordRow>)>> {
    Ok(catalog
        .record_tables()?
        .into_iter()
        .filter(|(s, _)| s.tenant == tenant)
        .collect())
}

fn tables_by_name(tables: Vec<(RecordSchema, Vec<RecordRow>)>) -> Tables {
    tables
        .into_iter()
        .map(|(s, rows)| {
            let rows = rows.into_iter().map(|r| (r.key.clone(), r)).collect();
            (s.table.clone(), (s, rows))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tenant whose graph is being built holds only its own slot: another tenant's
    /// graph is built meanwhile, and the same tenant's next request waits for the build.
    #[test]
    fn a_graph_build_blocks_only_its_own_tenant() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Arc::new(
            Engine::with_embedder(
                dir.path(),
                "hash:16",
                Box::new(dossier_embed::HashEmbedder::new(16)),
            )
            .unwrap(),
        );
        // Tenant a's slot, held as a build would hold it.
        let slot = engine
            .graphs
            .slots
            .lock()
            .unwrap()
            .entry("a".into())
            .or_default()
            .clone();
        let building = slot.lock().unwrap();
        let run = |tenant: &'static str| {
            let (e, (tx, rx)) = (engine.clone(), std::sync::mpsc::channel());
            std::thread::spawn(move || tx.send(e.tenant_graph(tenant).is_ok()).unwrap());
            rx
        };
        let (same, other) = (run("a"), run("b"));
        assert_eq!(
            other.recv_timeout(std::time::Duration::from_secs(60)),
            Ok(true),
            "tenant b waited for tenant a's build"
        );
        assert!(
            same.recv_timeout(std::time::Duration::from_millis(200))
                .is_err(),
            "tenant a built twice at once"
        );
        drop(building);
        assert_eq!(
            same.recv_timeout(std::time::Duration::from_secs(60)),
            Ok(true)
        );
    }

    #[test]
    fn identifiers_match_only_at_word_boundaries() {
        let occurs = |q: &str, n: &str| NormalizedQuery::new(q).occurs(n);
        assert!(occurs("哪些产品受到供应商事件 E-1 影响？", "e1"));
        assert!(occurs("事件E-1影响", "e1"));
        assert!(!occurs("事件 E-10 影响", "e1"));
        assert!(!occurs("type E1", "pee1"));
        assert!(!occurs("typeE1", "e1"));
        assert!(occurs("pay-gw 依赖哪些服务？", "paygw"));
        assert!(occurs("what does pay-gw depend on?", "paygw"));
        assert!(occurs("what does ＰＡＹ－ＧＷ depend on?", "paygw"));
        assert!(!occurs("what does pay-gwx depend on?", "paygw"));
        assert!(occurs("支付网关超时", "支付网关"));
    }

    #[test]
    fn graphml_escapes_and_links_by_id() {
        let s = SubgraphJson {
            nodes: vec![
                GraphNode {
                    id: "a".into(),
                    name: "A<&>".into(),
                    kind: EntityKind::Product,
                },
                GraphNode {
                    id: "b".into(),
                    name: "B".into(),
                    kind: EntityKind::Supplier,
                },
            ],
            edges: vec![GraphEdge {
                from: "A<&>".into(),
                relation: "supplied_by".into(),
                to: "B".into(),
                provenance: vec!["doc@1#0".into()],
            }],
        };
        let g = s.to_graphml();
        assert!(g.contains("A&lt;&amp;&gt;"));
        assert!(g.contains("<edge source=\"a\" target=\"b\">"));
        assert!(g.contains("<data key=\"kind\">product</data>"));
    }
}
