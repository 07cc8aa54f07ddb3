//! The store facade: manifest, catalog, active index generation and the in-memory
//! view of document versions that scope filters are computed from.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dossier_index::Admit;
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

use crate::catalog::{Catalog, CatalogBackend, ChangeSet, CommitBatch, FoldStats};
use crate::generations::{read_pointer, write_pointer, ApplyStats, Generation, GenerationInfo};
use crate::postgres::PgCatalog;
use crate::scope::Scope;
use crate::view::DocsView;
use crate::{io_err, Error, Result};

/// Version of the on-disk layout this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;

/// `manifest.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub format_version: u32,
    /// How to build the embedder again (`e5`, `hash:64`, `openai:…`).
    pub embedder_spec: String,
    pub embedder_model: String,
    pub dim: usize,
    pub created_at: String,
}

/// What one request reads: the document view and the active index generation, taken
/// together under one lock so that a reader never pairs a view with an index of another
/// commit's making, and kept alive (an `Arc`) for the whole request whatever commits
/// meanwhile.
pub struct Snapshot {
    pub view: Arc<DocsView>,
    pub active: Arc<Generation>,
    /// The catalog generation the view reflects (at least).
    pub generation: u64,
    /// Per tenant, the last generation that touched it: what a tenant's derived data
    /// (graph, reports, cached answers) is keyed by, so that a commit in one tenant
    /// leaves another's alone.
    tenant_generations: Arc<TenantGenerations>,
}

impl Snapshot {
    /// The last catalog generation that changed anything of `tenant`.
    pub fn tenant_generation(&self, tenant: &str) -> u64 {
        self.tenant_generations.of(tenant)
    }

    /// The last catalog generation that replaced a record table of `tenant`.
    pub fn records_generation(&self, tenant: &str) -> u64 {
        self.tenant_generations
            .records
            .get(tenant)
            .copied()
            .unwrap_or(0)
            .max(self.tenant_generations.everyone)
    }
}

/// The last generation per tenant, from the change log.
#[derive(Debug, Clone, Default)]
struct TenantGenerations {
    by_tenant: HashMap<String, u64>,
    /// The same for commits that replaced a tenant's record tables.
    records: HashMap<String, u64>,
    /// Change sets written before commits recorded their tenants count for everyone.
    everyone: u64,
}

impl TenantGenerations {
    fn of(&self, tenant: &str) -> u64 {
        self.by_tenant
            .get(tenant)
            .copied()
            .unwrap_or(0)
            .max(self.everyone)
    }

    fn record(&mut self, changes: &[ChangeSet]) {
        for ch in changes {
            if ch.tenants.is_empty() {
                self.everyone = self.everyone.max(ch.generation);
            }
            for t in &ch.tenants {
                let g = self.by_tenant.entry(t.clone()).or_default();
                *g = (*g).max(ch.generation);
            }
            for t in ch.records.as_ref().unwrap_or(&ch.tenants) {
                let g = self.records.entry(t.clone()).or_default();
                *g = (*g).max(ch.generation);
            }
        }
    }
}

/// Most admitted chunks a shared store's vector search scans exactly (see
/// [`Store::search_vectors`]).
const PG_EXACT_SCAN_ROWS: usize = 10_000;

/// Most vectors the embedded index keeps unlinked. Every search scans the tail exactly:
/// 16k rows of 384 dimensions are ~6M multiply-adds, a few milliseconds.
const MAX_VECTOR_TAIL: usize = 16_384;

/// Rows [`Store::settle`] links per step (between steps other linkers may run).
const SETTLE_STEP: usize = 8_192;

/// Where the time of one commit went, in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct CommitStats {
    /// The catalog transaction (0 for commits replayed from elsewhere).
    pub catalog_ms: f64,
    pub indexes: ApplyStats,
    /// The document view's update.
    pub view_ms: f64,
    /// Linking the vector tail's excess inside the commit (back-pressure; 0 while a
    /// linker keeps up).
    pub linked_ms: f64,
}

