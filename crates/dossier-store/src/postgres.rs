//! The shared catalog: PostgreSQL + pgvector behind the same [`CatalogBackend`] contract
//! as the embedded redb catalog, so several `dossier serve` replicas and the CLI can work
//! on one store at once.
//!
//! What lives where: Postgres holds everything the embedded catalog holds (documents,
//! versions, chunks, vectors, records, principals, review decisions, candidates, the
//! change log) and answers vector searches itself (pgvector HNSW, the admission set
//! applied inside the index scan). BM25 stays a tantivy index per replica, derived from
//! the change log like the embedded store's (a lexical index is cheap to rebuild and
//! fast in process; Postgres full-text search has neither jieba nor BM25).
//!
//! Commits take the `counters` row `FOR UPDATE`, so commits from every replica are
//! serialised and the change log is gapless.
//!
//! Commits cost what they change: HNSW insertion grows with the graph (about 3 s per
//! 1,000 rows at 110k rows), so a commit writes its vectors as a *tail*
//! (`indexed = false`, outside the partial HNSW index), a search scans the tail exactly
//! beside the index in one statement, and [`CatalogBackend::fold_vectors`] moves tail rows
//! into the index later, one process at a time.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dossier_core::review::{Decision, ModelCandidate};
use dossier_core::{Principal, RecordRow, RecordSchema};
use dossier_index::{Admit, Scored};
use pgvector::Vector;
use postgres::{IsolationLevel, NoTls, Transaction};
use r2d2_postgres::PostgresConnectionManager;

use crate::catalog::{
    check_vectors, doc_key, record_tenants, take_ordinal, tenants_touched, unknown_document,
    CatalogBackend, ChangeSet, CommitBatch, DocEntry, DocKey, FoldStats, StoredChunk,
};
use crate::store::Manifest;
use crate::{Error, Result};

mod embedded {
    refinery::embed_migrations!("migrations");
}

type Pool = r2d2::Pool<PostgresConnectionManager<NoTls>>;

/// Connections a process keeps to the database.
const POOL_SIZE: u32 = 16;
/// How long a caller waits for a free connection before the request fails.
const CONNECTION_WAIT: Duration = Duration::from_secs(10);
/// Chunks fetched per round trip while streaming the whole catalog.
const STREAM_BATCH: i64 = 2_000;
/// Most index tuples one filtered vector search may visit (pgvector iterative scans):
/// bounds the work of a search whose scope admits few chunks.
const MAX_SCAN_TUPLES: i64 = 200_000;
/// The advisory lock key a fold holds, so that one process folds at a time (the schema
/// lock of `migrate` is 7305611).
pub const FOLD_LOCK: i64 = 7305612;
/// Tail rows moved into the index per transaction by an incremental fold: each
/// transaction holds its rows' locks (a commit replacing one of those documents waits
/// for it), so it stays short — HNSW insertion took 7 s per 1,000 rows at 50k rows of
/// 384 dimensions on a busy 2-core machine.
const FOLD_BATCH: i64 = 256;
/// Tail rows marked indexed per transaction while the index is dropped for a rebuild
/// (no HNSW to maintain: cheap, but still row locks a commit may wait on).
const REBUILD_BATCH: i64 = 20_000;
/// A tail at least this long, and at least as long as the indexed part, is folded by
/// rebuilding the index whole rather than row by row (see `set_fold_rebuild_threshold`).
const DEFAULT_REBUILD_THRESHOLD: u64 = 50_000;
/// Parallel workers asked for while rebuilding the index (the server's own
/// `max_parallel_workers` still bounds them).
const REBUILD_WORKERS: i64 = 4;

/// A catalog in a PostgreSQL database.
pub struct PgCatalog {
    /// Always `Some` until dropped (see `Drop`).
    pool: Option<Pool>,
    /// For the fold's own connection, outside the pool: it holds a session lock and
    /// session settings, which must never go back to the pool with it.
    config: postgres::Config,
    /// The URL with any password removed, for messages.
    shown: String,
    /// See [`PgCatalog::set_fold_rebuild_threshold`].
    rebuild_threshold: AtomicU64,
}

/// The statement that builds the vector index: HNSW over the folded rows only, so that a
/// commit's rows (`indexed = false`) cost no graph maintenance. The migration to the
/// tail (`V3__vector_tail.sql`) writes the same definition.
fn hnsw_index_sql(concurrently: bool) -> String {
    format!(
        "CREATE INDEX {} chunks_embedding ON chunks USING hnsw (embedding vector_ip_ops)
             WITH (m = 16, ef_construction = 100) WHERE indexed",
        if concurrently { "CONCURRENTLY" } else { "" }
    )
}

/// A database error with the server's own message (`postgres::Error`'s display says only
/// "db error" for those).
pub(crate) fn pg(e: postgres::Error) -> Error {
    match e.as_db_error() {
        Some(db) => Error::Catalog(format!("postgres: {}: {}", db.code().code(), db.message())),
        None => Error::Catalog(format!("postgres: {e}")),
    }
}

