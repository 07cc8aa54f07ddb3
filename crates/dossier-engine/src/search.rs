//! Scoped search: the admission set goes into every index, hydration checks again.

use std::collections::{HashMap, HashSet};

use chrono::NaiveDate;
use dossier_core::cancel::Cancel;
use dossier_core::{Embedder, VersionRef};
use dossier_index::fusion::{convex, rrf, DEFAULT_RRF_K};
use dossier_index::{Admit, Scored};
use dossier_store::Scope;
use dossier_store::{DocsView, Snapshot};
use serde::{Deserialize, Serialize};

use crate::global::ReportJson;
use crate::graph::SubgraphJson;
use crate::{scripts, Engine, Error, Result};

/// Dense hits a vector or hybrid ranking reads before putting the other script's on the
/// question script's scale (`scripts`).
const SCRIPT_DEPTH: usize = 80;

/// Retrieval mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Bm25,
    Vector,
    Hybrid,
    /// Entities named in the query → their 1–2 hop neighbourhood in the caller's graph
    /// view → the chunks that support its edges, ranked by personalised PageRank.
    Local,
    /// Hybrid results fused (RRF) with personalised PageRank over the entity–passage
    /// graph, seeded by query entities and the hybrid hits.
    Graph,
    /// Community reports ranked against the query, map-reduced into their source
    /// chunks; the reports come with the hits.
    Global,
    /// `local` fused with community context (the reports of the communities holding
    /// the query's entities) and hybrid hits.
    Drift,
}

impl Mode {
    /// The retrieval basics (what `eval --mode all` runs).
    pub const ALL: [Mode; 3] = [Mode::Bm25, Mode::Vector, Mode::Hybrid];
    /// The modes that run on the knowledge graph.
    pub const GRAPH_MODES: [Mode; 4] = [Mode::Local, Mode::Graph, Mode::Global, Mode::Drift];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Bm25 => "bm25",
            Mode::Vector => "vector",
            Mode::Hybrid => "hybrid",
            Mode::Local => "local",
            Mode::Graph => "graph",
            Mode::Global => "global",
            Mode::Drift => "drift",
        }
    }

    pub fn is_graph(self) -> bool {
        Mode::GRAPH_MODES.contains(&self)
    }
}

impl std::str::FromStr for Mode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Mode> {
        Mode::ALL
            .into_iter()
            .chain(Mode::GRAPH_MODES)
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "unknown mode {s:?}: expected bm25, vector, hybrid, local, graph, global or drift"
                ))
            })
    }
}

/// A search as a caller asks it.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    pub principal: String,
    pub query: String,
    pub mode: Mode,
    pub k: usize,
    /// The business clock; versions in force on this date are searched.
    pub now: NaiveDate,
    /// Search the versions in force on this date instead.
    pub as_of: Option<NaiveDate>,
    /// Only documents of these knowledge bases (within the principal's own); empty: all
    /// the principal may read.
    pub kbs: Vec<String>,
}

/// The engine's word that a hit was checked against the caller's scope (tenant, ACL,
/// version in force) at hydration. It has no public constructor and no `Default` or
/// `Deserialize`, so a [`Hit`] — and whatever downstream types demand one — exists only
/// where [`Engine::hydrate`] made it: nothing else can hand text to an answer writer,
/// a trace, a cache or a response.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked(());

/// One hit, in the JSON shape the CLI and API print. Built only by the engine's
/// hydration (see [`Checked`]).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Hit {
    pub chunk_id: String,
    pub doc_id: String,
    pub version: String,
    pub section: String,
    pub section_path: Vec<String>,
    pub score: f32,
    pub text: String,
    pub source_uri: String,
    pub title: String,
    #[serde(skip)]
    checked: Checked,
}

impl Hit {
    /// The proof of the check, for types that may only be built from checked hits.
    pub fn checked(&self) -> &Checked {
        &self.checked
    }
}

/// A look-alike of a hit's document, visible to the caller, with no confirmed
/// supersession between them: shown, never silently chosen.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Conflict {
    pub doc_id: String,
    pub version: String,
    pub conflicts_with: VersionRef,
    pub reason: String,
}

/// At most this many conflicts are listed in a response; `conflicts_total` counts them
/// all.
pub const MAX_CONFLICTS: usize = 20;