/// Where a store lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// The embedded store: one directory (manifest, redb catalog, index generations).
    Dir(PathBuf),
    /// A shared PostgreSQL + pgvector database. `index_dir` holds this process's
    /// lexical index (derived from the change log); by default a directory under the
    /// user's cache named after the database.
    Postgres {
        url: String,
        index_dir: Option<PathBuf>,
    },
}

impl StoreLocation {
    /// `postgres://…` / `postgresql://…` is a shared database; anything else a directory.
    pub fn parse(s: &str) -> StoreLocation {
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            StoreLocation::Postgres {
                url: s.to_string(),
                index_dir: None,
            }
        } else {
            StoreLocation::Dir(PathBuf::from(s))
        }
    }

    /// Puts a shared store's lexical index in `dir` (no effect on a directory store).
    pub fn with_index_dir(self, dir: Option<PathBuf>) -> StoreLocation {
        match self {
            StoreLocation::Postgres { url, index_dir } => StoreLocation::Postgres {
                url,
                index_dir: dir.or(index_dir),
            },
            other => other,
        }
    }

    /// The location for messages: the path, or the URL without its password.
    pub fn shown(&self) -> String {
        match self {
            StoreLocation::Dir(d) => d.display().to_string(),
            StoreLocation::Postgres { url, .. } => crate::postgres::redact(url),
        }
    }

    pub fn is_shared(&self) -> bool {
        matches!(self, StoreLocation::Postgres { .. })
    }

    /// The manifest of the store there, if one was created.
    pub fn read_manifest(&self) -> Result<Option<Manifest>> {
        match self {
            StoreLocation::Dir(d) => Store::read_manifest(d),
            StoreLocation::Postgres { url, .. } => PgCatalog::read_manifest(url),
        }
    }
}

impl From<&Path> for StoreLocation {
    fn from(p: &Path) -> Self {
        StoreLocation::Dir(p.to_path_buf())
    }
}
impl From<PathBuf> for StoreLocation {
    fn from(p: PathBuf) -> Self {
        StoreLocation::Dir(p)
    }
}
impl From<&PathBuf> for StoreLocation {
    fn from(p: &PathBuf) -> Self {
        StoreLocation::Dir(p.clone())
    }
}

/// Whether `indexes` belongs to a shared store's replica directory (no manifest beside
/// it) rather than to a store directory (whose `manifest.json` is its parent's).
fn manifest_is_elsewhere(indexes: &Path) -> bool {
    indexes
        .parent()
        .is_none_or(|store| !store.join("manifest.json").exists())
}

/// Where a shared store's replicas keep their lexical indexes by default.
fn default_index_root(url: &str) -> PathBuf {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    let digest = blake3::hash(crate::postgres::redact(url).as_bytes()).to_hex();
    cache.join("dossier").join(format!("pg-{}", &digest[..16]))
}

/// Takes the first replica directory under `root` no other live process holds (a
/// lock file, released when the process ends, however it ends), so replicas on one
/// machine never share a tantivy index and a restarted one reuses its own.
fn claim_replica_dir(root: &Path) -> Result<(PathBuf, std::fs::File)> {
    for n in 1..=64 {
        let dir = root.join(format!("r{n}"));
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        let p = dir.join("replica.lock");
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&p)
            .map_err(io_err(&p))?;
        if f.try_lock().is_ok() {
            return Ok((dir, f));
        }
    }
    Err(Error::Invalid(format!(
        "64 processes already hold index directories under {}",
        root.display()
    )))
}

/// An opened store: a directory, or a shared database plus this process's indexes.
///
/// **Single writer path:** every change — commit, index catch-up, view swap, draft
/// build, promote, rollback — runs under `writer`, so two commits can never replay the
/// same change set into the indexes or publish their views out of order. Readers take a
/// [`Snapshot`] and never wait for a writer except for the instant of the swap. With a
/// shared database, commits of other processes arrive through [`Store::refresh`].
pub struct Store {
    /// The directory of the index generations' parent (`dir/indexes`): the store
    /// directory, or this replica's index directory.
    dir: PathBuf,
    location: StoreLocation,
    manifest: Manifest,
    catalog: Arc<dyn CatalogBackend>,
    shared: Option<Arc<PgCatalog>>,
    current: RwLock<Arc<Snapshot>>,
    writer: Mutex<()>,
    last_commit: Mutex<CommitStats>,
    /// What is masked for whom (`--pii`); every scope carries its reader's masker.
    pii: RwLock<Arc<dossier_core::pii::PiiPolicy>>,
    /// Held for the store's life: this replica's claim on its index directory.
    _replica_lock: Option<std::fs::File>,
}