/// `url` without its password, fit for messages and logs.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.find(':') {
                Some(c) => format!("{}{}:***{}", &url[..s + 3], &creds[..c], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

impl PgCatalog {
    /// Connects, and brings the schema up to date (versioned migrations, applied once
    /// under an advisory lock so that replicas starting together do not race).
    pub fn connect(url: &str) -> Result<PgCatalog> {
        let shown = redact(url);
        let config: postgres::Config = url
            .parse()
            .map_err(|e| Error::Invalid(format!("store URL {shown}: {e}")))?;
        let manager = PostgresConnectionManager::new(config.clone(), NoTls);
        let pool = r2d2::Pool::builder()
            .max_size(POOL_SIZE)
            .min_idle(Some(1))
            .connection_timeout(CONNECTION_WAIT)
            .build(manager)
            .map_err(|e| Error::Catalog(format!("cannot connect to {shown}: {e}")))?;
        let catalog = PgCatalog {
            pool: Some(pool),
            config,
            shown,
            rebuild_threshold: AtomicU64::new(DEFAULT_REBUILD_THRESHOLD),
        };
        catalog.migrate()?;
        Ok(catalog)
    }

    /// The manifest of the store at `url`, if one was created — over one plain
    /// connection, without the pool or the migrations that opening the store sets up
    /// (the store is opened right after, and would set them up a second time).
    pub fn read_manifest(url: &str) -> Result<Option<Manifest>> {
        let shown = redact(url);
        let mut config: postgres::Config = url
            .parse()
            .map_err(|e| Error::Invalid(format!("store URL {shown}: {e}")))?;
        let mut c = config
            .connect_timeout(CONNECTION_WAIT)
            .connect(NoTls)
            .map_err(|e| Error::Catalog(format!("cannot connect to {shown}: {e}")))?;
        let exists: bool = c
            .query_one("SELECT to_regclass('manifest') IS NOT NULL", &[])
            .map_err(pg)?
            .get(0);
        if !exists {
            return Ok(None);
        }
        match c
            .query_opt("SELECT body FROM manifest WHERE id = 1", &[])
            .map_err(pg)?
        {
            Some(r) => Ok(Some(serde_json::from_slice(r.get::<_, &[u8]>(0))?)),
            None => Ok(None),
        }
    }

    /// The URL this catalog was opened with, password removed.
    pub fn shown_url(&self) -> &str {
        &self.shown
    }

    pub(crate) fn client(
        &self,
    ) -> Result<r2d2::PooledConnection<PostgresConnectionManager<NoTls>>> {
        self.pool
            .as_ref()
            .expect("the pool lives as long as the catalog")
            .get()
            .map_err(|e| Error::Catalog(format!("{}: {e}", self.shown)))
    }

    fn migrate(&self) -> Result<()> {
        let mut c = self.client()?;
        // One key for "Dossier's schema"; released with the session's lock call below.
        c.execute("SELECT pg_advisory_lock(7305611)", &[])
            .map_err(pg)?;
        let result = embedded::migrations::runner()
            .set_migration_table_name("dossier_schema_history")
            .run(&mut *c)
            .map(|_| ())
            .map_err(|e| Error::Catalog(format!("migrating {}: {e}", self.shown)));
        c.execute("SELECT pg_advisory_unlock(7305611)", &[])
            .map_err(pg)?;
        result
    }

    /// The stored manifest, if the store was created.
    pub fn manifest(&self) -> Result<Option<Manifest>> {
        let mut c = self.client()?;
        let row = c
            .query_opt("SELECT body FROM manifest WHERE id = 1", &[])
            .map_err(pg)?;
        Ok(match row {
            Some(r) => Some(serde_json::from_slice(r.get::<_, &[u8]>(0))?),
            None => None,
        })
    }

    /// Creates the store: writes `m` and adds the embedding column of its dimension with
    /// its HNSW index (partial: folded rows only). Returns the stored manifest (another
    /// replica's if it won the race).
    pub fn create(&self, m: &Manifest) -> Result<Manifest> {
        let mut c = self.client()?;
        let mut tx = c.transaction().map_err(pg)?;
        tx.execute("LOCK TABLE manifest IN EXCLUSIVE MODE", &[])
            .map_err(pg)?;
        if let Some(r) = tx
            .query_opt("SELECT body FROM manifest WHERE id = 1", &[])
            .map_err(pg)?
        {
            return Ok(serde_json::from_slice(r.get::<_, &[u8]>(0))?);
        }
        let dim = m.dim;
        if dim == 0 || dim > 16_000 {
            return Err(Error::Invalid(format!("vector dimension {dim}")));
        }
        tx.batch_execute(&format!(
            "ALTER TABLE chunks ADD COLUMN embedding vector({dim}) NOT NULL;
             {};",
            hnsw_index_sql(false)
        ))
        .map_err(pg)?;
        tx.execute(
            "INSERT INTO manifest (id, body) VALUES (1, $1)",
            &[&serde_json::to_vec(m)?],
        )
        .map_err(pg)?;
        tx.commit().map_err(pg)?;
        Ok(m.clone())
    }

    /// Writes a job's state (`body`, the server's JSON of it) and renews its heartbeat.
    pub fn job_save(
        &self,
        id: &str,
        tenant: &str,
        owner: &str,
        status: &str,
        body: &[u8],
    ) -> Result<()> {
        let mut c = self.client()?;
        c.execute(
            "INSERT INTO jobs (id, tenant, owner, status, body) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, body = EXCLUDED.body,
                 heartbeat_at = now()
             WHERE jobs.owner = EXCLUDED.owner AND jobs.tenant = EXCLUDED.tenant",
            &[&id, &tenant, &owner, &status, &body],
        )
        .map_err(pg)?;
        Ok(())
    }

    /// A job of `tenant` by id (another tenant's reads as missing).
    pub fn job_get(&self, tenant: &str, id: &str) -> Result<Option<Vec<u8>>> {
        let mut c = self.client()?;
        Ok(c.query_opt(
            "SELECT body FROM jobs WHERE tenant = $1 AND id = $2",
            &[&tenant, &id],
        )
        .map_err(pg)?
        .map(|r| r.get(0)))
    }

    /// The newest `limit` jobs of `tenant`, newest first.
    pub fn job_list(&self, tenant: &str, limit: i64) -> Result<Vec<Vec<u8>>> {
        let mut c = self.client()?;
        Ok(c.query(
            "SELECT body FROM jobs WHERE tenant = $1 ORDER BY created_at DESC, id DESC LIMIT $2",
            &[&tenant, &limit],
        )
        .map_err(pg)?
        .iter()
        .map(|r| r.get(0))
        .collect())
    }

    /// Jobs still queued or running whose owner has not renewed their heartbeat for
    /// `stale`: their replica stopped. `fail` rewrites each body (given its owner) as
    /// failed; each is
    /// claimed row by row (`SKIP LOCKED`), so two replicas never report one twice.
    pub fn jobs_fail_abandoned(
        &self,
        stale: Duration,
        fail: &dyn Fn(&[u8], &str) -> Vec<u8>,
    ) -> Result<usize> {
        let mut c = self.client()?;
        let mut tx = c.transaction().map_err(pg)?;
        let secs = stale.as_secs_f64();
        let rows = tx
            .query(
                "SELECT id, body, owner FROM jobs WHERE status IN ('queued', 'running')
                 AND heartbeat_at < now() - make_interval(secs => $1)
                 FOR UPDATE SKIP LOCKED",
                &[&secs],
            )
            .map_err(pg)?;
        for r in &rows {
            let id: &str = r.get(0);
            tx.execute(
                "UPDATE jobs SET status = 'failed', body = $2 WHERE id = $1",
                &[&id, &fail(r.get(1), r.get(2))],
            )
            .map_err(pg)?;
        }
        tx.commit().map_err(pg)?;
        Ok(rows.len())
    }

    /// How long ago the first commit after `generation` was made, in milliseconds
    /// (the database's clock on both ends); `None` when there is none.
    pub fn unreplayed_for_ms(&self, generation: u64) -> Result<Option<f64>> {
        let mut c = self.client()?;
        let g = i64_of(generation)?;
        Ok(c.query_opt(
            "SELECT (extract(epoch FROM now() - committed_at) * 1000)::float8
                 FROM changes WHERE generation = $1::int8 + 1",
            &[&g],
        )
        .map_err(pg)?
        .map(|r| r.get::<_, f64>(0)))
    }

    /// Whether the database answers, and its server version.
    pub fn ping(&self) -> Result<String> {
        let mut c = self.client()?;
        let row = c.query_one("SHOW server_version", &[]).map_err(pg)?;
        Ok(row.get(0))
    }
}

/// The `postgres` client closes a connection by blocking on its own runtime, which
/// panics on a thread that drives async tasks — and the last owner of a store may well
/// be an async task (a server's background job, a test). So the pool is closed on a
/// plain thread of its own.
impl Drop for PgCatalog {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            let _ = std::thread::spawn(move || drop(pool)).join();
        }
    }
}

