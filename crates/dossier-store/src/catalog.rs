//! The catalog: the source of truth, in one redb file.

use std::collections::HashMap;
use std::path::Path;

use dossier_core::review::{Decision, ModelCandidate};
use dossier_core::{Chunk, DocumentVersion, Principal, RecordRow, RecordSchema};
use dossier_index::{Admit, Scored};
use redb::{Database, ReadableTable, ReadableTableMetadata, TableDefinition};
use serde::{Deserialize, Serialize};

use crate::audit::AuditLog;
use crate::idempotency::IdempotencyLog;
use crate::{Error, Result};

/// `tenant␟doc_id␟version` → [`DocEntry`] (JSON).
const DOCS: TableDefinition<&str, &[u8]> = TableDefinition::new("docs");
/// chunk sequence number → [`StoredChunk`] (JSON).
const CHUNKS: TableDefinition<u64, &[u8]> = TableDefinition::new("chunks");
/// chunk sequence number → little-endian f32 vector.
const VECTORS: TableDefinition<u64, &[u8]> = TableDefinition::new("vectors");
/// `tenant␟table` → [`RecordSchema`] (JSON).
const SCHEMAS: TableDefinition<&str, &[u8]> = TableDefinition::new("record_schemas");
/// `tenant␟table␟key` → [`RecordRow`] (JSON).
const RECORDS: TableDefinition<&str, &[u8]> = TableDefinition::new("records");
/// principal id → [`Principal`] (JSON).
const PRINCIPALS: TableDefinition<&str, &[u8]> = TableDefinition::new("principals");
/// counters: `generation`, `next_seq`, `next_dv`.
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// generation → [`ChangeSet`] (JSON): what each commit added and removed.
const CHANGES: TableDefinition<u64, &[u8]> = TableDefinition::new("changes");
/// `tenant␟candidate id` → [`Decision`] (JSON): review-queue decisions.
const REVIEWS: TableDefinition<&str, &[u8]> = TableDefinition::new("reviews");
/// `tenant␟candidate id` → [`ModelCandidate`] (JSON): model proposals awaiting review.
const CANDIDATES: TableDefinition<&str, &[u8]> = TableDefinition::new("model_candidates");

const SEP: char = '\u{1f}';

fn key(parts: &[&str]) -> String {
    parts.join(&SEP.to_string())
}

/// A stored document version: its metadata, its document-version ordinal (`dv`, the
/// id the indexes filter on; fresh for every stored content) and its chunks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DocEntry {
    pub meta: DocumentVersion,
    pub dv: u32,
    pub seqs: Vec<u64>,
    /// The content sketch look-alike detection compares
    /// ([`dossier_core::validity::sketch`] of the chunks' text), computed when the
    /// version is stored. Absent from entries stored before it existed (read as empty:
    /// no content evidence), so older catalogs stay readable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sketch: Vec<u32>,
}

/// A chunk as stored, with the sequence number the indexes know it by.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredChunk {
    pub seq: u64,
    pub dv: u32,
    pub chunk: Chunk,
}

/// What one commit changed, in index terms.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ChangeSet {
    pub generation: u64,
    pub added: Vec<u64>,
    pub removed: Vec<u64>,
    /// Tenants whose documents, records, principals or decisions the commit touched:
    /// what another tenant's derived data (graph, reports, cached answers) may ignore.
    #[serde(default)]
    pub tenants: Vec<String>,
    /// Document versions written or removed, as `(tenant, doc_id, version)`: what a
    /// reader's document view must re-read (the rest of it stays as it was).
    #[serde(default)]
    pub docs: Vec<DocKey>,
    /// Tenants whose record tables the commit replaced: what decides whether a tenant
    /// graph built before it may still answer while a newer one is built (record rows
    /// carry their own read rules, which only the graph holds). `None` in change sets
    /// written before commits said so: every tenant in `tenants` counts as changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records: Option<Vec<String>>,
}