impl Store {
    /// Reads the manifest of `dir`, if there is a store there.
    pub fn read_manifest(dir: &Path) -> Result<Option<Manifest>> {
        let p = dir.join("manifest.json");
        match std::fs::read(&p) {
            Ok(b) => Ok(Some(serde_json::from_slice(&b)?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(&p)(e)),
        }
    }

    /// The manifest and catalog of the store at `location`, without its indexes or
    /// document view: for tools that read or write the catalog's own tables (a
    /// migration's source, the audit log). `None` when no store was created there
    /// (nothing is created). The format version is the caller's to check.
    pub fn open_catalog(
        location: &StoreLocation,
    ) -> Result<Option<(Manifest, Arc<dyn CatalogBackend>)>> {
        match location {
            StoreLocation::Dir(dir) => {
                let Some(m) = Self::read_manifest(dir)? else {
                    return Ok(None);
                };
                let c: Arc<dyn CatalogBackend> =
                    Arc::new(Catalog::open(&dir.join("catalog.redb"))?);
                Ok(Some((m, c)))
            }
            StoreLocation::Postgres { url, .. } => {
                let pg = PgCatalog::connect(url)?;
                Ok(pg
                    .manifest()?
                    .map(|m| (m, Arc::new(pg) as Arc<dyn CatalogBackend>)))
            }
        }
    }

    /// Opens the store at `location` (a directory or a `postgres://` URL), creating it
    /// for this embedder if it does not exist. An existing store must have been built
    /// with the same model.
    pub fn open(
        location: impl Into<StoreLocation>,
        embedder_spec: &str,
        model: &str,
        dim: usize,
    ) -> Result<Store> {
        let location = location.into();
        let fresh = Manifest {
            format_version: FORMAT_VERSION,
            embedder_spec: embedder_spec.to_string(),
            embedder_model: model.to_string(),
            dim,
            created_at: chrono::Utc::now().to_rfc3339(),
        };
        let check = |m: Manifest| -> Result<Manifest> {
            if m.format_version != FORMAT_VERSION {
                return Err(Error::Format {
                    path: location.shown(),
                    found: m.format_version,
                    expected: FORMAT_VERSION,
                });
            }
            if m.embedder_model != model || m.dim != dim {
                return Err(Error::EmbedderMismatch {
                    path: location.shown(),
                    found: m.embedder_model,
                    found_dim: m.dim,
                    wanted: model.to_string(),
                    wanted_dim: dim,
                });
            }
            Ok(m)
        };
        match &location {
            StoreLocation::Dir(dir) => {
                std::fs::create_dir_all(dir.join("indexes")).map_err(io_err(dir))?;
                let manifest = match Self::read_manifest(dir)? {
                    Some(m) => check(m)?,
                    None => {
                        let p = dir.join("manifest.json");
                        std::fs::write(&p, serde_json::to_vec_pretty(&fresh)?)
                            .map_err(io_err(&p))?;
                        fresh
                    }
                };
                let catalog: Arc<dyn CatalogBackend> =
                    Arc::new(Catalog::open(&dir.join("catalog.redb"))?);
                Self::with_catalog(dir.clone(), location.clone(), manifest, catalog, None, None)
            }
            StoreLocation::Postgres { url, index_dir } => {
                let pg = Arc::new(PgCatalog::connect(url)?);
                let manifest = match pg.manifest()? {
                    Some(m) => check(m)?,
                    None => check(pg.create(&fresh)?)?,
                };
                let root = index_dir.clone().unwrap_or_else(|| default_index_root(url));
                let (dir, lock) = claim_replica_dir(&root)?;
                std::fs::create_dir_all(dir.join("indexes")).map_err(io_err(&dir))?;
                let catalog: Arc<dyn CatalogBackend> = pg.clone();
                Self::with_catalog(
                    dir,
                    location.clone(),
                    manifest,
                    catalog,
                    Some(pg),
                    Some(lock),
                )
            }
        }
    }

    /// Opens (or rebuilds) the active index generation under `dir/indexes` and builds
    /// the first snapshot.
    fn with_catalog(
        dir: PathBuf,
        location: StoreLocation,
        manifest: Manifest,
        catalog: Arc<dyn CatalogBackend>,
        shared: Option<Arc<PgCatalog>>,
        replica_lock: Option<std::fs::File>,
    ) -> Result<Store> {
        let dim = manifest.dim;
        let indexes = dir.join("indexes");
        Self::bind_indexes(&indexes, &manifest)?;
        let mut ptr = read_pointer(&indexes)?;
        let active = match &ptr.active {
            Some(name) => {
                let g = Generation::open(name, &indexes.join(name), dim)?;
                // An index ahead of the catalog was built from other data (a database
                // restored from an older backup): it cannot be caught up, only rebuilt.
                let ahead = g.generation()? > catalog.generation()?;
                if !ahead && g.catch_up(catalog.as_ref())? {
                    g
                } else {
                    // The change log no longer reaches this generation: rebuild.
                    let fresh = Self::new_generation(&indexes, dim)?;
                    fresh.build_from(catalog.as_ref(), |_| {})?;
                    ptr.previous.push(name.clone());
                    fresh
                }
            }
            None => {
                let g = Self::new_generation(&indexes, dim)?;
                g.build_from(catalog.as_ref(), |_| {})?;
                g
            }
        };
        ptr.active = Some(active.name.clone());
        write_pointer(&indexes, &ptr)?;
        let mut tenant_generations = TenantGenerations::default();
        let log = catalog.changes_since(0)?.unwrap_or_default();
        tenant_generations.record(&log);
        // The view is read after the log, so it reflects at least the log's last commit.
        let generation = log.last().map_or(0, |c| c.generation);
        let view = DocsView::build(catalog.documents()?, catalog.decisions()?);
        Ok(Store {
            dir,
            location,
            manifest,
            catalog,
            shared,
            current: RwLock::new(Arc::new(Snapshot {
                view: Arc::new(view),
                active: Arc::new(active),
                generation,
                tenant_generations: Arc::new(tenant_generations),
            })),
            writer: Mutex::new(()),
            last_commit: Mutex::new(CommitStats::default()),
            pii: RwLock::new(Arc::new(dossier_core::pii::PiiPolicy::none())),
            _replica_lock: replica_lock,
        })
    }

    /// Ties an index directory to one store: its manifest's digest (creation time,
    /// model, dimension) is written beside the generations, and a directory holding
    /// another store's indexes — a database dropped and created again at the same URL,
    /// an `--index-dir` reused for another database — is emptied, so its generations
    /// are rebuilt from this catalog instead of being taken for up to date.
    fn bind_indexes(indexes: &Path, manifest: &Manifest) -> Result<()> {
        let id = blake3::hash(&serde_json::to_vec(manifest)?)
            .to_hex()
            .to_string();
        let p = indexes.join("STORE_ID");
        match std::fs::read_to_string(&p) {
            Ok(found) if found.trim() == id => return Ok(()),
            Ok(_) => {
                std::fs::remove_dir_all(indexes).map_err(io_err(indexes))?;
                std::fs::create_dir_all(indexes).map_err(io_err(indexes))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Stores made before this file existed hold their own indexes; a
                // shared store's index directory without it is adopted only if empty.
                let holds_generations = std::fs::read_dir(indexes)
                    .map_err(io_err(indexes))?
                    .filter_map(|e| e.ok())
                    .any(|e| e.path().is_dir());
                if holds_generations && manifest_is_elsewhere(indexes) {
                    std::fs::remove_dir_all(indexes).map_err(io_err(indexes))?;
                    std::fs::create_dir_all(indexes).map_err(io_err(indexes))?;
                }
            }
            Err(e) => return Err(io_err(&p)(e)),
        }
        std::fs::write(&p, &id).map_err(io_err(&p))
    }

    fn new_generation(indexes: &Path, dim: usize) -> Result<Generation> {
        let mut n = 1;
        while indexes.join(format!("g{n:06}")).exists() {
            n += 1;
        }
        let name = format!("g{n:06}");
        Generation::open(&name, &indexes.join(&name), dim)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }
    /// The scope of the stored principal `principal_id` at `at`; `None` when the catalog
    /// has no such principal. The only constructor of a [`Scope`].
    pub fn scope(&self, principal_id: &str, at: chrono::NaiveDate) -> Result<Option<Scope>> {
        let pii = self.pii.read().clone();
        Ok(self
            .catalog
            .principal(principal_id)?
            .map(|p| Scope::of_stored(&p, at, &pii)))
    }

    /// The masker of a reader of `tenant` in `groups` under the current policy (for
    /// passes that run for no stored principal, such as model extraction: `&[]`).
    pub fn pii_masker_for(
        &self,
        tenant: &str,
        groups: &[String],
    ) -> Option<Arc<dossier_core::pii::Masker>> {
        self.pii.read().masker_for(tenant, groups)
    }

    /// Sets what is masked for whom: scopes built from now on carry their reader's
    /// masker (a deployment setting, given at start).
    pub fn set_pii_policy(&self, policy: Arc<dossier_core::pii::PiiPolicy>) {
        *self.pii.write() = policy;
    }

    pub fn catalog(&self) -> &dyn CatalogBackend {
        self.catalog.as_ref()
    }

    /// Puts principals through the one rule for writing them
    /// ([`crate::principals::grant`]), with what the catalog holds under each id. The
    /// outer error is the catalog's; the inner one names the first principal refused.
    pub fn grant_principals(
        &self,
        writer: crate::principals::PrincipalWriter<'_>,
        ps: Vec<dossier_core::Principal>,
    ) -> Result<
        std::result::Result<
            Vec<crate::principals::GrantedPrincipal>,
            crate::principals::PrincipalRefusal,
        >,
    > {
        let mut out = Vec::with_capacity(ps.len());
        for p in ps {
            let existing = self.catalog.principal(&p.id)?;
            match crate::principals::grant(writer, p, existing.as_ref()) {
                Ok(g) => out.push(g),
                Err(refusal) => return Ok(Err(refusal)),
            }
        }
        Ok(Ok(out))
    }
    /// The view and the active generation of one moment, for one request.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current.read().clone()
    }
    pub fn view(&self) -> Arc<DocsView> {
        self.snapshot().view.clone()
    }
    pub fn active(&self) -> Arc<Generation> {
        self.snapshot().active.clone()
    }