#[derive(Debug, Clone, Serialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SearchResponse {
    pub hits: Vec<Hit>,
    /// The look-alike conflicts of the hits' documents among the versions the caller
    /// may see, ordered by pair: the first `MAX_CONFLICTS` (20).
    pub conflicts: Vec<Conflict>,
    /// How many conflicts there are in all (`conflicts` lists at most
    /// `MAX_CONFLICTS` of them).
    pub conflicts_total: usize,
    /// Graph modes: the part of the caller's graph view the answer drew on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subgraph: Option<SubgraphJson>,
    /// `global` and `drift`: the community reports drawn on, each with its lineage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reports: Option<Vec<ReportJson>>,
}

/// How hybrid mode fuses the lexical and dense lists.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Fusion {
    /// Reciprocal-rank fusion; the dense list's ranks count `dense_weight` times.
    Rrf { dense_weight: f32 },
    /// Convex combination of min-max normalised scores; `dense_weight` in 0..1.
    Convex { dense_weight: f32 },
}

/// The default was chosen on held-out sets (hotpotqa-dev100, musique-dev100), never on
/// the sets the project reports (2wiki, rgb-zh): see BENCHMARKS.md.
impl Default for Fusion {
    fn default() -> Self {
        Fusion::Convex { dense_weight: 0.7 }
    }
}

impl std::str::FromStr for Fusion {
    type Err = Error;
    /// `rrf`, `rrf:W`, `convex`, `convex:W`.
    fn from_str(s: &str) -> Result<Fusion> {
        let (kind, w) = s.split_once(':').unwrap_or((s, ""));
        let weight = |default: f32| -> Result<f32> {
            if w.is_empty() {
                return Ok(default);
            }
            w.parse::<f32>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| {
                    Error::Invalid(format!(
                        "fusion {s:?}: weight must be a non-negative number"
                    ))
                })
        };
        match kind {
            "rrf" => Ok(Fusion::Rrf {
                dense_weight: weight(1.5)?,
            }),
            "convex" => {
                let w = weight(0.7)?;
                if w > 1.0 {
                    return Err(Error::Invalid(format!(
                        "fusion {s:?}: convex weight must be within 0..1"
                    )));
                }
                Ok(Fusion::Convex { dense_weight: w })
            }
            _ => Err(Error::Invalid(format!(
                "unknown fusion {s:?}: expected rrf[:W] or convex[:W]"
            ))),
        }
    }
}

impl Engine {
    /// Searches as a principal from the catalog.
    pub fn search(&self, req: &SearchRequest) -> Result<SearchResponse> {
        self.search_until(req, &Cancel::default())
    }

    /// Searches under a scope the program built itself (eval, the agent).
    pub fn search_scoped(
        &self,
        scope: &Scope,
        query: &str,
        mode: Mode,
        k: usize,
    ) -> Result<SearchResponse> {
        self.search_scoped_until(scope, query, mode, k, &Cancel::default())
    }

    /// [`Engine::search`] that gives up when `cancel` fires (a request's deadline, a
    /// client gone): queued embedding work is dropped unrun and the stages check it,
    /// so abandoned work stops holding the machine and the caller's slot.
    pub fn search_until(&self, req: &SearchRequest, cancel: &Cancel) -> Result<SearchResponse> {
        let scope = self
            .scope(&req.principal, req.as_of.unwrap_or(req.now))?
            .within_kbs(&req.kbs);
        self.search_scoped_until(&scope, &req.query, req.mode, req.k, cancel)
    }