/// `(tenant, doc_id, version)` of a stored document version.
pub type DocKey = (String, String, String);

impl ChangeSet {
    /// Written before change sets named their documents (or by a tool that did not):
    /// a reader cannot tell what to re-read and must rebuild its view.
    pub fn names_its_documents(&self) -> bool {
        !self.tenants.is_empty() || (self.added.is_empty() && self.removed.is_empty())
    }
}

/// The error of a delete that matched nothing: the same words from every backend.
pub(crate) fn unknown_document(tenant: &str, doc_id: &str, version: Option<&str>) -> Error {
    Error::NotFound(format!(
        "no document {doc_id}{} in tenant {tenant}",
        version.map(|v| format!("@{v}")).unwrap_or_default()
    ))
}

/// Refuses a document whose chunks and vectors do not pair up, before anything of it
/// is written.
pub(crate) fn check_vectors(doc: &NewDocument) -> Result<()> {
    if doc.chunks.len() != doc.vectors.len() {
        return Err(Error::Invalid(format!(
            "document {}@{}: {} chunks but {} vectors",
            doc.meta.doc_id,
            doc.meta.version,
            doc.chunks.len(),
            doc.vectors.len()
        )));
    }
    Ok(())
}

/// The next document-version ordinal (the indexes filter on a `u32`).
/// (redb counts in `u64`, Postgres in `bigint`.)
pub(crate) fn take_ordinal<T>(next_dv: &mut T) -> Result<u32>
where
    T: Copy + TryInto<u32> + std::ops::AddAssign + From<u8>,
{
    let dv = (*next_dv)
        .try_into()
        .map_err(|_| Error::Invalid("document-version ordinals exhausted".into()))?;
    *next_dv += T::from(1);
    Ok(dv)
}

/// The content sketch of a version stored with `chunks` (see [`DocEntry::sketch`]).
pub fn doc_sketch(chunks: &[Chunk]) -> Vec<u32> {
    dossier_core::validity::sketch(chunks.iter().map(|c| c.text.as_str()))
}

/// The key of a document version.
pub fn doc_key(meta: &DocumentVersion) -> DocKey {
    (
        meta.tenant.clone(),
        meta.doc_id.clone(),
        meta.version.clone(),
    )
}

/// The tenants a batch writes to, sorted.
pub fn tenants_touched(batch: &CommitBatch) -> Vec<String> {
    let mut t: Vec<String> = batch
        .documents
        .iter()
        .map(|d| d.meta.tenant.clone())
        .chain(batch.tables.iter().map(|(s, _)| s.tenant.clone()))
        .chain(
            batch
                .principals
                .iter()
                .map(|p| p.principal().tenant.clone()),
        )
        .chain(batch.deletes.iter().map(|d| d.0.clone()))
        .chain(batch.decisions.iter().map(|d| d.tenant.clone()))
        .chain(batch.candidates.iter().map(|c| c.tenant.clone()))
        .collect();
    t.sort();
    t.dedup();
    t
}

/// The tenants whose record tables a batch replaces, sorted.
pub fn record_tenants(batch: &CommitBatch) -> Vec<String> {
    let mut t: Vec<String> = batch.tables.iter().map(|(s, _)| s.tenant.clone()).collect();
    t.sort();
    t.dedup();
    t
}

/// A document version to store, with one vector per chunk.
#[derive(Debug, Clone)]
pub struct NewDocument {
    pub meta: DocumentVersion,
    pub chunks: Vec<Chunk>,
    pub vectors: Vec<Vec<f32>>,
}

/// Everything one commit writes.
#[derive(Debug, Clone, Default)]
pub struct CommitBatch {
    pub documents: Vec<NewDocument>,
    /// Whole tables: a table in the batch replaces its stored rows.
    pub tables: Vec<(RecordSchema, Vec<RecordRow>)>,
    /// Only through [`crate::principals::grant`]: the one rule for writing principals.
    pub principals: Vec<crate::principals::GrantedPrincipal>,
    /// `(tenant, doc_id, version)`; `None` version removes every version.
    pub deletes: Vec<(String, String, Option<String>)>,
    /// Review decisions; a later decision on the same candidate replaces the earlier.
    pub decisions: Vec<Decision>,
    /// Model proposals for the review queue.
    pub candidates: Vec<ModelCandidate>,
}