    /// Where this store lives.
    pub fn location(&self) -> &StoreLocation {
        &self.location
    }

    /// The shared database, when the store is one.
    pub fn shared(&self) -> Option<&PgCatalog> {
        self.shared.as_deref()
    }

    /// The `k` admitted chunks nearest `q`: in the database when it searches vectors
    /// itself, else in the snapshot's HNSW.
    pub fn search_vectors(
        &self,
        snap: &Snapshot,
        q: &[f32],
        k: usize,
        admit: &Admit,
    ) -> Result<Vec<dossier_index::Scored>> {
        if !self.catalog.searches_vectors() {
            return Ok(snap.active.vectors.read().search(q, k, admit));
        }
        // Scan the admitted rows exactly when there are few of them: measured on the
        // 100k-chunk synthetic store (BENCHMARKS.md), Postgres scans ~26k admitted rows
        // in ~30 ms and an HNSW search at ef_search 400 takes ~14 ms, so the crossover
        // is near 12k rows; below it the exact top-k also costs less.
        let exact = snap.view.admitted_chunks(admit) <= PG_EXACT_SCAN_ROWS;
        Ok(self
            .catalog
            .search_vectors(q, k, admit, exact)?
            .unwrap_or_default())
    }

    /// Publishes a new view and/or active generation as one snapshot, with the change
    /// sets that led to it.
    fn publish(&self, view: Option<DocsView>, active: Option<Generation>, changes: &[ChangeSet]) {
        let mut cur = self.current.write();
        let tenant_generations = if changes.is_empty() {
            cur.tenant_generations.clone()
        } else {
            let mut t = (*cur.tenant_generations).clone();
            t.record(changes);
            Arc::new(t)
        };
        let next = Snapshot {
            view: view.map(Arc::new).unwrap_or_else(|| cur.view.clone()),
            active: active.map(Arc::new).unwrap_or_else(|| cur.active.clone()),
            generation: changes
                .last()
                .map_or(cur.generation, |c| c.generation.max(cur.generation)),
            tenant_generations,
        };
        *cur = Arc::new(next);
    }