/// A read-only transaction that sees one commit throughout.
fn snapshot<'a>(c: &'a mut postgres::Client) -> Result<Transaction<'a>> {
    c.build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .map_err(pg)
}

/// The generation of the last commit, as `tx` sees it.
fn last_generation(tx: &mut Transaction) -> Result<i64> {
    Ok(tx
        .query_one("SELECT generation FROM counters WHERE id = 1", &[])
        .map_err(pg)?
        .get(0))
}

fn i64_of(v: u64) -> Result<i64> {
    i64::try_from(v).map_err(|_| Error::Invalid(format!("{v} out of range")))
}

fn doc_of(body: &[u8]) -> Result<DocEntry> {
    Ok(serde_json::from_slice(body)?)
}

/// Reads a chunk row `(seq, dv, body[, embedding])` into a stored chunk.
fn chunk_of(row: &postgres::Row) -> Result<StoredChunk> {
    Ok(serde_json::from_slice(row.get::<_, &[u8]>(2))?)
}

impl CatalogBackend for PgCatalog {
    fn generation(&self) -> Result<u64> {
        let mut c = self.client()?;
        let g: i64 = c
            .query_one("SELECT generation FROM counters WHERE id = 1", &[])
            .map_err(pg)?
            .get(0);
        Ok(g as u64)
    }

    fn documents(&self) -> Result<Vec<DocEntry>> {
        let mut c = self.client()?;
        c.query(
            "SELECT body FROM docs ORDER BY tenant, doc_id, version",
            &[],
        )
        .map_err(pg)?
        .iter()
        .map(|r| doc_of(r.get(0)))
        .collect()
    }

