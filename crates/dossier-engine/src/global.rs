//! Community reports and the `global` and `drift` modes.
//!
//! Reports are built per caller view: communities (hierarchical Leiden) of the entity
//! graph the scope may read, each with an extractive report whose lineage is the set
//! of chunks supporting the community's internal edges. A report therefore never draws
//! on a source the caller may not read (the "rebuilt for the visible subset" rule), and
//! since views and their reports belong to one generation of their tenant, a commit or
//! delete in the tenant that removes or supersedes a source makes every report built
//! from it stale: it is dropped with the view and rebuilt from the new view on next use,
//! so no report keeps text from a deleted source. Commits in other tenants leave them be.
//!
//! `global`: rank the reports against the query (BM25 over report text, fused with the
//! mass of hybrid hits inside each report's lineage), then map-reduce: each top report
//! contributes its summary sentences scored against the query (map); the contributions
//! are merged into one ranking of their source chunks (reduce).
//! `drift`: the `local` neighbourhood ranking fused with the community context — the
//! reports of the communities that hold the query's entities — and with hybrid hits.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use dossier_graph::{Cited, CommunityOptions, EntityId, EntityKind, GraphView};
use dossier_index::analyzer;
use dossier_index::fusion::{rrf, DEFAULT_RRF_K};
use dossier_index::Scored;
use dossier_store::Scope;
use serde::{Deserialize, Serialize};

use crate::graph::{query_entities, TenantState};
use crate::{Engine, Mode, Result};

/// Reports a global query draws on.
const TOP_REPORTS: usize = 5;
/// Summary sentences per report.
const SUMMARY_SENTENCES: usize = 6;
/// BM25 constants for ranking report text.
const K1: f32 = 1.2;
const B: f32 = 0.75;

/// A community report as search results show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReportJson {
    /// `L{level}C{n}` within the caller's view.
    pub community_id: String,
    pub level: usize,
    pub title: String,
    /// Entity names of the community.
    pub entities: Vec<String>,
    /// Sentences of its sources, each with the chunk it was taken from.
    pub summary: Vec<Cited>,
    /// Lineage: every chunk the report was built from.
    pub sources: Vec<String>,
    /// The document versions (`DOC@VERSION`) those chunks belong to.
    pub source_documents: Vec<String>,
    /// Relevance to the query (0 when listed without one).
    pub score: f32,
    /// A model-written summary, when a model is configured: every sentence cites a
    /// line of `summary` as `[n]` (1-based) and was verified against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_summary: Option<String>,
}

/// What building a scope's graph took (see [`Engine::warm_graph`]).
#[derive(Debug, Clone, Serialize)]
pub struct GraphBuildStats {
    /// Reading the tenant's documents, chunks and records and building its graph
    /// (declared relations, rule extraction, resolution).
    pub graph_s: f64,
    /// The scope's view (visibility of every relation and merge).
    pub view_s: f64,
    /// Hierarchical Leiden over the view plus one extractive report per community.
    pub communities_and_reports_s: f64,
    pub entities: usize,
    pub relations: usize,
    pub reports: usize,
}

/// The reports of one view, with what ranking them needs.
pub(crate) struct ReportSet {
    pub reports: Vec<ReportJson>,
    terms: Vec<HashMap<String, u32>>,
    lens: Vec<f32>,
    avg_len: f32,
    df: HashMap<String, u32>,
    /// Entity key → the reports whose community holds it.
    by_entity: HashMap<String, Vec<usize>>,
    /// Each report's community.
    members: Vec<Vec<EntityId>>,
}

impl ReportSet {
    /// Whether these reports, built for an earlier view of the same graph, may stand
    /// for `view`: every chunk they quote is still `admitted` and every member of every
    /// community is still in the view.
    pub(crate) fn still_holds(&self, view: &GraphView, admitted: &dyn Fn(&str) -> bool) -> bool {
        self.reports
            .iter()
            .all(|r| r.sources.iter().all(|c| admitted(c)))
            && self
                .members
                .iter()
                .flatten()
                .all(|id| view.entity(id).is_some())
    }