    /// Commits `batch` to the catalog, then brings the active indexes and the view up
    /// to date, all under the writer lock. If the process dies between the two, the
    /// next open catches up.
    pub fn commit(&self, batch: CommitBatch) -> Result<ChangeSet> {
        let _writer = self.writer.lock();
        let t = std::time::Instant::now();
        let change = self.catalog.commit(batch)?;
        let catalog_ms = t.elapsed().as_secs_f64() * 1000.0;
        self.catch_up_locked()?;
        self.last_commit.lock().catalog_ms = catalog_ms;
        // Back-pressure: the tail is scanned exactly by every search, so when no
        // linker keeps up (a bulk load, no server running) the commit links the excess.
        if !self.catalog.searches_vectors() {
            let active = self.snapshot().active.clone();
            let tail = active.vectors.read().tail_len();
            if tail > MAX_VECTOR_TAIL {
                let t = std::time::Instant::now();
                active.link_vectors(tail - MAX_VECTOR_TAIL / 2)?;
                self.last_commit.lock().linked_ms = t.elapsed().as_secs_f64() * 1000.0;
            }
        }
        Ok(change)
    }

    /// Links up to `max_rows` committed vectors into the searched vector index: the
    /// active generation's HNSW, or the database's (`fold_vectors`). Commits leave their
    /// vectors in a tail that searches scan exactly; this is the work that makes them
    /// cheap to search, done beside requests (`dossier serve`'s maintenance loop) or at
    /// the end of a bulk load ([`Store::settle`]).
    pub fn link_vectors(&self, max_rows: usize) -> Result<FoldStats> {
        if self.catalog.searches_vectors() {
            return self.catalog.fold_vectors(max_rows);
        }
        self.snapshot().active.link_vectors(max_rows)
    }