    fn documents_by_key(&self, keys: &[DocKey]) -> Result<Vec<DocEntry>> {
        let (mut t, mut d, mut v) = (Vec::new(), Vec::new(), Vec::new());
        for (tenant, doc_id, version) in keys {
            t.push(tenant.as_str());
            d.push(doc_id.as_str());
            v.push(version.as_str());
        }
        let mut c = self.client()?;
        c.query(
            "SELECT docs.body FROM docs
             JOIN unnest($1::text[], $2::text[], $3::text[]) AS k(tenant, doc_id, version)
               USING (tenant, doc_id, version)",
            &[&t, &d, &v],
        )
        .map_err(pg)?
        .iter()
        .map(|r| doc_of(r.get(0)))
        .collect()
    }

    fn chunks(&self, seqs: &[u64]) -> Result<Vec<StoredChunk>> {
        let ids: Vec<i64> = seqs.iter().map(|&s| i64_of(s)).collect::<Result<_>>()?;
        let mut c = self.client()?;
        let rows = c
            .query(
                "SELECT seq, dv, body FROM chunks WHERE seq = ANY($1)",
                &[&ids],
            )
            .map_err(pg)?;
        let mut by_seq: HashMap<u64, StoredChunk> = HashMap::with_capacity(rows.len());
        for r in &rows {
            let c = chunk_of(r)?;
            by_seq.insert(c.seq, c);
        }
        // In the order asked, missing ones left out, as the contract says.
        Ok(seqs.iter().filter_map(|s| by_seq.remove(s)).collect())
    }

    fn chunk_count(&self) -> Result<u64> {
        let mut c = self.client()?;
        let n: i64 = c
            .query_one("SELECT count(*) FROM chunks", &[])
            .map_err(pg)?
            .get(0);
        Ok(n as u64)
    }

    fn for_each_chunk(
        &self,
        only: Option<&[u64]>,
        f: &mut dyn FnMut(StoredChunk, Vec<f32>) -> Result<()>,
    ) -> Result<u64> {
        let mut c = self.client()?;
        // One snapshot for the generation and every chunk read.
        let mut tx = snapshot(&mut c)?;
        let generation = last_generation(&mut tx)?;
        let visit = |rows: Vec<postgres::Row>,
                     f: &mut dyn FnMut(StoredChunk, Vec<f32>) -> Result<()>|
         -> Result<()> {
            for r in rows {
                let chunk = chunk_of(&r)?;
                let v: Vector = r.get(3);
                f(chunk, v.to_vec())?;
            }
            Ok(())
        };
        match only {
            Some(seqs) => {
                for part in seqs.chunks(STREAM_BATCH as usize) {
                    let ids: Vec<i64> = part.iter().map(|&s| i64_of(s)).collect::<Result<_>>()?;
                    let rows = tx
                        .query(
                            "SELECT seq, dv, body, embedding FROM chunks
                             WHERE seq = ANY($1) ORDER BY seq",
                            &[&ids],
                        )
                        .map_err(pg)?;
                    visit(rows, f)?;
                }
            }
            None => {
                // Keyset pagination: each page is an index range scan, whatever the size.
                let mut after: i64 = -1;
                loop {
                    let rows = tx
                        .query(
                            "SELECT seq, dv, body, embedding FROM chunks
                             WHERE seq > $1 ORDER BY seq LIMIT $2",
                            &[&after, &STREAM_BATCH],
                        )
                        .map_err(pg)?;
                    let Some(last) = rows.last() else { break };
                    after = last.get(0);
                    let n = rows.len();
                    visit(rows, f)?;
                    if (n as i64) < STREAM_BATCH {
                        break;
                    }
                }
            }
        }
        tx.commit().map_err(pg)?;
        Ok(generation as u64)
    }

    fn changes_since(&self, generation: u64) -> Result<Option<Vec<ChangeSet>>> {
        let mut c = self.client()?;
        let mut tx = snapshot(&mut c)?;
        let current = last_generation(&mut tx)?;
        let from = i64_of(generation)?;
        let rows = tx
            .query(
                "SELECT generation, body FROM changes
                 WHERE generation > $1 AND generation <= $2 ORDER BY generation",
                &[&from, &current],
            )
            .map_err(pg)?;
        if rows.len() as i64 != (current - from).max(0) {
            return Ok(None);
        }
        let out = rows
            .iter()
            .map(|r| serde_json::from_slice(r.get::<_, &[u8]>(1)).map_err(Error::from))
            .collect::<Result<Vec<ChangeSet>>>()?;
        tx.commit().map_err(pg)?;
        Ok(Some(out))
    }

    fn principal(&self, id: &str) -> Result<Option<Principal>> {
        let mut c = self.client()?;
        match c
            .query_opt("SELECT body FROM principals WHERE id = $1", &[&id])
            .map_err(pg)?
        {
            Some(r) => Ok(Some(serde_json::from_slice(r.get::<_, &[u8]>(0))?)),
            None => Ok(None),
        }
    }

    fn principals(&self) -> Result<Vec<Principal>> {
        let mut c = self.client()?;
        c.query("SELECT body FROM principals ORDER BY id", &[])
            .map_err(pg)?
            .iter()
            .map(|r| serde_json::from_slice(r.get::<_, &[u8]>(0)).map_err(Error::from))
            .collect()
    }

    fn record_schema(&self, tenant: &str, table: &str) -> Result<Option<RecordSchema>> {
        let mut c = self.client()?;
        match c
            .query_opt(
                "SELECT body FROM record_schemas WHERE tenant = $1 AND tbl = $2",
                &[&tenant, &table],
            )
            .map_err(pg)?
        {
            Some(r) => Ok(Some(serde_json::from_slice(r.get::<_, &[u8]>(0))?)),
            None => Ok(None),
        }
    }