    fn build(
        view: &GraphView,
        chunk_text: &HashMap<String, String>,
        doc_of: &dyn Fn(&str) -> Option<String>,
    ) -> ReportSet {
        let communities = view.communities(&CommunityOptions::default());
        let mut reports = Vec::with_capacity(communities.len());
        let mut by_entity: HashMap<String, Vec<usize>> = HashMap::new();
        let mut members: Vec<Vec<EntityId>> = Vec::new();
        let mut seen: HashSet<Vec<EntityId>> = HashSet::new();
        for c in &communities {
            // A community that a coarser level only repeats is reported once (finest).
            let mut key = c.entities.clone();
            key.sort();
            if !seen.insert(key) {
                continue;
            }
            let r = view.report(c, &|id| chunk_text.get(id).cloned(), SUMMARY_SENTENCES);
            if r.summary.is_empty() {
                continue;
            }
            members.push(c.entities.clone());
            for e in &c.entities {
                by_entity
                    .entry(e.key.clone())
                    .or_default()
                    .push(reports.len());
            }
            let docs: BTreeSet<String> = r.sources.iter().filter_map(|s| doc_of(s)).collect();
            reports.push(ReportJson {
                community_id: r.community_id,
                level: r.level,
                title: r.title,
                entities: c
                    .entities
                    .iter()
                    .filter_map(|id| view.entity(id))
                    .filter(|e| e.kind != EntityKind::Version)
                    .map(|e| e.name.clone())
                    .collect(),
                summary: r.summary,
                sources: r.sources,
                source_documents: docs.into_iter().collect(),
                score: 0.0,
                model_summary: None,
            });
        }
        let mut df: HashMap<String, u32> = HashMap::new();
        let mut terms = Vec::with_capacity(reports.len());
        let mut lens = Vec::with_capacity(reports.len());
        for r in &reports {
            let mut tf: HashMap<String, u32> = HashMap::new();
            let text = std::iter::once(r.title.as_str())
                .chain(r.summary.iter().map(|s| s.text.as_str()))
                .collect::<Vec<_>>()
                .join("\n");
            let ts = analyzer::terms(&text);
            lens.push(ts.len() as f32);
            for t in ts {
                *tf.entry(t).or_default() += 1;
            }
            for t in tf.keys() {
                *df.entry(t.clone()).or_default() += 1;
            }
            terms.push(tf);
        }
        let avg_len = lens.iter().sum::<f32>() / lens.len().max(1) as f32;
        ReportSet {
            reports,
            terms,
            lens,
            avg_len,
            df,
            by_entity,
            members,
        }
    }

    /// BM25 of each report's text for the query terms, best first, zeros left out.
    fn lexical(&self, query_terms: &[String]) -> Vec<(usize, f32)> {
        let n = self.reports.len() as f32;
        let mut out: Vec<(usize, f32)> = (0..self.reports.len())
            .map(|i| {
                let s: f32 = query_terms
                    .iter()
                    .filter_map(|t| {
                        let tf = *self.terms[i].get(t)? as f32;
                        let df = *self.df.get(t)? as f32;
                        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                        let norm = K1 * (1.0 - B + B * self.lens[i] / self.avg_len.max(1.0));
                        Some(idf * tf * (K1 + 1.0) / (tf + norm))
                    })
                    .sum();
                (i, s)
            })
            .filter(|(_, s)| *s > 0.0)
            .collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        out
    }
}

/// Reports as `Scored` lists (the fusion functions' currency: `seq` is a report index).
fn as_scored(v: &[(usize, f32)]) -> Vec<Scored> {
    v.iter()
        .map(|&(i, score)| Scored {
            seq: i as u64,
            score,
        })
        .collect()
}

/// What a report-based ranking found.
pub(crate) struct ReportRanked {
    pub ranked: Vec<Scored>,
    pub reports: Vec<ReportJson>,
    /// The entities of the reports' communities.
    pub entities: HashSet<EntityId>,
}