    /// Links every pending vector (waits for another linker to finish first).
    pub fn settle(&self) -> Result<FoldStats> {
        let mut total = FoldStats::default();
        loop {
            let step = self.link_vectors(SETTLE_STEP)?;
            total.folded += step.folded;
            total.rebuilt |= step.rebuilt;
            total.ms += step.ms;
            total.pending = step.pending;
            if step.busy {
                std::thread::sleep(std::time::Duration::from_millis(50));
            } else if step.folded == 0 || step.pending == 0 {
                return Ok(total);
            }
        }
    }

    /// Vectors committed but not yet linked into the searched index.
    pub fn pending_vectors(&self) -> Result<u64> {
        match &self.shared {
            Some(pg) => pg.pending_vectors(),
            None => Ok(self.snapshot().active.vectors.read().tail_len() as u64),
        }
    }

    /// Where the time of the last commit or catch-up went (for benchmarks and operators).
    pub fn last_commit_stats(&self) -> CommitStats {
        *self.last_commit.lock()
    }

    /// Brings this process up to the catalog: replays commits made elsewhere (another
    /// replica or the CLI on a shared database) into the indexes and publishes a new
    /// view. Returns whether anything changed. Cheap when nothing did: one read of
    /// the catalog's generation.
    pub fn refresh(&self) -> Result<bool> {
        if self.catalog.generation()? <= self.snapshot().generation {
            return Ok(false);
        }
        let _writer = self.writer.lock();
        self.catch_up_locked()
    }