impl CommitBatch {
    pub fn is_empty(&self) -> bool {
        self.documents.is_empty()
            && self.tables.is_empty()
            && self.principals.is_empty()
            && self.deletes.is_empty()
            && self.decisions.is_empty()
            && self.candidates.is_empty()
    }
}

/// The catalog database.
pub struct Catalog {
    pub(crate) db: Database,
}

fn vec_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn bytes_vec(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect()
}

/// The catalog seam: everything the store and engine need from the source of truth.
///
/// [`Catalog`] (redb, embedded) and [`crate::postgres::PgCatalog`] implement it.
/// Contract: `commit` is atomic (all of a batch or none) and appends one [`ChangeSet`]
/// per generation; reads see whole commits. Every backend also keeps the audit log
/// ([`AuditLog`]) and the write routes' idempotency keys ([`IdempotencyLog`]) beside its
/// catalog.
pub trait CatalogBackend: AuditLog + IdempotencyLog + Send + Sync {
    /// The generation of the last commit (0 for a new catalog).
    fn generation(&self) -> Result<u64>;
    /// Every stored document version.
    fn documents(&self) -> Result<Vec<DocEntry>>;
    /// The stored versions among `keys` (missing ones left out).
    fn documents_by_key(&self, keys: &[DocKey]) -> Result<Vec<DocEntry>>;
    /// Chunks by sequence number, in the order asked; missing ones are left out.
    fn chunks(&self, seqs: &[u64]) -> Result<Vec<StoredChunk>>;
    /// Number of stored chunks.
    fn chunk_count(&self) -> Result<u64>;
    /// Visits stored chunks (all, or those in `only`) with their vectors from one
    /// snapshot; returns that snapshot's generation.
    fn for_each_chunk(
        &self,
        only: Option<&[u64]>,
        f: &mut dyn FnMut(StoredChunk, Vec<f32>) -> Result<()>,
    ) -> Result<u64>;
    /// The change sets after `generation`, or `None` when the log no longer covers it.
    fn changes_since(&self, generation: u64) -> Result<Option<Vec<ChangeSet>>>;
    fn principal(&self, id: &str) -> Result<Option<Principal>>;
    fn principals(&self) -> Result<Vec<Principal>>;
    fn record_schema(&self, tenant: &str, table: &str) -> Result<Option<RecordSchema>>;
    fn record(&self, tenant: &str, table: &str, key: &str) -> Result<Option<RecordRow>>;
    /// Number of stored rows per `(tenant, table)`.
    fn record_counts(&self) -> Result<HashMap<(String, String), usize>>;
    /// Every stored record table with its rows, from one snapshot.
    fn record_tables(&self) -> Result<Vec<(RecordSchema, Vec<RecordRow>)>>;
    /// Every review decision.
    fn decisions(&self) -> Result<Vec<Decision>>;
    /// Every model candidate (decided ones included; decisions say which).
    fn model_candidates(&self) -> Result<Vec<ModelCandidate>>;
    /// Writes `batch` in one transaction and returns what changed.
    fn commit(&self, batch: CommitBatch) -> Result<ChangeSet>;
    /// Whether this catalog searches vectors itself (pgvector), so that index
    /// generations hold no HNSW.
    fn searches_vectors(&self) -> bool {
        false
    }
    /// The `k` admitted chunks nearest `q`, when this catalog searches vectors itself;
    /// `None` when the index generation's own HNSW does (redb). `exact` asks for a
    /// scan of the admitted rows instead of the graph (the caller judged it cheaper).
    fn search_vectors(
        &self,
        _q: &[f32],
        _k: usize,
        _admit: &Admit,
        _exact: bool,
    ) -> Result<Option<Vec<Scored>>> {
        Ok(None)
    }
    /// Moves up to `max_rows` committed vectors that are not yet in this catalog's
    /// vector index into it (only when it searches vectors itself). Commits write
    /// vectors without paying for index maintenance; searches scan the not-yet-folded
    /// rows exactly, so nothing committed is ever unsearchable. At most one process
    /// folds at a time: a call that finds another folding returns at once, folding
    /// nothing.
    fn fold_vectors(&self, _max_rows: usize) -> Result<FoldStats> {
        Ok(FoldStats::default())
    }
}