    fn record(&self, tenant: &str, table: &str, key: &str) -> Result<Option<RecordRow>> {
        let mut c = self.client()?;
        match c
            .query_opt(
                "SELECT body FROM records WHERE tenant = $1 AND tbl = $2 AND key = $3",
                &[&tenant, &table, &key],
            )
            .map_err(pg)?
        {
            Some(r) => Ok(Some(serde_json::from_slice(r.get::<_, &[u8]>(0))?)),
            None => Ok(None),
        }
    }

    fn record_counts(&self) -> Result<HashMap<(String, String), usize>> {
        let mut c = self.client()?;
        Ok(c.query(
            "SELECT tenant, tbl, count(*) FROM records GROUP BY tenant, tbl",
            &[],
        )
        .map_err(pg)?
        .iter()
        .map(|r| ((r.get(0), r.get(1)), r.get::<_, i64>(2) as usize))
        .collect())
    }

    fn record_tables(&self) -> Result<Vec<(RecordSchema, Vec<RecordRow>)>> {
        let mut c = self.client()?;
        let mut tx = snapshot(&mut c)?;
        let mut out: Vec<(RecordSchema, Vec<RecordRow>)> = Vec::new();
        let mut at: HashMap<(String, String), usize> = HashMap::new();
        for r in tx
            .query(
                "SELECT tenant, tbl, body FROM record_schemas ORDER BY tenant, tbl",
                &[],
            )
            .map_err(pg)?
        {
            at.insert((r.get(0), r.get(1)), out.len());
            out.push((serde_json::from_slice(r.get::<_, &[u8]>(2))?, Vec::new()));
        }
        for r in tx
            .query(
                "SELECT tenant, tbl, body FROM records ORDER BY tenant, tbl, key",
                &[],
            )
            .map_err(pg)?
        {
            if let Some(&i) = at.get(&(r.get(0), r.get(1))) {
                out[i].1.push(serde_json::from_slice(r.get::<_, &[u8]>(2))?);
            }
        }
        tx.commit().map_err(pg)?;
        Ok(out)
    }

    fn decisions(&self) -> Result<Vec<Decision>> {
        let mut c = self.client()?;
        c.query("SELECT body FROM reviews ORDER BY tenant, id", &[])
            .map_err(pg)?
            .iter()
            .map(|r| serde_json::from_slice(r.get::<_, &[u8]>(0)).map_err(Error::from))
            .collect()
    }

    fn model_candidates(&self) -> Result<Vec<ModelCandidate>> {
        let mut c = self.client()?;
        c.query("SELECT body FROM model_candidates ORDER BY tenant, id", &[])
            .map_err(pg)?
            .iter()
            .map(|r| serde_json::from_slice(r.get::<_, &[u8]>(0)).map_err(Error::from))
            .collect()
    }

    fn commit(&self, batch: CommitBatch) -> Result<ChangeSet> {
        let mut c = self.client()?;
        let mut tx = c.transaction().map_err(pg)?;
        let change = write_batch(&mut tx, batch)?;
        tx.commit().map_err(pg)?;
        Ok(change)
    }

    fn searches_vectors(&self) -> bool {
        true
    }

    fn search_vectors(
        &self,
        q: &[f32],
        k: usize,
        admit: &Admit,
        exact: bool,
    ) -> Result<Option<Vec<Scored>>> {
        if k == 0 || admit.is_empty() {
            return Ok(Some(Vec::new()));
        }
        if exact {
            return self.search_vectors_exact(q, k, admit).map(Some);
        }
        let dvs: Vec<i32> = admit.ordinals().map(|o| o as i32).collect();
        let limit = k as i64;
        // The candidate list of the HNSW scan. On the filtered 100k-chunk synthetic
        // store (hash vectors, the worst case for a graph) recall@10 against the exact
        // scan was 0.86 at ef_search 100, 0.95 at 400 and 0.97 at 1000 (BENCHMARKS.md).
        let ef = (k * 40).clamp(200, 1000) as i64;
        let mut c = self.client()?;
        let mut tx = c.transaction().map_err(pg)?;
        // The admission set is applied inside the HNSW scan: with iterative scans the
        // index keeps walking until `k` admitted rows are found (or the tuple bound is
        // reached), so the top-k is cut from admitted rows only — never post-filtered.
        // The settings touch only the HNSW scan of the first branch below.
        tx.batch_execute(&format!(
            "SET LOCAL hnsw.iterative_scan = relaxed_order;
             SET LOCAL hnsw.ef_search = {ef};
             SET LOCAL hnsw.max_scan_tuples = {MAX_SCAN_TUPLES};"
        ))
        .map_err(pg)?;
        // The folded rows through the partial HNSW index, the tail (commits not folded
        // yet) by an exact scan of `chunks_pending`'s rows. One statement is one
        // snapshot: a fold committing meanwhile moves a row from one branch to the other
        // either wholly before it or wholly after, so no row is seen twice or missed.
        let rows = tx
            .query(
                "(SELECT seq, (embedding <#> $1) AS d FROM chunks
                  WHERE indexed AND dv = ANY($2) ORDER BY embedding <#> $1 LIMIT $3)
                 UNION ALL
                 (SELECT seq, (embedding <#> $1) AS d FROM chunks
                  WHERE NOT indexed AND dv = ANY($2) ORDER BY embedding <#> $1 LIMIT $3)",
                &[&Vector::from(q.to_vec()), &dvs, &limit],
            )
            .map_err(pg)?;
        tx.commit().map_err(pg)?;
        let mut out: Vec<Scored> = rows
            .iter()
            .map(|r| Scored {
                seq: r.get::<_, i64>(0) as u64,
                // `<#>` is the negative inner product; vectors are unit length.
                score: -(r.get::<_, f64>(1) as f32),
            })
            .collect();
        // Two branches to merge; and relaxed_order may return near-ties out of order.
        out.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.seq.cmp(&b.seq)));
        out.truncate(k);
        Ok(Some(out))
    }