    /// [`Engine::search_scoped`] under `cancel` (see [`Engine::search_until`]).
    pub fn search_scoped_until(
        &self,
        scope: &Scope,
        query: &str,
        mode: Mode,
        k: usize,
        cancel: &Cancel,
    ) -> Result<SearchResponse> {
        cancelled(cancel)?;
        if query.trim().is_empty() {
            return Err(Error::Invalid("empty query".into()));
        }
        // A value the reader may not see is not searched for either: otherwise which
        // documents hold a phone number could be learnt from the hits, masked or not.
        let query = &*scope.mask(query);
        // The stage's span: mode, sizes and counts; never the query or any text.
        let span = tracing::info_span!(
            "search",
            mode = ?mode,
            k,
            hits = tracing::field::Empty,
            graph.seed_entities = tracing::field::Empty,
            graph.bridges = tracing::field::Empty,
            graph.nodes_expanded = tracing::field::Empty,
            graph.edges_expanded = tracing::field::Empty,
        );
        let _in = span.enter();
        if mode.is_graph() {
            let g = self.graph_rank(scope, query, mode, k, cancel)?;
            cancelled(cancel)?;
            span.record("graph.nodes_expanded", g.subgraph.nodes.len());
            span.record("graph.edges_expanded", g.subgraph.edges.len());
            let mut resp = self.hydrate(scope, &g.ranked, k + g.expansions)?;
            span.record("hits", resp.hits.len());
            resp.subgraph = Some(g.subgraph);
            if matches!(mode, Mode::Global | Mode::Drift) {
                resp.reports = Some(
                    g.reports
                        .into_iter()
                        .map(|r| crate::global::masked_report(scope, r))
                        .collect(),
                );
            }
            return Ok(resp);
        }
        // One snapshot for the whole request: the admission set, the indexes searched
        // and the hydration check all come from the same commit.
        let snap = self.store.snapshot();
        let admit = snap.view.admit(scope);
        let ranked = self.rank_in(&snap, scope, cancel, query, mode, k, &admit)?;
        cancelled(cancel)?;
        let resp = self.hydrate_in(&snap.view, scope, &ranked, k)?;
        span.record("hits", resp.hits.len());
        Ok(resp)
    }

    /// Ranked chunk sequence numbers, already filtered by the scope.
    pub fn rank(&self, scope: &Scope, query: &str, mode: Mode, k: usize) -> Result<Vec<Scored>> {
        self.rank_until(scope, query, mode, k, &Cancel::default())
    }

    /// [`Engine::rank`] under `cancel`.
    pub(crate) fn rank_until(
        &self,
        scope: &Scope,
        query: &str,
        mode: Mode,
        k: usize,
        cancel: &Cancel,
    ) -> Result<Vec<Scored>> {
        if query.trim().is_empty() {
            return Err(Error::Invalid("empty query".into()));
        }
        if mode.is_graph() {
            return Ok(self.graph_rank(scope, query, mode, k, cancel)?.ranked);
        }
        let snap = self.store.snapshot();
        let admit = snap.view.admit(scope);
        self.rank_in(&snap, scope, cancel, query, mode, k, &admit)
    }