/// What one [`CatalogBackend::fold_vectors`] call (or the embedded index's linking of
/// its tail) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct FoldStats {
    /// Vectors moved into the index by this call.
    pub folded: u64,
    /// Vectors still waiting after it.
    pub pending: u64,
    /// The index was rebuilt whole (a tail larger than the index, e.g. a first load).
    pub rebuilt: bool,
    /// Another process held the fold; this call did nothing.
    pub busy: bool,
    pub ms: f64,
}

/// The most memory redb's page cache may hold for the embedded catalog. redb's default
/// is 1 GiB, and the catalog holds the audit log too: under sustained load the cache
/// grew with the log and the server's RSS with it (issue 39: 108 MB to 1.24 GB over
/// 6 x 30 s of 200 connections, levelling only at the default). Pages past it are read
/// again through the operating system's file cache, which the kernel reclaims.
pub const CACHE_BYTES: usize = 256 << 20;

impl Catalog {
    pub fn open(path: &Path) -> Result<Catalog> {
        let db = redb::Builder::new()
            .set_cache_size(CACHE_BYTES)
            .create(path)?;
        let tx = db.begin_write()?;
        {
            tx.open_table(DOCS)?;
            tx.open_table(CHUNKS)?;
            tx.open_table(VECTORS)?;
            tx.open_table(SCHEMAS)?;
            tx.open_table(RECORDS)?;
            tx.open_table(PRINCIPALS)?;
            tx.open_table(META)?;
            tx.open_table(CHANGES)?;
            tx.open_table(REVIEWS)?;
            tx.open_table(CANDIDATES)?;
            crate::audit::create_tables(&tx)?;
            crate::idempotency::create_table(&tx)?;
        }
        tx.commit()?;
        Ok(Catalog { db })
    }
}

impl CatalogBackend for Catalog {
    /// The generation of the last commit (0 for a new catalog).
    fn generation(&self) -> Result<u64> {
        let rx = self.db.begin_read()?;
        let t = rx.open_table(META)?;
        Ok(t.get("generation")?.map_or(0, |g| g.value()))
    }

    /// Every stored document version.
    fn documents(&self) -> Result<Vec<DocEntry>> {
        let rx = self.db.begin_read()?;
        let t = rx.open_table(DOCS)?;
        let mut out = Vec::with_capacity(t.len()? as usize);
        for row in t.iter()? {
            let (_, v) = row?;
            out.push(serde_json::from_slice(v.value())?);
        }
        Ok(out)
    }

    fn documents_by_key(&self, keys: &[DocKey]) -> Result<Vec<DocEntry>> {
        let rx = self.db.begin_read()?;
        let t = rx.open_table(DOCS)?;
        let mut out = Vec::with_capacity(keys.len());
        for (tenant, doc_id, version) in keys {
            if let Some(v) = t.get(key(&[tenant, doc_id, version]).as_str())? {
                out.push(serde_json::from_slice(v.value())?);
            }
        }
        Ok(out)
    }

    /// Chunks by sequence number, in the order asked; missing ones are left out.
    fn chunks(&self, seqs: &[u64]) -> Result<Vec<StoredChunk>> {
        let rx = self.db.begin_read()?;
        let t = rx.open_table(CHUNKS)?;
        let mut out = Vec::with_capacity(seqs.len());
        for &s in seqs {
            if let Some(v) = t.get(s)? {
                out.push(serde_json::from_slice(v.value())?);
            }
        }
        Ok(out)
    }