    fn fold_vectors(&self, max_rows: usize) -> Result<FoldStats> {
        let started = Instant::now();
        // A connection of its own, closed at the end: the session lock and settings die
        // with it whatever happens (an error half way, a killed rebuild), instead of
        // going back to the pool still held.
        let mut c = self
            .config
            .clone()
            .connect_timeout(CONNECTION_WAIT)
            .connect(NoTls)
            .map_err(|e| Error::Catalog(format!("cannot connect to {}: {e}", self.shown)))?;
        // A session lock, not a transaction's: a rebuild runs statements that cannot
        // run inside a transaction block, and must hold the fold throughout.
        let mine: bool = c
            .query_one("SELECT pg_try_advisory_lock($1)", &[&FOLD_LOCK])
            .map_err(pg)?
            .get(0);
        if !mine {
            return Ok(FoldStats {
                pending: pending_on(&mut c)?,
                busy: true,
                ms: started.elapsed().as_secs_f64() * 1e3,
                ..FoldStats::default()
            });
        }
        let mut stats = self.fold_locked(&mut c, max_rows)?;
        c.execute("SELECT pg_advisory_unlock($1)", &[&FOLD_LOCK])
            .map_err(pg)?;
        stats.ms = started.elapsed().as_secs_f64() * 1e3;
        Ok(stats)
    }
}

/// Vectors committed and not yet folded into the index (counted through
/// `chunks_pending`, which holds only those).
fn pending_on(c: &mut postgres::Client) -> Result<u64> {
    let n: i64 = c
        .query_one("SELECT count(*) FROM chunks WHERE NOT indexed", &[])
        .map_err(pg)?
        .get(0);
    Ok(n as u64)
}

impl PgCatalog {
    /// Vectors committed and not yet folded into the vector index: what searches scan
    /// exactly beside it, and what [`CatalogBackend::fold_vectors`] has left to do.
    pub fn pending_vectors(&self) -> Result<u64> {
        let mut c = self.client()?;
        pending_on(&mut c)
    }

    /// How long the tail must be (and at least as long as the indexed part) before a
    /// fold rebuilds the index whole instead of inserting row by row — building a graph
    /// in bulk is far cheaper than inserting into one, e.g. for a first load. 50,000 by
    /// default; tests make it small.
    pub fn set_fold_rebuild_threshold(&self, rows: u64) {
        self.rebuild_threshold.store(rows, Ordering::Relaxed);
    }

    /// The fold, on `c`, which holds [`FOLD_LOCK`].
    fn fold_locked(&self, c: &mut postgres::Client, max_rows: usize) -> Result<FoldStats> {
        let pending = pending_on(c)?;
        let dim = match c
            .query_opt("SELECT body FROM manifest WHERE id = 1", &[])
            .map_err(pg)?
        {
            Some(r) => serde_json::from_slice::<Manifest>(r.get::<_, &[u8]>(0))?.dim,
            // Not created: no embedding column, no index, nothing committed.
            None => return Ok(FoldStats::default()),
        };
        if max_rows == 0 {
            return Ok(FoldStats {
                pending,
                ..FoldStats::default()
            });
        }
        // A rebuild that died half way left the index missing (dropped, not built yet)
        // or INVALID (its build failed): only a rebuild brings it back.
        let valid: Option<bool> = c
            .query_opt(
                "SELECT indisvalid FROM pg_index
                 WHERE indexrelid = to_regclass('chunks_embedding')",
                &[],
            )
            .map_err(pg)?
            .map(|r| r.get(0));
        let threshold = self.rebuild_threshold.load(Ordering::Relaxed);
        let rebuild = valid != Some(true)
            || (pending > 0 && pending >= threshold && {
                let indexed: i64 = c
                    .query_one("SELECT count(*) FROM chunks WHERE indexed", &[])
                    .map_err(pg)?
                    .get(0);
                pending >= indexed as u64
            });
        if rebuild {
            let folded = self.rebuild_index(c, dim)?;
            return Ok(FoldStats {
                folded,
                pending: pending_on(c)?,
                rebuilt: true,
                ..FoldStats::default()
            });
        }
        let folded = mark_indexed(c, max_rows as u64, FOLD_BATCH)?;
        Ok(FoldStats {
            folded,
            pending: pending_on(c)?,
            ..FoldStats::default()
        })
    }