    fn catch_up_locked(&self) -> Result<bool> {
        let snap = self.snapshot();
        let changes = match self.catalog.changes_since(snap.generation)? {
            Some(c) => c,
            None => {
                return Err(Error::Invalid(format!(
                    "the change log of {} no longer reaches generation {}; reopen the store",
                    self.location.shown(),
                    snap.generation
                )))
            }
        };
        if changes.is_empty() {
            return Ok(false);
        }
        let indexes = snap.active.apply(self.catalog.as_ref(), &changes)?;
        let t = std::time::Instant::now();
        let view = snap.view.updated(&changes, self.catalog.as_ref())?;
        self.publish(Some(view), None, &changes);
        *self.last_commit.lock() = CommitStats {
            catalog_ms: 0.0,
            indexes,
            view_ms: t.elapsed().as_secs_f64() * 1000.0,
            linked_ms: 0.0,
        };
        Ok(true)
    }

    /// Builds a new generation from the catalog as a draft; the active one keeps serving.
    pub fn build_draft(&self, progress: impl FnMut(u64)) -> Result<GenerationInfo> {
        let _writer = self.writer.lock();
        let indexes = self.dir.join("indexes");
        let g = Self::new_generation(&indexes, self.manifest.dim)?;
        g.build_from(self.catalog.as_ref(), progress)?;
        g.info("draft")
    }

    /// The newest draft's name, or `name` itself.
    fn draft_name(&self, name: Option<&str>) -> Result<String> {
        match name {
            Some(n) => Ok(n.to_string()),
            None => self
                .list_generations()?
                .into_iter()
                .rev()
                .find(|g| g.status == "draft")
                .map(|g| g.name)
                .ok_or_else(|| Error::NotFound("no draft generation".into())),
        }
    }

    /// A snapshot that reads the draft `name` (the newest when `None`) instead of the
    /// active generation, with the current view: what a shadow run compares against
    /// the active one. The draft is first caught up with the catalog.
    pub fn draft_snapshot(&self, name: Option<&str>) -> Result<Snapshot> {
        let name = self.draft_name(name)?;
        if self.active().name == name {
            return Err(Error::Invalid(format!(
                "generation {name} is the active one"
            )));
        }
        let dir = self.dir.join("indexes").join(&name);
        if !dir.join("gen.json").exists() {
            return Err(Error::NotFound(format!("no built generation {name}")));
        }
        let _writer = self.writer.lock();
        let g = Generation::open(&name, &dir, self.manifest.dim)?;
        if !g.catch_up(self.catalog.as_ref())? {
            return Err(Error::Invalid(format!(
                "generation {name} is older than the change log; build a new draft"
            )));
        }
        let cur = self.snapshot();
        Ok(Snapshot {
            view: cur.view.clone(),
            active: Arc::new(g),
            generation: cur.generation,
            tenant_generations: cur.tenant_generations.clone(),
        })
    }