impl Engine {
    /// The reports of the scope's view (built on first use, kept with the view).
    pub(crate) fn view_reports(
        &self,
        state: &TenantState,
        view: &Arc<GraphView>,
    ) -> Result<Arc<ReportSet>> {
        let key = Arc::as_ptr(view) as usize;
        if let Some((_, r)) = state
            .reports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok(r.clone());
        }
        let mut wanted: BTreeSet<u64> = BTreeSet::new();
        for e in view.edges() {
            for p in &e.provenance {
                if let Some(seq) = p.chunk_id.as_ref().and_then(|c| state.chunk_seq.get(c)) {
                    wanted.insert(*seq);
                }
            }
        }
        let wanted: Vec<u64> = wanted.into_iter().collect();
        let texts: HashMap<String, String> = self
            .store
            .catalog()
            .chunks(&wanted)?
            .into_iter()
            .map(|c| (c.chunk.chunk_id, c.chunk.text))
            .collect();
        let doc_of = |chunk: &str| {
            let (doc, version) = state.version_of_chunk(chunk)?;
            Some(format!("{doc}@{version}"))
        };
        let set = Arc::new(ReportSet::build(view, &texts, &doc_of));
        let mut cache = state.reports.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= 64 {
            cache.clear();
        }
        // The view is kept alive with its reports, so its address cannot be reused.
        cache.insert(key, (view.clone(), set.clone()));
        Ok(set)
    }

    /// Builds the scope's graph, view and community reports now (each stage timed),
    /// so that the first graph-mode query does not pay for them.
    pub fn warm_graph(&self, scope: &Scope) -> Result<GraphBuildStats> {
        let t = std::time::Instant::now();
        let state = self.tenant_graph(scope.tenant())?;
        let graph_s = t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        let (_, view) = self.scoped_graph(scope)?;
        let view_s = t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        let reports = self.view_reports(&state, &view)?;
        let communities_s = t.elapsed().as_secs_f64();
        Ok(GraphBuildStats {
            graph_s,
            view_s,
            communities_and_reports_s: communities_s,
            entities: view.entities().len(),
            relations: view.edges().len(),
            reports: reports.reports.len(),
        })
    }

    /// Every report the scope may see, largest communities first within each level.
    pub fn community_reports(&self, scope: &Scope) -> Result<Vec<ReportJson>> {
        let (state, view) = self.scoped_graph(scope)?;
        let set = self.view_reports(&state, &view)?;
        let mut out: Vec<ReportJson> = set
            .reports
            .iter()
            .map(|r| masked_report(scope, r.clone()))
            .collect();
        out.sort_by(|a, b| {
            a.level
                .cmp(&b.level)
                .then(b.entities.len().cmp(&a.entities.len()))
                .then(a.community_id.cmp(&b.community_id))
        });
        Ok(out)
    }

    /// `global` and `drift` rankings. `hybrid` are the hybrid hits (chunk id, rank order).
    pub(crate) fn report_rank(
        &self,
        state: &TenantState,
        view: &Arc<GraphView>,
        query: &str,
        mode: Mode,
        hybrid_chunks: &[&str],
        k: usize,
    ) -> Result<ReportRanked> {
        let set = self.view_reports(state, view)?;
        let qterms: Vec<String> = {
            let mut seen = HashSet::new();
            analyzer::terms(query)
                .into_iter()
                .filter(|t| seen.insert(t.clone()))
                .collect()
        };
        // Report rankings: by their own text, and by the hybrid hits in their lineage.
        let lexical = set.lexical(&qterms);
        let hit_rank: HashMap<&str, usize> = hybrid_chunks
            .iter()
            .enumerate()
            .map(|(i, c)| (*c, i))
            .collect();
        let mut mass: Vec<(usize, f32)> = set
            .reports
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let m: f32 = r
                    .sources
                    .iter()
                    .filter_map(|c| hit_rank.get(c.as_str()))
                    .map(|&rank| 1.0 / (DEFAULT_RRF_K + rank as f32 + 1.0))
                    .sum();
                (i, m)
            })
            .filter(|(_, m)| *m > 0.0)
            .collect();
        mass.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut lists = vec![(as_scored(&lexical), 1.0), (as_scored(&mass), 1.0)];
        if mode == Mode::Drift {
            // Community context: the reports of the communities holding query entities.
            let seeds = query_entities(view, query);
            let mut ctx: Vec<(usize, f32)> = Vec::new();
            for (n, id) in seeds.iter().enumerate() {
                for &i in set.by_entity.get(&id.key).into_iter().flatten() {
                    if !ctx.iter().any(|(j, _)| *j == i) {
                        ctx.push((i, 1.0 / (n + 1) as f32));
                    }
                }
            }
            lists.push((as_scored(&ctx), 1.0));
        }
        let refs: Vec<(&[Scored], f32)> = lists.iter().map(|(l, w)| (l.as_slice(), *w)).collect();
        let top = rrf(&refs, DEFAULT_RRF_K, TOP_REPORTS);

        // Map: each top report's summary sentences, scored by report rank and by the
        // query terms they contain. Reduce: one ranking of their source chunks.
        let mut chunk_score: HashMap<String, f32> = HashMap::new();
        let mut reports = Vec::with_capacity(top.len());
        let mut entities = HashSet::new();
        for (rank, s) in top.iter().enumerate() {
            let r = &set.reports[s.seq as usize];
            entities.extend(set.members[s.seq as usize].iter().cloned());
            let weight = 1.0 / (rank + 1) as f32;
            for (j, sentence) in r.summary.iter().enumerate() {
                let st: HashSet<String> = analyzer::terms(&sentence.text).into_iter().collect();
                let overlap = qterms.iter().filter(|t| st.contains(*t)).count() as f32;
                // Earlier summary sentences mention more of the community's entities.
                let score = weight * (1.0 + overlap) / (1.0 + j as f32 * 0.1);
                let e = chunk_score.entry(sentence.chunk_id.clone()).or_default();
                *e = e.max(score);
            }
            let mut shown = r.clone();
            shown.score = s.score;
            reports.push(shown);
        }
        let mut ranked: Vec<Scored> = chunk_score
            .into_iter()
            .filter_map(|(c, score)| {
                Some(Scored {
                    seq: *state.chunk_seq.get(&c)?,
                    score,
                })
            })
            .collect();
        ranked.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.seq.cmp(&b.seq)));
        ranked.truncate(k.max(TOP_REPORTS * 2));
        Ok(ReportRanked {
            ranked,
            reports,
            entities,
        })
    }
}

/// `r` as the scope's reader may see it: sensitive values masked in its title, entity
/// names and lines (reports are built once per view and shared by its readers, so the
/// mask is applied on the way out).
pub(crate) fn masked_report(scope: &Scope, mut r: ReportJson) -> ReportJson {
    let Some(m) = scope.masker() else {
        return r;
    };
    r.title = m.mask(&r.title).into_owned();
    for e in &mut r.entities {
        *e = m.mask(e).into_owned();
    }
    for line in &mut r.summary {
        line.text = m.mask(&line.text).into_owned();
    }
    if let Some(s) = &mut r.model_summary {
        *s = m.mask(s).into_owned();
    }
    r
}