    /// Number of stored chunks.
    fn chunk_count(&self) -> Result<u64> {
        let rx = self.db.begin_read()?;
        Ok(rx.open_table(CHUNKS)?.len()?)
    }

    /// Visits stored chunks (all, or those in `only`) with their vectors, in sequence
    /// order, from one read snapshot.
    fn for_each_chunk(
        &self,
        only: Option<&[u64]>,
        f: &mut dyn FnMut(StoredChunk, Vec<f32>) -> Result<()>,
    ) -> Result<u64> {
        let rx = self.db.begin_read()?;
        let (chunks, vectors) = (rx.open_table(CHUNKS)?, rx.open_table(VECTORS)?);
        let generation = rx
            .open_table(META)?
            .get("generation")?
            .map_or(0, |g| g.value());
        let mut visit = |seq: u64, raw: &[u8]| -> Result<()> {
            let c: StoredChunk = serde_json::from_slice(raw)?;
            let v = vectors
                .get(seq)?
                .map(|b| bytes_vec(b.value()))
                .ok_or_else(|| Error::Catalog(format!("chunk {seq} has no vector")))?;
            f(c, v)
        };
        match only {
            Some(seqs) => {
                for &s in seqs {
                    if let Some(raw) = chunks.get(s)? {
                        visit(s, raw.value())?;
                    }
                }
            }
            None => {
                for row in chunks.iter()? {
                    let (k, raw) = row?;
                    visit(k.value(), raw.value())?;
                }
            }
        }
        Ok(generation)
    }

    /// The change sets after `generation`, or `None` when the log no longer covers it.
    fn changes_since(&self, generation: u64) -> Result<Option<Vec<ChangeSet>>> {
        let rx = self.db.begin_read()?;
        let current = rx
            .open_table(META)?
            .get("generation")?
            .map_or(0, |g| g.value());
        let t = rx.open_table(CHANGES)?;
        let mut out = Vec::new();
        for g in generation + 1..=current {
            match t.get(g)? {
                Some(v) => out.push(serde_json::from_slice(v.value())?),
                None => return Ok(None),
            }
        }
        Ok(Some(out))
    }

    fn principal(&self, id: &str) -> Result<Option<Principal>> {
        let rx = self.db.begin_read()?;
        let t = rx.open_table(PRINCIPALS)?;
        Ok(match t.get(id)? {
            Some(v) => Some(serde_json::from_slice(v.value())?),
            None => None,
        })
    }

    fn principals(&self) -> Result<Vec<Principal>> {
        let rx = self.db.begin_read()?;
        let t = rx.open_table(PRINCIPALS)?;
        let mut out = Vec::new();
        for row in t.iter()? {
            out.push(serde_json::from_slice(row?.1.value())?);
        }
        Ok(out)
    }

    fn record_schema(&self, tenant: &str, table: &str) -> Result<Option<RecordSchema>> {
        let rx = self.db.begin_read()?;
        let t = rx.open_table(SCHEMAS)?;
        Ok(match t.get(key(&[tenant, table]).as_str())? {
            Some(v) => Some(serde_json::from_slice(v.value())?),
            None => None,
        })
    }

    fn record(&self, tenant: &str, table: &str, k: &str) -> Result<Option<RecordRow>> {
        let rx = self.db.begin_read()?;
        let t = rx.open_table(RECORDS)?;
        Ok(match t.get(key(&[tenant, table, k]).as_str())? {
            Some(v) => Some(serde_json::from_slice(v.value())?),
            None => None,
        })
    }

    /// Number of stored rows per `(tenant, table)`.
    fn record_counts(&self) -> Result<HashMap<(String, String), usize>> {
        let rx = self.db.begin_read()?;
        let t = rx.open_table(RECORDS)?;
        let mut out: HashMap<(String, String), usize> = HashMap::new();
        for row in t.iter()? {
            let (k, _) = row?;
            let mut parts = k.value().split(SEP);
            let (a, b) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            *out.entry((a.to_string(), b.to_string())).or_default() += 1;
        }
        Ok(out)
    }