    /// Keeps the verdict of a shadow run of the draft `name` (`passed` decides whether
    /// [`Store::promote`] accepts the draft without being forced).
    pub fn save_shadow(&self, name: &str, report: &serde_json::Value) -> Result<()> {
        let dir = self.dir.join("indexes").join(name);
        if !dir.join("gen.json").exists() {
            return Err(Error::NotFound(format!("no built generation {name}")));
        }
        let p = dir.join("shadow.json");
        let tmp = dir.join("shadow.json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(report)?).map_err(io_err(&tmp))?;
        std::fs::rename(&tmp, &p).map_err(io_err(&p))
    }

    /// The kept shadow verdict of generation `name`, if it was shadowed.
    pub fn shadow_report(&self, name: &str) -> Result<Option<serde_json::Value>> {
        let p = self.dir.join("indexes").join(name).join("shadow.json");
        match std::fs::read(&p) {
            Ok(b) => Ok(Some(serde_json::from_slice(&b)?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(&p)(e)),
        }
    }

    /// Checks a draft (the newest one when `name` is `None`) against the catalog and
    /// makes it active. Unless `force`, the draft must have passed a shadow run
    /// ([`Store::save_shadow`]): draft → shadow → active.
    pub fn promote(&self, name: Option<&str>, force: bool) -> Result<GenerationInfo> {
        let name = self.draft_name(name)?;
        if !force {
            match self.shadow_report(&name)? {
                None => {
                    return Err(Error::Invalid(format!(
                        "generation {name} has not been shadowed: run `dossier index shadow {name} --queries FILE`, or promote with --force"
                    )))
                }
                Some(r) if r.get("passed") != Some(&serde_json::Value::Bool(true)) => {
                    return Err(Error::Invalid(format!(
                        "generation {name} failed its shadow run ({}); promote with --force to override",
                        r.get("verdict").and_then(|v| v.as_str()).unwrap_or("see its report")
                    )))
                }
                Some(_) => {}
            }
        }
        let _writer = self.writer.lock();
        let indexes = self.dir.join("indexes");
        let mut ptr = read_pointer(&indexes)?;
        if ptr.active.as_deref() == Some(&name) {
            return Err(Error::Invalid(format!(
                "generation {name} is already active"
            )));
        }
        let dir = indexes.join(&name);
        if !dir.join("gen.json").exists() {
            return Err(Error::NotFound(format!("no built generation {name}")));
        }
        let g = Generation::open(&name, &dir, self.manifest.dim)?;
        if !g.catch_up(self.catalog.as_ref())? {
            return Err(Error::Invalid(format!(
                "generation {name} is older than the change log; build a new draft"
            )));
        }
        let expected = self.catalog.chunk_count()?;
        if g.bm25.len() != expected {
            return Err(Error::Invalid(format!(
                "generation {name} holds {} chunks, the catalog {expected}; not promoted",
                g.bm25.len()
            )));
        }
        if let Some(old) = ptr.active.replace(name.clone()) {
            ptr.previous.push(old);
        }
        ptr.retired.retain(|r| r != &name);
        write_pointer(&indexes, &ptr)?;
        let info = g.info("active")?;
        self.publish(None, Some(g), &[]);
        Ok(info)
    }

    /// Makes the previously active generation active again.
    pub fn rollback(&self) -> Result<GenerationInfo> {
        let _writer = self.writer.lock();
        let indexes = self.dir.join("indexes");
        let mut ptr = read_pointer(&indexes)?;
        let prev = ptr
            .previous
            .pop()
            .ok_or_else(|| Error::NotFound("no earlier generation to roll back to".into()))?;
        let g = Generation::open(&prev, &indexes.join(&prev), self.manifest.dim)?;
        if !g.catch_up(self.catalog.as_ref())? {
            return Err(Error::Invalid(format!(
                "generation {prev} is older than the change log; build a new draft instead"
            )));
        }
        if let Some(from) = ptr.active.replace(prev) {
            ptr.retired.push(from);
        }
        write_pointer(&indexes, &ptr)?;
        let info = g.info("active")?;
        self.publish(None, Some(g), &[]);
        Ok(info)
    }

    /// Every generation with its status: `active`, `previous` (rollback target),
    /// `retired` (rolled back from) or `draft`.
    pub fn list_generations(&self) -> Result<Vec<GenerationInfo>> {
        let indexes = self.dir.join("indexes");
        let ptr = read_pointer(&indexes)?;
        let active = self.active();
        let mut names: Vec<String> = std::fs::read_dir(&indexes)
            .map_err(io_err(&indexes))?
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().to_string())
            .collect();
        names.sort();
        let mut out = Vec::new();
        for n in names {
            if n == active.name {
                out.push(active.info("active")?);
                continue;
            }
            let status = if ptr.previous.contains(&n) {
                "previous"
            } else if ptr.retired.contains(&n) {
                "retired"
            } else {
                "draft"
            };
            let g = Generation::open(&n, &indexes.join(&n), self.manifest.dim)?;
            out.push(g.info(status)?);
        }
        Ok(out)
    }
}
