//! Tools: the only way evidence enters the loop.
//!
//! Every call runs under a [`Scope`] the program built from the caller's principal; no
//! tool takes an identity, a tenant or a group as an argument. Each returns a
//! [`ToolStatus`] and evidence with provenance. A record that does not exist and one the
//! caller may not read come back as `no_hit` and `forbidden`; the loop shows both to the
//! caller as `no_hit` ([`ToolStatus::as_caller_sees`]) and keeps the difference in the
//! audit entries only.

use std::time::{Duration, Instant};

use chrono::NaiveDate;
use dossier_core::{RecordRow, RecordSchema};
use dossier_engine::Scope;
use dossier_engine::{Conflict, Engine, GraphEdge, Mode, NamedDocument, RecordLookup, ReportJson};
use serde::{Deserialize, Serialize};

/// A tool call, as proposed by a planner and checked by the program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "tool", rename_all = "snake_case")]
pub enum ToolCall {
    /// Search documents in a retrieval mode; `documents` restricts the search to those
    /// document ids and `as_of` judges versions on that date (both set by the program
    /// only, from record links and business dates).
    DocumentSearch {
        query: String,
        mode: String,
        k: usize,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        documents: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        as_of: Option<NaiveDate>,
    },
    /// An entity's typed neighbourhood in the caller's graph view.
    GraphNeighbors { entity: String, hops: usize },
    /// A shortest chain of visible edges between two entities.
    GraphPath { from: String, to: String },
    /// Community reports ranked against a query.
    CommunityReports { query: String },
    /// One record by table and key.
    Record { table: String, key: String },
}

impl ToolCall {
    pub fn name(&self) -> &'static str {
        match self {
            ToolCall::DocumentSearch { .. } => "document_search",
            ToolCall::GraphNeighbors { .. } => "graph_neighbors",
            ToolCall::GraphPath { .. } => "graph_path",
            ToolCall::CommunityReports { .. } => "community_reports",
            ToolCall::Record { .. } => "record",
        }
    }

    /// The call with its text arguments normalised (case, width, spacing), for
    /// de-duplication: the same question asked twice is one call.
    pub fn dedup_key(&self) -> String {
        let norm = |s: &str| dossier_core::text::normalize(s);
        match self {
            ToolCall::DocumentSearch {
                query,
                mode,
                documents,
                as_of,
                ..
            } => format!(
                "search|{}|{mode}|{}|{as_of:?}",
                norm(query),
                documents.join(",")
            ),
            ToolCall::GraphNeighbors { entity, hops } => format!("nbr|{}|{hops}", norm(entity)),
            ToolCall::GraphPath { from, to } => format!("path|{}|{}", norm(from), norm(to)),
            ToolCall::CommunityReports { query } => format!("reports|{}", norm(query)),
            ToolCall::Record { table, key } => format!("record|{table}|{}", key.trim()),
        }
    }

    pub fn args(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.remove("tool");
        }
        v
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Ok,
    NoHit,
    Timeout,
    Forbidden,
    Error,
}

impl ToolStatus {
    /// The status a caller's trace shows: `forbidden` reads as `no_hit`, so that "not
    /// yours" and "does not exist" cannot be told apart.
    pub fn as_caller_sees(self) -> ToolStatus {
        match self {
            ToolStatus::Forbidden => ToolStatus::NoHit,
            s => s,
        }
    }
}

/// A chunk of evidence with its provenance. Built only from a [`dossier_engine::Hit`]
/// (the private `checked` field holds the engine's proof of the scope check), so the
/// answer writers and the trace can only ever see text the caller may read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evidence {
    pub chunk_id: String,
    pub doc_id: String,
    pub version: String,
    pub section: String,
    /// The page of a paged source (PDF).
    pub page: Option<u32>,
    pub source_uri: String,
    pub title: String,
    pub text: String,
    /// The loop step that fetched it.
    pub fetched_at_step: usize,
    #[serde(skip)]
    checked: dossier_engine::Checked,
}

/// A record the caller may read, with its schema.
#[derive(Debug, Clone)]
pub struct RecordHit {
    pub schema: RecordSchema,
    pub row: RecordRow,
}