    /// Every stored record table with its rows, from one snapshot.
    fn record_tables(&self) -> Result<Vec<(RecordSchema, Vec<RecordRow>)>> {
        let rx = self.db.begin_read()?;
        let (schemas, records) = (rx.open_table(SCHEMAS)?, rx.open_table(RECORDS)?);
        let mut out: Vec<(RecordSchema, Vec<RecordRow>)> = Vec::new();
        let mut at: HashMap<String, usize> = HashMap::new();
        for row in schemas.iter()? {
            let (k, v) = row?;
            at.insert(k.value().to_string(), out.len());
            out.push((serde_json::from_slice(v.value())?, Vec::new()));
        }
        for row in records.iter()? {
            let (k, v) = row?;
            let mut parts = k.value().split(SEP);
            let table_key = key(&[parts.next().unwrap_or(""), parts.next().unwrap_or("")]);
            if let Some(&i) = at.get(&table_key) {
                out[i].1.push(serde_json::from_slice(v.value())?);
            }
        }
        Ok(out)
    }

    fn decisions(&self) -> Result<Vec<Decision>> {
        let rx = self.db.begin_read()?;
        let t = rx.open_table(REVIEWS)?;
        let mut out = Vec::new();
        for row in t.iter()? {
            out.push(serde_json::from_slice(row?.1.value())?);
        }
        Ok(out)
    }

    fn model_candidates(&self) -> Result<Vec<ModelCandidate>> {
        let rx = self.db.begin_read()?;
        let t = rx.open_table(CANDIDATES)?;
        let mut out = Vec::new();
        for row in t.iter()? {
            out.push(serde_json::from_slice(row?.1.value())?);
        }
        Ok(out)
    }

