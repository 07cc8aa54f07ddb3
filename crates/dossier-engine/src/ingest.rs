//! The ingest pipeline: parse, skip what is unchanged, embed, commit in batches.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Instant;

use dossier_ingest::{parse_paths, Item, ParsedDocument};
use dossier_store::catalog::{CommitBatch, NewDocument};
use serde::Serialize;

use crate::{Engine, Result};

/// Documents per commit: a killed ingest loses at most one batch of work.
const DOCS_PER_COMMIT: usize = 256;
/// Chunks per call into the embedder.
const EMBED_BATCH: usize = 32;

/// Receives progress of long work (the CLI draws a bar; tests ignore it).
pub trait Progress {
    fn start(&mut self, _stage: &str, _total: u64) {}
    fn advance(&mut self, _n: u64) {}
    fn finish(&mut self) {}
}

impl Progress for () {}

/// What an ingest did.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct IngestReport {
    pub files_seen: usize,
    pub documents_added: usize,
    pub documents_unchanged: usize,
    pub chunks_added: usize,
    pub record_tables: usize,
    pub records: usize,
    pub principals: usize,
    pub commits: usize,
    /// `path:line: message` for everything skipped.
    pub problems: Vec<String>,
    pub parse_secs: f64,
    pub embed_secs: f64,
    pub commit_secs: f64,
}

/// The text a chunk is embedded from: the document title gives a short passage its
/// context.
pub(crate) fn embed_text(c: &dossier_core::Chunk) -> String {
    if c.title.is_empty() || c.text.starts_with(&c.title) {
        c.text.clone()
    } else {
        format!("{}\n{}", c.title, c.text)
    }
}

impl Engine {
    /// Ingests files and directories. Bad files and lines are reported in
    /// [`IngestReport::problems`] and skipped; everything else lands.
    pub fn ingest(&self, paths: &[PathBuf], progress: &mut dyn Progress) -> Result<IngestReport> {
        self.ingest_into(paths, None, progress)
    }

    /// Ingests as [`Engine::ingest`] does, but only into `tenant`: documents, record
    /// tables and principals of any other tenant are reported as problems and skipped
    /// (what a tenant's administrator may upload). Documents that name no tenant land
    /// in `tenant`.
    pub fn ingest_for_tenant(
        &self,
        paths: &[PathBuf],
        tenant: &str,
        progress: &mut dyn Progress,
    ) -> Result<IngestReport> {
        self.ingest_into(paths, Some(tenant), progress)
    }

    fn ingest_into(
        &self,
        paths: &[PathBuf],
        only_tenant: Option<&str>,
        progress: &mut dyn Progress,
    ) -> Result<IngestReport> {
        let t0 = Instant::now();
        progress.start("parsing", 0);
        let parsed = match only_tenant {
            None => parse_paths(paths, &self.options),
            Some(t) => {
                let opts = dossier_ingest::IngestOptions {
                    default_tenant: t.to_string(),
                    ..self.options.clone()
                };
                parse_paths(paths, &opts)
            }
        };
        let mut parsed = parsed;
        let mut refused = Vec::new();
        if let Some(t) = only_tenant {
            parsed.items.retain(|item| {
                let (tenant, what) = match item {
                    Item::Document(d) => (d.meta.tenant.as_str(), d.meta.source_uri.as_str()),
                    Item::Records(r) => (r.schema.tenant.as_str(), r.schema.table.as_str()),
                    // A principal id is global: one that another tenant holds may not
                    // be taken over, or an upload could move a user between tenants.
                    Item::Principals { principals, .. } => {
                        let foreign = |p: &dossier_core::Principal| {
                            p.tenant != t || self.principal(&p.id).is_ok_and(|q| q.tenant != t)
                        };
                        match principals.iter().find(|p| foreign(p)) {
                            Some(p) if p.tenant != t => (p.tenant.as_str(), p.id.as_str()),
                            Some(p) => ("another", p.id.as_str()),
                            None => (t, ""),
                        }
                    }
                };
                if tenant == t {
                    true
                } else {
                    refused.push(format!(
                        "{what}: names tenant {tenant}, not {t} (the only tenant this upload may write); skipped"
                    ));
                    false
                }
            });
        }
        let mut report = IngestReport {
            files_seen: parsed.files_seen,
            problems: parsed
                .problems
                .iter()
                .map(|p| p.to_string())
                .chain(refused)
                .collect(),
            parse_secs: t0.elapsed().as_secs_f64(),
            ..Default::default()
        };

        let view = self.store.view();
        let mut seen = HashSet::new();
        let mut docs: Vec<ParsedDocument> = Vec::new();
        let mut first = CommitBatch::default();
        for item in parsed.items {
            match item {
                Item::Document(d) => {
                    let key = (
                        d.meta.tenant.clone(),
                        d.meta.doc_id.clone(),
                        d.meta.version.clone(),
                    );
                    if !seen.insert(key.clone()) {
                        report.problems.push(format!(
                            "{}: duplicate of document {}@{} earlier in this batch; skipped",
                            d.meta.source_uri, d.meta.doc_id, d.meta.version
                        ));
                        continue;
                    }
                    let unchanged = view
                        .find(&key.0, &key.1, &key.2)
                        .is_some_and(|i| view.entry(i).meta.digest == d.meta.digest);
                    if unchanged {
                        report.documents_unchanged += 1;
                    } else {
                        docs.push(d);
                    }
                }
                Item::Records(t) => {
                    report.record_tables += 1;
                    report.records += t.rows.len();
                    first.tables.push((t.schema, t.rows));
                }
                Item::Principals { principals, .. } => {
                    report.principals += principals.len();
                    first.principals.extend(principals);
                }
            }
        }
        drop(view);

        let total_chunks: usize = docs.iter().map(|d| d.chunks.len()).sum();
        progress.start("embedding", total_chunks as u64);
        let mut batch = first;
        let mut pending = docs.into_iter().peekable();
        while pending.peek().is_some() || !batch.is_empty() {
            let group: Vec<ParsedDocument> = pending.by_ref().take(DOCS_PER_COMMIT).collect();
            let t_embed = Instant::now();
            for d in group {
                let texts: Vec<String> = d.chunks.iter().map(embed_text).collect();
                let mut vectors = Vec::with_capacity(texts.len());
                for part in texts.chunks(EMBED_BATCH) {
                    let refs: Vec<&str> = part.iter().map(String::as_str).collect();
                    // The ingest lane of the fair queue: queries go first.
                    let v = self
                        .embedder
                        .passages(&d.meta.tenant, &refs, &Default::default())
                        .map_err(crate::search::embed_error)?;
                    vectors.extend(v);
                    progress.advance(part.len() as u64);
                }
                report.documents_added += 1;
                report.chunks_added += d.chunks.len();
                batch.documents.push(NewDocument {
                    meta: d.meta,
                    chunks: d.chunks,
                    vectors,
                });
            }
            report.embed_secs += t_embed.elapsed().as_secs_f64();
            let t_commit = Instant::now();
            self.store.commit(std::mem::take(&mut batch))?;
            report.commits += 1;
            report.commit_secs += t_commit.elapsed().as_secs_f64();
        }
        progress.finish();
        Ok(report)
    }
}