/// What a tool returned.
#[derive(Debug, Clone)]
pub struct ToolOutput {
    pub status: ToolStatus,
    pub evidence: Vec<Evidence>,
    pub record: Option<RecordHit>,
    pub edges: Vec<GraphEdge>,
    pub reports: Vec<ReportJson>,
    pub conflicts: Vec<Conflict>,
    /// For the audit trace only (never shown to the caller as such).
    pub audit: Option<String>,
}

impl ToolOutput {
    pub fn status(status: ToolStatus, audit: impl Into<String>) -> ToolOutput {
        ToolOutput {
            status,
            evidence: vec![],
            record: None,
            edges: vec![],
            reports: vec![],
            conflicts: vec![],
            audit: Some(audit.into()),
        }
    }
}

/// Runs tool calls under a scope. The seam the loop calls, and where tests inject
/// faults.
pub trait ToolRunner: Sync {
    fn run(&self, scope: &Scope, call: &ToolCall, step: usize) -> ToolOutput;

    /// Cosine similarity of `text` with each of `passages` (texts of this run), for
    /// judging meaning where the words differ; `None` when no embedder is at hand or it
    /// failed (then words alone decide).
    fn similarity(&self, _scope: &Scope, _text: &str, _passages: &[&str]) -> Option<Vec<f32>> {
        None
    }

    /// The cosine below which no evidence sentence answers a question
    /// ([`dossier_engine::Engine::answer_floor`]) for the embedder in use; `None` when its scale
    /// is unknown (then meaning never overrules the words).
    fn answer_floor(&self, _han: bool) -> Option<f32> {
        None
    }

    /// Each analyzer term of `text` with its specificity (idf over what the scope
    /// admits); `None` when unknown (then every term weighs the same).
    fn term_weights(&self, _scope: &Scope, _text: &str) -> Option<Vec<(String, f32)>> {
        None
    }

    /// The documents the passages `chunks` name (titles linked at index time) that the
    /// scope may read, in the order of the first passage naming each; empty when
    /// unknown. A document the scope may not read is not there, as if it did not exist.
    fn documents_named_by(&self, _scope: &Scope, _chunks: &[&str]) -> Vec<NamedDocument> {
        vec![]
    }

    /// For each of `chunks` (passages of `documents`), its position among those
    /// documents' passages the scope admits for `query`, by BM25 and by vector; `None`
    /// where a ranking did not reach it, and `None` as a whole when unknown.
    fn passage_ranks(
        &self,
        _scope: &Scope,
        _query: &str,
        _documents: &[String],
        _chunks: &[&str],
    ) -> Option<PassageRanks> {
        None
    }
}

/// [`ToolRunner::passage_ranks`]: one entry per passage asked about.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PassageRanks {
    pub lexical: Vec<Option<usize>>,
    pub dense: Vec<Option<usize>>,
}

/// The real tools, on an engine.
pub struct EngineTools<'a> {
    pub engine: &'a Engine,
    /// A call that takes longer than this is reported as `timeout` (its result is
    /// dropped).
    pub timeout: Duration,
    /// Fired when the whole run is abandoned (the request's deadline): searches stop
    /// and queued embeddings are dropped unrun.
    pub cancel: dossier_core::cancel::Cancel,
}