    /// Writes `batch` in one transaction and returns what changed. Documents whose
    /// tenant, id, version and digest are already stored must be filtered out by the
    /// caller; a stored version with another digest is replaced.
    fn commit(&self, batch: CommitBatch) -> Result<ChangeSet> {
        let tx = self.db.begin_write()?;
        let mut change = ChangeSet {
            tenants: tenants_touched(&batch),
            records: Some(record_tenants(&batch)),
            ..ChangeSet::default()
        };
        {
            let mut meta = tx.open_table(META)?;
            let mut docs = tx.open_table(DOCS)?;
            let mut chunks = tx.open_table(CHUNKS)?;
            let mut vectors = tx.open_table(VECTORS)?;
            let get = |m: &redb::Table<&str, u64>, k: &str| -> Result<u64> {
                Ok(m.get(k)?.map_or(0, |v| v.value()))
            };
            let mut next_seq = get(&meta, "next_seq")?;
            let mut next_dv = get(&meta, "next_dv")?;
            let generation = get(&meta, "generation")? + 1;

            let remove_doc = |docs: &mut redb::Table<&str, &[u8]>,
                              chunks: &mut redb::Table<u64, &[u8]>,
                              vectors: &mut redb::Table<u64, &[u8]>,
                              k: &str,
                              change: &mut ChangeSet|
             -> Result<bool> {
                let old: Option<DocEntry> = match docs.remove(k)? {
                    Some(v) => Some(serde_json::from_slice(v.value())?),
                    None => None,
                };
                let Some(old) = old else { return Ok(false) };
                change.docs.push(doc_key(&old.meta));
                for s in old.seqs {
                    chunks.remove(s)?;
                    vectors.remove(s)?;
                    change.removed.push(s);
                }
                Ok(true)
            };

            for (tenant, doc_id, version) in &batch.deletes {
                let keys: Vec<String> = match version {
                    Some(v) => vec![key(&[tenant, doc_id, v])],
                    None => {
                        let prefix = key(&[tenant, doc_id, ""]);
                        let mut ks = Vec::new();
                        for row in docs.range(prefix.as_str()..)? {
                            let (k, _) = row?;
                            if !k.value().starts_with(&prefix) {
                                break;
                            }
                            ks.push(k.value().to_string());
                        }
                        ks
                    }
                };
                let mut any = false;
                for k in keys {
                    any |= remove_doc(&mut docs, &mut chunks, &mut vectors, &k, &mut change)?;
                }
                if !any {
                    return Err(unknown_document(tenant, doc_id, version.as_deref()));
                }
            }

            for doc in batch.documents {
                check_vectors(&doc)?;
                let k = key(&[&doc.meta.tenant, &doc.meta.doc_id, &doc.meta.version]);
                remove_doc(&mut docs, &mut chunks, &mut vectors, &k, &mut change)?;
                let dv = take_ordinal(&mut next_dv)?;
                let sketch = doc_sketch(&doc.chunks);
                let mut seqs = Vec::with_capacity(doc.chunks.len());
                for (c, v) in doc.chunks.into_iter().zip(doc.vectors) {
                    let seq = next_seq;
                    next_seq += 1;
                    let stored = StoredChunk { seq, dv, chunk: c };
                    chunks.insert(seq, serde_json::to_vec(&stored)?.as_slice())?;
                    vectors.insert(seq, vec_bytes(&v).as_slice())?;
                    seqs.push(seq);
                    change.added.push(seq);
                }
                let entry = DocEntry {
                    meta: doc.meta,
                    dv,
                    seqs,
                    sketch,
                };
                change.docs.push(doc_key(&entry.meta));
                docs.insert(k.as_str(), serde_json::to_vec(&entry)?.as_slice())?;
            }

            let mut schemas = tx.open_table(SCHEMAS)?;
            let mut records = tx.open_table(RECORDS)?;
            for (schema, rows) in batch.tables {
                let prefix = key(&[&schema.tenant, &schema.table, ""]);
                let mut stale = Vec::new();
                for row in records.range(prefix.as_str()..)? {
                    let (k, _) = row?;
                    if !k.value().starts_with(&prefix) {
                        break;
                    }
                    stale.push(k.value().to_string());
                }
                for k in stale {
                    records.remove(k.as_str())?;
                }
                for r in rows {
                    let k = key(&[&schema.tenant, &schema.table, &r.key]);
                    records.insert(k.as_str(), serde_json::to_vec(&r)?.as_slice())?;
                }
                let k = key(&[&schema.tenant, &schema.table]);
                schemas.insert(k.as_str(), serde_json::to_vec(&schema)?.as_slice())?;
            }
            let mut principals = tx.open_table(PRINCIPALS)?;
            for g in batch.principals {
                let stored = match principals.get(g.principal().id.as_str())? {
                    Some(v) => Some(serde_json::from_slice::<Principal>(v.value())?),
                    None => None,
                };
                g.check_still_holds(stored.as_ref())?;
                let p = g.into_principal();
                principals.insert(p.id.as_str(), serde_json::to_vec(&p)?.as_slice())?;
            }
            let mut reviews = tx.open_table(REVIEWS)?;
            for d in batch.decisions {
                let k = key(&[&d.tenant, &d.id]);
                reviews.insert(k.as_str(), serde_json::to_vec(&d)?.as_slice())?;
            }
            let mut candidates = tx.open_table(CANDIDATES)?;
            for c in batch.candidates {
                let k = key(&[&c.tenant, &c.id]);
                candidates.insert(k.as_str(), serde_json::to_vec(&c)?.as_slice())?;
            }

            change.generation = generation;
            meta.insert("generation", generation)?;
            meta.insert("next_seq", next_seq)?;
            meta.insert("next_dv", next_dv)?;
            let mut changes = tx.open_table(CHANGES)?;
            changes.insert(generation, serde_json::to_vec(&change)?.as_slice())?;
        }
        tx.commit()?;
        Ok(change)
    }
}