    /// Ranks in a basic mode under an admission set the caller computed from `scope`,
    /// on one snapshot; the query vector from the cache or in the tenant's turn in the
    /// embedding queue, until `cancel`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn rank_in(
        &self,
        snap: &Snapshot,
        scope: &Scope,
        cancel: &Cancel,
        query: &str,
        mode: Mode,
        k: usize,
        admit: &Admit,
    ) -> Result<Vec<Scored>> {
        let span = tracing::info_span!(
            "rank",
            mode = ?mode,
            bm25_candidates = tracing::field::Empty,
            vector_candidates = tracing::field::Empty,
            fused = tracing::field::Empty,
        );
        let _in = span.enter();
        let generation = &snap.active;
        let lexical = |n| {
            let l = generation.bm25.search(query, n, admit);
            if let Ok(l) = &l {
                span.record("bm25_candidates", l.len());
            }
            l
        };
        let dense = |n| -> Result<Vec<Scored>> {
            let q = self.query_vector(scope, query, cancel)?;
            let d = self.store.search_vectors(snap, &q, n, admit)?;
            span.record("vector_candidates", d.len());
            Ok(d)
        };
        // `n` dense hits with those in the other script than the query's put on its
        // scale, and which those are (see `scripts`).
        let dense_on_query_scale = |n| -> Result<(Vec<Scored>, HashSet<u64>)> {
            let d = dense(n)?;
            let query_han = dossier_core::text::mostly_han(query);
            let seqs: Vec<u64> = d.iter().map(|s| s.seq).collect();
            let other: HashSet<u64> = self
                .store
                .catalog()
                .chunks(&seqs)?
                .into_iter()
                .filter(|c| dossier_core::text::mostly_han(&c.chunk.text) != query_han)
                .map(|c| c.seq)
                .collect();
            Ok((scripts::onto_query_scale(d, &other), other))
        };
        let ranked = match mode {
            Mode::Bm25 => lexical(k)?,
            Mode::Vector => {
                let (mut d, _) = dense_on_query_scale((k * 4).max(SCRIPT_DEPTH))?;
                d.truncate(k);
                d
            }
            Mode::Local | Mode::Graph | Mode::Global | Mode::Drift => {
                unreachable!("graph modes return above")
            }
            Mode::Hybrid => {
                // Fuse deeper lists than asked so that agreement below the cut counts.
                let depth = (k * 4).max(40);
                let l = lexical(depth)?;
                // Deeper on the dense side: a passage in the other script may sit below
                // the first 40 before it is put on the question script's scale.
                let (mut d, other) = dense_on_query_scale(depth.max(SCRIPT_DEPTH))?;
                let l = scripts::lexical_blind_spots_filled(l, &d, &other);
                d.truncate(depth);
                match self.fusion {
                    Fusion::Rrf { dense_weight } => {
                        rrf(&[(&l, 1.0), (&d, dense_weight)], DEFAULT_RRF_K, k)
                    }
                    Fusion::Convex { dense_weight } => {
                        convex(&[(&l, 1.0 - dense_weight), (&d, dense_weight)], k)
                    }
                }
            }
        };
        span.record("fused", ranked.len());
        Ok(ranked)
    }

    /// The embedding of `query` for `scope`'s principal: from the query-vector cache
    /// (an entry only this tenant and principal's own searches put there), else through
    /// the fair queue in the tenant's turn, dropped if cancelled. Only a vector that
    /// came back is cached; errors and cancellations leave nothing behind.
    pub(crate) fn query_vector(
        &self,
        scope: &Scope,
        query: &str,
        cancel: &Cancel,
    ) -> Result<std::sync::Arc<[f32]>> {
        let name = self.embedder.name();
        if let Some(v) = self.query_cache.get(scope, name, query) {
            return Ok(v);
        }
        let v: std::sync::Arc<[f32]> = self
            .embedder
            .query(scope.tenant(), query, cancel)
            .map_err(embed_error)?
            .into();
        self.query_cache
            .put(scope, name, query, std::sync::Arc::clone(&v));
        Ok(v)
    }

    /// How specific each analyzer term of `text` is to the scope's text: BM25's idf over
    /// the chunks the scope admits (tenant, ACL, versions in force), so the weights
    /// reveal nothing of other tenants' or restricted text. Terms in text order, each
    /// once.
    pub fn term_specificity(&self, scope: &Scope, text: &str) -> Result<Vec<(String, f32)>> {
        let mut seen = HashSet::new();
        let terms: Vec<String> = dossier_index::analyzer::terms(text)
            .into_iter()
            .filter(|t| seen.insert(t.clone()))
            .collect();
        let snap = self.store.snapshot();
        let admit = snap.view.admit(scope);
        let idf = snap.active.bm25.idf(&terms, &admit)?;
        Ok(terms.into_iter().zip(idf).collect())
    }

    /// Cosine similarity of `query` (embedded as a query, through the query-vector
    /// cache) with each of `passages` (embedded as passages), in the scope's tenant's
    /// turn of the fair queue. For judging meaning where words differ (another language,
    /// a paraphrase); the texts are the caller's own evidence, so nothing new is read.
    pub fn similarity(
        &self,
        scope: &Scope,
        query: &str,
        passages: &[&str],
        cancel: &Cancel,
    ) -> Result<Vec<f32>> {
        if passages.is_empty() {
            return Ok(vec![]);
        }
        let q = self.query_vector(scope, query, cancel)?;
        let ps = self
            .embedder
            .passages(scope.tenant(), passages, cancel)
            .map_err(embed_error)?;
        Ok(ps.iter().map(|p| cosine(&q, p)).collect())
    }

    /// Turns ranked sequence numbers into hits, checking each chunk's document version
    /// against the scope once more, and collects the conflicts among them.
    pub fn hydrate(&self, scope: &Scope, ranked: &[Scored], k: usize) -> Result<SearchResponse> {
        self.hydrate_in(&self.store.view(), scope, ranked, k)
    }

    pub(crate) fn hydrate_in(
        &self,
        view: &DocsView,
        scope: &Scope,
        ranked: &[Scored],
        k: usize,
    ) -> Result<SearchResponse> {
        let seqs: Vec<u64> = ranked.iter().map(|s| s.seq).collect();
        let score: HashMap<u64, f32> = ranked.iter().map(|s| (s.seq, s.score)).collect();
        let mut hits = Vec::new();
        let mut hit_docs: HashSet<VersionRef> = HashSet::new();
        for c in self.store.catalog().chunks(&seqs)? {
            let ch = &c.chunk;
            let Some(i) = view.find(&ch.tenant, &ch.doc_id, &ch.version) else {
                continue;
            };
            if view.entry(i).dv != c.dv || !view.admits(i, scope) {
                continue;
            }
            hit_docs.insert(VersionRef {
                doc_id: ch.doc_id.clone(),
                version: ch.version.clone(),
            });
            // Text leaves the engine as the reader may see it: sensitive values masked
            // here, before any writer, model or response sees the hit.
            hits.push(Hit {
                chunk_id: ch.chunk_id.clone(),
                doc_id: ch.doc_id.clone(),
                version: ch.version.clone(),
                section: scope.mask(&ch.section_label()).into_owned(),
                section_path: ch
                    .section
                    .iter()
                    .map(|s| scope.mask(s).into_owned())
                    .collect(),
                score: score[&c.seq],
                text: scope.mask(&ch.text).into_owned(),
                source_uri: ch.source_uri.clone(),
                title: scope.mask(&ch.title).into_owned(),
                checked: Checked(()),
            });
            if hits.len() == k {
                break;
            }
        }
        let visible = |r: &VersionRef| {
            view.find(scope.tenant(), &r.doc_id, &r.version)
                .is_some_and(|i| view.admits(i, scope))
        };
        // The conflicts of the hit versions only, found through each one's group (never
        // by walking the tenant's), each pair once; a bounded number is listed.
        let mut pairs: Vec<&dossier_core::validity::LookAlike> = hit_docs
            .iter()
            .filter_map(|r| view.find(scope.tenant(), &r.doc_id, &r.version))
            .flat_map(|i| view.look_alikes_at(i))
            .filter(|l| visible(&l.a) && visible(&l.b))
            .collect();
        pairs.sort_by(|p, q| (&p.a, &p.b).cmp(&(&q.a, &q.b)));
        pairs.dedup_by(|p, q| p.a == q.a && p.b == q.b);
        let conflicts_total = pairs.len();
        let conflicts = pairs
            .into_iter()
            .take(MAX_CONFLICTS)
            .map(|l| {
                // One entry per pair, named from the side that was hit (a first).
                let (hit, other) = if hit_docs.contains(&l.a) {
                    (&l.a, &l.b)
                } else {
                    (&l.b, &l.a)
                };
                Conflict {
                    doc_id: hit.doc_id.clone(),
                    version: hit.version.clone(),
                    conflicts_with: other.clone(),
                    reason: l.reason.clone(),
                }
            })
            .collect();
        Ok(SearchResponse {
            hits,
            conflicts,
            conflicts_total,
            subgraph: None,
            reports: None,
        })
    }
}

/// `Cancelled` once `cancel` has fired, so a stage does not start work nobody waits for.
pub(crate) fn cancelled(cancel: &Cancel) -> Result<()> {
    cancel.check().map_err(Error::Cancelled)
}

/// The embedding queue's refusals as the engine's own errors (busy, cancelled).
pub(crate) fn embed_error(e: dossier_core::Error) -> Error {
    use dossier_embed::QueueRefusal as R;
    match dossier_embed::queue_refusal(&e) {
        Some(R::Busy) => Error::Busy(e.to_string()),
        Some(R::Cancelled) => Error::Cancelled(dossier_core::cancel::Cancelled::Cancelled),
        Some(R::DeadlineExceeded) => {
            Error::Cancelled(dossier_core::cancel::Cancelled::DeadlineExceeded)
        }
        Some(R::ShutDown) | None => Error::Model(e),
    }
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut ab, mut aa, mut bb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0.0 || bb == 0.0 {
        0.0
    } else {
        ab / (aa.sqrt() * bb.sqrt())
    }
}