impl<'a> EngineTools<'a> {
    pub fn new(engine: &'a Engine) -> EngineTools<'a> {
        EngineTools {
            engine,
            timeout: Duration::from_secs(10),
            cancel: Default::default(),
        }
    }
}

fn evidence_of(hits: Vec<dossier_engine::Hit>, step: usize) -> Vec<Evidence> {
    hits.into_iter()
        .map(|h| Evidence {
            checked: h.checked().clone(),
            // Retrieved text is data: sentences written to the system are taken out
            // before any writer or model sees the chunk (see `inject`).
            text: crate::inject::neutralise(&h.text).0,
            chunk_id: h.chunk_id,
            doc_id: h.doc_id,
            version: h.version,
            page: dossier_core::doc::page_of(&h.section_path),
            section: h.section,
            source_uri: h.source_uri,
            title: h.title,
            fetched_at_step: step,
        })
        .collect()
}

impl ToolRunner for EngineTools<'_> {
    fn passage_ranks(
        &self,
        scope: &Scope,
        query: &str,
        documents: &[String],
        chunks: &[&str],
    ) -> Option<PassageRanks> {
        // Deep enough to place every passage of a pool that fills its budget.
        let k = (chunks.len() * 4 + 20).min(200);
        let rank = |mode: Mode| -> Option<Vec<Option<usize>>> {
            let resp = self
                .engine
                .search_within_until(scope, query, mode, k, documents, &self.cancel)
                .ok()?;
            let at: std::collections::HashMap<&str, usize> = resp
                .hits
                .iter()
                .enumerate()
                .map(|(i, h)| (h.chunk_id.as_str(), i))
                .collect();
            Some(chunks.iter().map(|c| at.get(c).copied()).collect())
        };
        Some(PassageRanks {
            lexical: rank(Mode::Bm25)?,
            dense: rank(Mode::Vector)?,
        })
    }

    fn documents_named_by(&self, scope: &Scope, chunks: &[&str]) -> Vec<NamedDocument> {
        self.engine
            .documents_named_by(scope, chunks)
            .unwrap_or_default()
    }

    fn term_weights(&self, scope: &Scope, text: &str) -> Option<Vec<(String, f32)>> {
        self.engine.term_specificity(scope, text).ok()
    }

    fn similarity(&self, scope: &Scope, text: &str, passages: &[&str]) -> Option<Vec<f32>> {
        self.engine
            .similarity(scope, text, passages, &self.cancel)
            .ok()
    }

    fn answer_floor(&self, han: bool) -> Option<f32> {
        self.engine.answer_floor(han)
    }

    fn run(&self, scope: &Scope, call: &ToolCall, step: usize) -> ToolOutput {
        let started = Instant::now();
        let mut out = match self.run_inner(scope, call, step) {
            Ok(o) => o,
            // Unknown entities read like missing ones: nothing to show, no detail.
            Err(dossier_engine::Error::NotFound(m)) => ToolOutput::status(ToolStatus::NoHit, m),
            // Cancelled or turned away by the embedding queue: the call ran out of time.
            Err(e @ (dossier_engine::Error::Cancelled(_) | dossier_engine::Error::Busy(_))) => {
                ToolOutput::status(ToolStatus::Timeout, e.to_string())
            }
            Err(e) => ToolOutput::status(ToolStatus::Error, e.to_string()),
        };
        if started.elapsed() > self.timeout {
            out = ToolOutput::status(
                ToolStatus::Timeout,
                format!(
                    "took {:?}, over the {:?} limit",
                    started.elapsed(),
                    self.timeout
                ),
            );
        }
        out
    }
}