    /// Drops the vector index, marks the whole tail indexed (cheap with no graph to
    /// maintain) and builds the index again, concurrently with commits and searches;
    /// meanwhile searches scan exactly — slower, still correct. Returns the rows folded.
    fn rebuild_index(&self, c: &mut postgres::Client, dim: usize) -> Result<u64> {
        c.batch_execute("DROP INDEX CONCURRENTLY IF EXISTS chunks_embedding")
            .map_err(pg)?;
        let folded = mark_indexed(c, u64::MAX, REBUILD_BATCH)?;
        let rows: i64 = c
            .query_one("SELECT count(*) FROM chunks", &[])
            .map_err(pg)?
            .get(0);
        // The graph of every row in memory, for a build that never spills to disk:
        // about the vector plus its neighbour lists per row, with a margin. A parallel
        // build asks the server for shared memory of this size.
        let want = (rows.max(0) as u64).saturating_mul(dim as u64 * 4 + 1024) / 4 * 5;
        let mb = (want >> 20).clamp(64, 2048);
        c.batch_execute(&format!(
            "SET maintenance_work_mem = '{mb}MB';
             SET max_parallel_maintenance_workers = {REBUILD_WORKERS};"
        ))
        .map_err(pg)?;
        if let Err(first) = c.batch_execute(&hnsw_index_sql(true)) {
            // A failed concurrent build leaves an INVALID index behind; drop it and try
            // once more without parallel workers (their shared memory is what a small
            // /dev/shm refuses). Should that fail too, the next fold rebuilds.
            c.batch_execute("DROP INDEX CONCURRENTLY IF EXISTS chunks_embedding;")
                .map_err(pg)?;
            c.batch_execute("SET max_parallel_maintenance_workers = 0")
                .map_err(pg)?;
            if let Err(second) = c.batch_execute(&hnsw_index_sql(true)) {
                let _ = c.batch_execute("DROP INDEX CONCURRENTLY IF EXISTS chunks_embedding");
                return Err(Error::Catalog(format!(
                    "rebuilding the vector index: {} (serially: {})",
                    pg(first),
                    pg(second)
                )));
            }
        }
        // The planner's statistics still see the tail as it was (a first load: every row
        // pending) and would scan the whole table for the tail branch of every search
        // until autovacuum's next analyze.
        c.batch_execute("ANALYZE chunks").map_err(pg)?;
        Ok(folded)
    }

    /// The exact top-k under the same filter (a sequential scan over folded and tail rows
    /// alike; the HNSW index is switched off for this transaction): what benchmarks
    /// measure recall against.
    pub fn search_vectors_exact(&self, q: &[f32], k: usize, admit: &Admit) -> Result<Vec<Scored>> {
        let dvs: Vec<i32> = admit.ordinals().map(|o| o as i32).collect();
        let mut c = self.client()?;
        let mut tx = c.transaction().map_err(pg)?;
        tx.batch_execute("SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off;")
            .map_err(pg)?;
        let rows = tx
            .query(
                "SELECT seq, (embedding <#> $1) AS d FROM chunks
                 WHERE dv = ANY($2) ORDER BY embedding <#> $1 LIMIT $3",
                &[&Vector::from(q.to_vec()), &dvs, &(k as i64)],
            )
            .map_err(pg)?;
        tx.commit().map_err(pg)?;
        Ok(rows
            .iter()
            .map(|r| Scored {
                seq: r.get::<_, i64>(0) as u64,
                score: -(r.get::<_, f64>(1) as f32),
            })
            .collect())
    }
}

/// Marks up to `max_rows` tail rows indexed, oldest first, `batch` rows per transaction
/// (their HNSW insertion, when the index exists, is the cost). Rows a commit holds locked
/// (a document being replaced) are skipped, not waited on: a fold never waits on a
/// commit, so the two cannot deadlock, and the rows left are the next fold's. Returns the
/// rows marked.
fn mark_indexed(c: &mut postgres::Client, max_rows: u64, batch: i64) -> Result<u64> {
    let mut done = 0u64;
    while done < max_rows {
        let n = batch.min(i64::try_from(max_rows - done).unwrap_or(i64::MAX));
        let marked = c
            .execute(
                "UPDATE chunks SET indexed = true WHERE seq IN (
                     SELECT seq FROM chunks WHERE NOT indexed ORDER BY seq LIMIT $1
                     FOR UPDATE SKIP LOCKED)",
                &[&n],
            )
            .map_err(pg)?;
        done += marked;
        if (marked as i64) < n {
            break;
        }
    }
    Ok(done)
}

