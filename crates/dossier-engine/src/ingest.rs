//! The ingest pipeline: parse, skip what is unchanged, embed, commit in batches.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Instant;

use dossier_ingest::{parse_paths, Item, ParsedDocument};
use dossier_store::catalog::{CommitBatch, NewDocument};
use dossier_store::principals::PrincipalWriter;
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

/// The `supersedes` links of one ingest's documents, to find a cycle before it lands
/// (A@2 superseding B@2 while B@2 supersedes A@2 would end both on every date).
struct Successions {
    /// `(tenant, doc, version)` → what it supersedes, for the documents of the batch
    /// not refused; the store's view answers for the rest.
    batch: std::collections::HashMap<(String, String, String), Option<dossier_core::VersionRef>>,
}

impl Successions {
    fn of_batch(items: &[Item]) -> Successions {
        let batch = items
            .iter()
            .filter_map(|i| match i {
                Item::Document(d) => Some((
                    (
                        d.meta.tenant.clone(),
                        d.meta.doc_id.clone(),
                        d.meta.version.clone(),
                    ),
                    d.meta.supersedes.clone(),
                )),
                _ => None,
            })
            .collect();
        Successions { batch }
    }

    /// Forgets a refused version: it supersedes nothing.
    fn refuse(&mut self, v: &dossier_core::DocumentVersion) {
        self.batch.insert(
            (v.tenant.clone(), v.doc_id.clone(), v.version.clone()),
            None,
        );
    }

    /// Whether following `supersedes` from what `v` supersedes leads back to `v`.
    /// Bounded by the number of versions: each is visited once.
    fn closes_a_cycle(
        &self,
        v: &dossier_core::DocumentVersion,
        view: &dossier_store::DocsView,
    ) -> bool {
        let mut seen = HashSet::new();
        let mut next = v.supersedes.clone();
        while let Some(r) = next {
            if r.doc_id == v.doc_id && r.version == v.version {
                return true;
            }
            if !seen.insert(r.clone()) {
                return false; // a cycle that does not pass through `v`
            }
            let key = (v.tenant.clone(), r.doc_id, r.version);
            next = match self.batch.get(&key) {
                Some(s) => s.clone(),
                None => view
                    .find(&key.0, &key.1, &key.2)
                    .and_then(|i| view.entry(i).meta.supersedes.clone()),
            };
        }
        false
    }
}

/// How an ingest writes ([`Engine::ingest_as`]).
#[derive(Debug, Clone, Copy)]
pub struct IngestAs<'a> {
    /// Who writes: the operator, or a tenant's admin (then only into its tenant).
    pub writer: PrincipalWriter<'a>,
    /// Documents read from files below this directory are cited as the prefix plus
    /// their path below it, not by the path the files happen to have (an upload's place
    /// on the server is no reader's business).
    pub cite_as: Option<(&'a std::path::Path, &'a str)>,
}

/// Rewrites the `file://` URIs of documents below `dir` to `prefix` + their path below
/// it (the document's and every chunk's).
fn cite_below(items: &mut [Item], dir: &std::path::Path, prefix: &str) {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let below = format!("file://{}/", dir.display());
    for item in items {
        if let Item::Document(d) = item {
            if let Some(rest) = d.meta.source_uri.strip_prefix(&below) {
                let uri = format!("{prefix}{rest}");
                for c in &mut d.chunks {
                    c.source_uri = uri.clone();
                }
                d.meta.source_uri = uri;
            }
        }
    }
}

impl Engine {
    /// Ingests files and directories as the operator. Bad files and lines are reported
    /// in [`IngestReport::problems`] and skipped; everything else lands.
    pub fn ingest(&self, paths: &[PathBuf], progress: &mut dyn Progress) -> Result<IngestReport> {
        let how = IngestAs {
            writer: PrincipalWriter::Operator,
            cite_as: None,
        };
        self.ingest_as(paths, how, progress)
    }

    /// Ingests as [`Engine::ingest`] does, but as `writer` writes: a tenant's admin
    /// writes only into its tenant — documents and record tables of any other tenant
    /// are reported as problems and skipped, documents that name no tenant land in it —
    /// and a `principals.yaml` is written only if the one principal rule
    /// ([`dossier_store::principals::grant`]) allows every principal in it (the file is
    /// skipped whole otherwise: identity is never loaded in part).
    pub fn ingest_as(
        &self,
        paths: &[PathBuf],
        how: IngestAs<'_>,
        progress: &mut dyn Progress,
    ) -> Result<IngestReport> {
        let writer = how.writer;
        let only_tenant = match writer {
            PrincipalWriter::Operator => None,
            PrincipalWriter::TenantAdmin { tenant, .. } => Some(tenant),
        };
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
        if let Some((dir, prefix)) = how.cite_as {
            cite_below(&mut parsed.items, dir, prefix);
        }
        let mut refused = Vec::new();
        if let Some(t) = only_tenant {
            parsed.items.retain(|item| {
                let (tenant, what) = match item {
                    Item::Document(d) => (d.meta.tenant.as_str(), d.meta.source_uri.as_str()),
                    Item::Records(r) => (r.schema.tenant.as_str(), r.schema.table.as_str()),
                    // Judged below by the one principal rule, which names the reason.
                    Item::Principals { .. } => return true,
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
        let mut successions = Successions::of_batch(&parsed.items);
        for item in parsed.items {
            match item {
                Item::Document(d) if successions.closes_a_cycle(&d.meta, &view) => {
                    successions.refuse(&d.meta);
                    report.problems.push(format!(
                        "{}: {}@{} supersedes {}, which already supersedes it (directly or \
                         through other versions): a cycle would end every version in it; skipped",
                        d.meta.source_uri,
                        d.meta.doc_id,
                        d.meta.version,
                        d.meta
                            .supersedes
                            .as_ref()
                            .map(|s| s.to_string())
                            .unwrap_or_default()
                    ));
                }
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
                Item::Principals { path, principals } => {
                    match self.store.grant_principals(writer, principals)? {
                        Ok(granted) => {
                            report.principals += granted.len();
                            first.principals.extend(granted);
                        }
                        Err(refusal) => report.problems.push(format!(
                            "{}: {refusal}; the file is skipped whole",
                            path.display()
                        )),
                    }
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