impl EngineTools<'_> {
    fn run_inner(
        &self,
        scope: &Scope,
        call: &ToolCall,
        step: usize,
    ) -> dossier_engine::Result<ToolOutput> {
        let e = self.engine;
        let mut out = ToolOutput::status(ToolStatus::Ok, "");
        out.audit = None;
        match call {
            ToolCall::DocumentSearch {
                query,
                mode,
                k,
                documents,
                as_of,
            } => {
                let mode: Mode = mode.parse()?;
                let scope = match as_of {
                    Some(d) => scope.judged_at(*d),
                    None => scope.clone(),
                };
                let resp = if documents.is_empty() {
                    e.search_scoped_until(&scope, query, mode, *k, &self.cancel)?
                } else {
                    e.search_within_until(&scope, query, mode, *k, documents, &self.cancel)?
                };
                out.evidence = evidence_of(resp.hits, step);
                out.conflicts = resp.conflicts;
                out.edges = resp.subgraph.map(|s| s.edges).unwrap_or_default();
                out.reports = resp.reports.unwrap_or_default();
            }
            ToolCall::GraphNeighbors { entity, hops } => {
                let g = e.graph_neighbors(scope, entity, (*hops).clamp(1, 2))?;
                out.edges = g.edges;
                out.evidence = self.provenance_evidence(scope, &out.edges, step)?;
            }
            ToolCall::GraphPath { from, to } => {
                let p = e.graph_path(scope, from, to, 4)?;
                out.edges = p.unwrap_or_default();
                out.evidence = self.provenance_evidence(scope, &out.edges, step)?;
            }
            ToolCall::CommunityReports { query } => {
                let resp = e.search_scoped_until(scope, query, Mode::Global, 12, &self.cancel)?;
                out.reports = resp.reports.unwrap_or_default();
                out.evidence = evidence_of(resp.hits, step);
            }
            ToolCall::Record { table, key } => match e.record(scope, table, key)? {
                RecordLookup::Found { schema, row } => {
                    let mut row = *row;
                    // A record's free-text fields are data too.
                    for v in row.fields.values_mut() {
                        if let serde_json::Value::String(text) = v {
                            let (clean, removed) = crate::inject::neutralise(text);
                            if removed > 0 {
                                *text = clean;
                            }
                        }
                    }
                    out.record = Some(RecordHit {
                        schema: *schema,
                        row,
                    });
                }
                RecordLookup::Missing => {
                    return Ok(ToolOutput::status(
                        ToolStatus::NoHit,
                        format!("no row {key} in {table}"),
                    ))
                }
                RecordLookup::Forbidden => {
                    return Ok(ToolOutput::status(
                        ToolStatus::Forbidden,
                        format!("{table}/{key} exists but the principal may not read it"),
                    ))
                }
                // A live source that did not answer: the fact is missing, and the
                // answer says which (the note names the table and key, not the row).
                RecordLookup::Unavailable { timeout, message } => {
                    return Ok(ToolOutput::status(
                        if timeout {
                            ToolStatus::Timeout
                        } else {
                            ToolStatus::Error
                        },
                        format!("{table}/{key} could not be read: {message}"),
                    ))
                }
            },
        }
        let empty = out.evidence.is_empty()
            && out.record.is_none()
            && out.edges.is_empty()
            && out.reports.is_empty();
        if empty {
            out.status = ToolStatus::NoHit;
        }
        Ok(out)
    }

    /// The chunks that support `edges`, hydrated (and so checked) for the scope.
    fn provenance_evidence(
        &self,
        scope: &Scope,
        edges: &[GraphEdge],
        step: usize,
    ) -> dossier_engine::Result<Vec<Evidence>> {
        let mut ids: Vec<String> = Vec::new();
        for e in edges {
            for c in &e.provenance {
                if c.contains('#') && !ids.contains(c) {
                    ids.push(c.clone());
                }
            }
        }
        Ok(evidence_of(self.engine.chunks_by_id(scope, &ids)?, step))
    }
}

/// Injects faults for tests: every call to a named tool gets the given status.
pub struct FaultInjector<'a> {
    pub inner: &'a dyn ToolRunner,
    pub faults: Vec<(String, ToolStatus)>,
}

impl ToolRunner for FaultInjector<'_> {
    fn passage_ranks(
        &self,
        scope: &Scope,
        query: &str,
        documents: &[String],
        chunks: &[&str],
    ) -> Option<PassageRanks> {
        self.inner.passage_ranks(scope, query, documents, chunks)
    }

    fn documents_named_by(&self, scope: &Scope, chunks: &[&str]) -> Vec<NamedDocument> {
        self.inner.documents_named_by(scope, chunks)
    }

    fn term_weights(&self, scope: &Scope, text: &str) -> Option<Vec<(String, f32)>> {
        self.inner.term_weights(scope, text)
    }

    fn similarity(&self, scope: &Scope, text: &str, passages: &[&str]) -> Option<Vec<f32>> {
        self.inner.similarity(scope, text, passages)
    }

    fn answer_floor(&self, han: bool) -> Option<f32> {
        self.inner.answer_floor(han)
    }

    fn run(&self, scope: &Scope, call: &ToolCall, step: usize) -> ToolOutput {
        match self.faults.iter().find(|(t, _)| t == call.name()) {
            Some((_, status)) => ToolOutput::status(*status, "injected by the test harness"),
            None => self.inner.run(scope, call, step),
        }
    }
}