/// Writes one batch inside `tx`, with the embedded catalog's semantics.
fn write_batch(tx: &mut Transaction, batch: CommitBatch) -> Result<ChangeSet> {
    let tenants = tenants_touched(&batch);
    let row = tx
        .query_one(
            "SELECT generation, next_seq, next_dv FROM counters WHERE id = 1 FOR UPDATE",
            &[],
        )
        .map_err(pg)?;
    let (generation, mut next_seq, mut next_dv): (i64, i64, i64) =
        (row.get::<_, i64>(0) + 1, row.get(1), row.get(2));
    let mut change = ChangeSet {
        generation: generation as u64,
        tenants,
        records: Some(record_tenants(&batch)),
        ..ChangeSet::default()
    };

    let remove_doc = |tx: &mut Transaction,
                      tenant: &str,
                      doc_id: &str,
                      version: Option<&str>,
                      change: &mut ChangeSet|
     -> Result<bool> {
        let rows = tx
            .query(
                "DELETE FROM docs WHERE tenant = $1 AND doc_id = $2
                 AND ($3::text IS NULL OR version = $3) RETURNING body",
                &[&tenant, &doc_id, &version],
            )
            .map_err(pg)?;
        let mut seqs = Vec::new();
        for r in &rows {
            let old = doc_of(r.get(0))?;
            change.docs.push(doc_key(&old.meta));
            seqs.extend(old.seqs.iter().map(|&s| s as i64));
            change.removed.extend(old.seqs);
        }
        if !seqs.is_empty() {
            tx.execute("DELETE FROM chunks WHERE seq = ANY($1)", &[&seqs])
                .map_err(pg)?;
        }
        Ok(!rows.is_empty())
    };

    for (tenant, doc_id, version) in &batch.deletes {
        if !remove_doc(tx, tenant, doc_id, version.as_deref(), &mut change)? {
            return Err(unknown_document(tenant, doc_id, version.as_deref()));
        }
    }

    // Into the tail: outside the partial HNSW index, so the commit pays for no graph
    // maintenance; searches scan the tail exactly until a fold moves it into the index.
    let insert_chunk = tx
        .prepare(
            "INSERT INTO chunks (seq, dv, body, embedding, indexed)
             VALUES ($1, $2, $3, $4, false)",
        )
        .map_err(pg)?;
    for doc in batch.documents {
        check_vectors(&doc)?;
        remove_doc(
            tx,
            &doc.meta.tenant,
            &doc.meta.doc_id,
            Some(&doc.meta.version),
            &mut change,
        )?;
        let dv = take_ordinal(&mut next_dv)?;
        let sketch = crate::catalog::doc_sketch(&doc.chunks);
        let mut seqs = Vec::with_capacity(doc.chunks.len());
        for (chunk, v) in doc.chunks.into_iter().zip(doc.vectors) {
            let seq = next_seq as u64;
            next_seq += 1;
            let stored = StoredChunk { seq, dv, chunk };
            tx.execute(
                &insert_chunk,
                &[
                    &(seq as i64),
                    &(dv as i32),
                    &serde_json::to_vec(&stored)?,
                    &Vector::from(v),
                ],
            )
            .map_err(pg)?;
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
        tx.execute(
            "INSERT INTO docs (tenant, doc_id, version, dv, body) VALUES ($1, $2, $3, $4, $5)",
            &[
                &entry.meta.tenant,
                &entry.meta.doc_id,
                &entry.meta.version,
                &(dv as i32),
                &serde_json::to_vec(&entry)?,
            ],
        )
        .map_err(pg)?;
    }

    for (schema, rows) in batch.tables {
        tx.execute(
            "DELETE FROM records WHERE tenant = $1 AND tbl = $2",
            &[&schema.tenant, &schema.table],
        )
        .map_err(pg)?;
        let insert = tx
            .prepare("INSERT INTO records (tenant, tbl, key, body) VALUES ($1, $2, $3, $4)")
            .map_err(pg)?;
        for r in rows {
            tx.execute(
                &insert,
                &[
                    &schema.tenant,
                    &schema.table,
                    &r.key,
                    &serde_json::to_vec(&r)?,
                ],
            )
            .map_err(pg)?;
        }
        tx.execute(
            "INSERT INTO record_schemas (tenant, tbl, body) VALUES ($1, $2, $3)
             ON CONFLICT (tenant, tbl) DO UPDATE SET body = EXCLUDED.body",
            &[&schema.tenant, &schema.table, &serde_json::to_vec(&schema)?],
        )
        .map_err(pg)?;
    }
    for g in batch.principals {
        let stored: Option<Principal> = tx
            .query_opt(
                "SELECT body FROM principals WHERE id = $1 FOR UPDATE",
                &[&g.principal().id],
            )
            .map_err(pg)?
            .map(|r| serde_json::from_slice(r.get::<_, &[u8]>(0)))
            .transpose()?;
        g.check_still_holds(stored.as_ref())?;
        let p = g.into_principal();
        tx.execute(
            "INSERT INTO principals (id, tenant, body) VALUES ($1, $2, $3)
             ON CONFLICT (id) DO UPDATE SET tenant = EXCLUDED.tenant, body = EXCLUDED.body",
            &[&p.id, &p.tenant, &serde_json::to_vec(&p)?],
        )
        .map_err(pg)?;
    }
    for d in batch.decisions {
        tx.execute(
            "INSERT INTO reviews (tenant, id, body) VALUES ($1, $2, $3)
             ON CONFLICT (tenant, id) DO UPDATE SET body = EXCLUDED.body",
            &[&d.tenant, &d.id, &serde_json::to_vec(&d)?],
        )
        .map_err(pg)?;
    }
    for m in batch.candidates {
        tx.execute(
            "INSERT INTO model_candidates (tenant, id, body) VALUES ($1, $2, $3)
             ON CONFLICT (tenant, id) DO UPDATE SET body = EXCLUDED.body",
            &[&m.tenant, &m.id, &serde_json::to_vec(&m)?],
        )
        .map_err(pg)?;
    }

    tx.execute(
        "UPDATE counters SET generation = $1, next_seq = $2, next_dv = $3 WHERE id = 1",
        &[&generation, &next_seq, &next_dv],
    )
    .map_err(pg)?;
    tx.execute(
        "INSERT INTO changes (generation, body) VALUES ($1, $2)",
        &[&generation, &serde_json::to_vec(&change)?],
    )
    .map_err(pg)?;
    Ok(change)
}
