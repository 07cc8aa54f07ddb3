//! The vector tail of the shared backend: commits write vectors outside the HNSW index,
//! searches scan those rows exactly beside it, and a fold moves them in later, one process
//! at a time. These tests need a PostgreSQL server with pgvector: `scripts/pg start`
//! prints its URL, then
//!
//! ```text
//! DOSSIER_TEST_POSTGRES=$(scripts/pg start) cargo nextest run -p dossier-store --test pg_tail
//! ```
//!
//! Without the variable they fail (they test nothing the embedded store has).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use dossier_core::{Chunk, DocKind, DocumentVersion};
use dossier_index::{Admit, Scored};
use dossier_store::catalog::{CommitBatch, NewDocument};
use dossier_store::postgres::{PgCatalog, FOLD_LOCK};
use dossier_store::{testing, CatalogBackend, Manifest, FORMAT_VERSION};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Small vectors: the indexed part of these stores stays small enough for the graph to
/// find the true neighbours, so any difference from the exact scan is the tail's fault.
const DIM: usize = 8;

/// The server's URL, or a failure that says how to get one.
fn server() -> String {
    match std::env::var(testing::POSTGRES_ENV) {
        Ok(url) if !url.is_empty() => url,
        _ => panic!(
            "the pg_tail tests need a PostgreSQL server with pgvector: run `scripts/pg start` \
             and set {}=<the URL it prints>, e.g. \
             `{}=$(scripts/pg start) cargo nextest run -p dossier-store --test pg_tail`",
            testing::POSTGRES_ENV,
            testing::POSTGRES_ENV
        ),
    }
}

/// A store in a database of its own (named after a temporary directory), dropped at the
/// end of the test.
struct Db {
    url: String,
    name: String,
    catalog: Option<PgCatalog>,
    _dir: tempfile::TempDir,
}

impl Db {
    fn new() -> Db {
        let dir = tempfile::tempdir().unwrap();
        let url = testing::database_for(&server(), dir.path());
        let name = url
            .rsplit('/')
            .next()
            .unwrap()
            .split('?')
            .next()
            .unwrap()
            .to_string();
        let catalog = PgCatalog::connect(&url).unwrap();
        catalog
            .create(&Manifest {
                format_version: FORMAT_VERSION,
                embedder_spec: format!("hash:{DIM}"),
                embedder_model: format!("hash-{DIM}"),
                dim: DIM,
                created_at: "2026-01-01T00:00:00Z".into(),
            })
            .unwrap();
        Db {
            url,
            name,
            catalog: Some(catalog),
            _dir: dir,
        }
    }

    fn cat(&self) -> &PgCatalog {
        self.catalog.as_ref().unwrap()
    }

    /// A plain connection, as an operator's psql would have.
    fn sql(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).unwrap()
    }

    fn count(&self, query: &str) -> u64 {
        self.sql().query_one(query, &[]).unwrap().get::<_, i64>(0) as u64
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        drop(self.catalog.take());
        if let Ok(mut c) = postgres::Client::connect(&server(), postgres::NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

fn unit(rng: &mut StdRng) -> Vec<f32> {
    let v: Vec<f32> = (0..DIM).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
    v.into_iter().map(|x| x / n).collect()
}

/// A document of `n` chunks with random unit vectors; `salt` makes its digest (a new
/// salt under the same id and version replaces the stored content).
fn doc(id: &str, salt: u64, n: usize, rng: &mut StdRng) -> NewDocument {
    let meta = DocumentVersion {
        doc_id: id.into(),
        version: "1".into(),
        title: id.into(),
        tenant: "t".into(),
        kb: None,
        acl: None,
        effective_from: None,
        effective_to: None,
        supersedes: None,
        supersedes_evidence: None,
        depends_on: vec![],
        source_uri: format!("test://{id}"),
        kind: DocKind::Text,
        digest: format!("{id}-{salt}"),
    };
    let chunks = (0..n)
        .map(|i| Chunk {
            chunk_id: Chunk::make_id(id, "1", i as u32),
            doc_id: id.into(),
            version: "1".into(),
            ordinal: i as u32,
            section: vec![],
            text: format!("{id} chunk {i}"),
            byte_start: 0,
            byte_end: 1,
            source_uri: meta.source_uri.clone(),
            tenant: "t".into(),
            kb: None,
            acl: None,
            title: id.into(),
        })
        .collect();
    NewDocument {
        meta,
        chunks,
        vectors: (0..n).map(|_| unit(rng)).collect(),
    }
}

fn commit(cat: &PgCatalog, docs: Vec<NewDocument>) -> u64 {
    let change = cat
        .commit(CommitBatch {
            documents: docs,
            ..Default::default()
        })
        .unwrap();
    change.added.len() as u64
}

/// Commits `docs` documents of `chunks` chunks each, named `prefix0`, `prefix1`, ….
fn load(cat: &PgCatalog, prefix: &str, docs: usize, chunks: usize, rng: &mut StdRng) -> u64 {
    let batch = (0..docs)
        .map(|i| doc(&format!("{prefix}{i}"), 0, chunks, rng))
        .collect();
    commit(cat, batch)
}

/// The admission set of every stored document version.
fn everything(cat: &PgCatalog) -> Admit {
    Admit::from_ordinals(cat.documents().unwrap().iter().map(|d| d.dv))
}

/// `got` is the exact top-k `want`: the same chunks with the same scores, except that
/// chunks tied at the cut may differ.
fn assert_same_top(got: &[Scored], want: &[Scored], what: &str) {
    const EPS: f32 = 1e-5;
    assert_eq!(got.len(), want.len(), "{what}: {got:?} vs exact {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g.score - w.score).abs() <= EPS,
            "{what}: scores differ: {got:?} vs exact {want:?}"
        );
    }
    let Some(cut) = want.last().map(|w| w.score) else {
        return;
    };
    let above = |l: &[Scored]| -> HashSet<u64> {
        l.iter()
            .filter(|s| s.score > cut + EPS)
            .map(|s| s.seq)
            .collect()
    };
    assert_eq!(
        above(got),
        above(want),
        "{what}: other chunks: {got:?} vs exact {want:?}"
    );
    let seqs: HashSet<u64> = got.iter().map(|s| s.seq).collect();
    assert_eq!(seqs.len(), got.len(), "{what}: a chunk twice: {got:?}");
}

/// Random queries under random admission sets: the search through index and tail finds
/// what the exact scan finds.
fn check_searches(cat: &PgCatalog, rng: &mut StdRng, what: &str) {
    let dvs: Vec<u32> = cat.documents().unwrap().iter().map(|d| d.dv).collect();
    for round in 0..6 {
        let admit = match round {
            0 => Admit::from_ordinals(dvs.iter().copied()),
            1 if !dvs.is_empty() => Admit::from_ordinals([dvs[rng.gen_range(0..dvs.len())]]),
            _ => {
                let p = rng.gen_range(0.1..0.9);
                Admit::from_ordinals(dvs.iter().copied().filter(|_| rng.gen_bool(p)))
            }
        };
        let k = [1, 3, 5, 8][rng.gen_range(0..4)];
        let q = unit(rng);
        let got = cat.search_vectors(&q, k, &admit, false).unwrap().unwrap();
        let want = cat.search_vectors_exact(&q, k, &admit).unwrap();
        assert_same_top(
            &got,
            &want,
            &format!("{what}, round {round}, k {k}, {} admitted", admit.len()),
        );
    }
}

fn seed() -> u64 {
    std::env::var("TAIL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen())
}

/// What the index holds: its definition and whether it may be used.
fn vector_index(db: &Db) -> Option<(String, bool)> {
    db.sql()
        .query_opt(
            "SELECT pg_get_indexdef(i.indexrelid), i.indisvalid FROM pg_index i
             WHERE i.indexrelid = to_regclass('chunks_embedding')",
            &[],
        )
        .unwrap()
        .map(|r| (r.get(0), r.get(1)))
}

fn assert_partial_hnsw(db: &Db) {
    let (def, valid) = vector_index(db).expect("chunks_embedding exists");
    assert!(valid, "chunks_embedding is not valid: {def}");
    assert!(
        def.contains("USING hnsw")
            && def.contains("vector_ip_ops")
            && def.ends_with("WHERE indexed"),
        "{def}"
    );
}

/// Rows neither lost nor doubled: every stored document's chunks are rows, once, each
/// either folded or pending.
fn assert_rows_whole(db: &Db) {
    let cat = db.cat();
    let mut seqs: Vec<u64> = cat
        .documents()
        .unwrap()
        .iter()
        .flat_map(|d| d.seqs.clone())
        .collect();
    seqs.sort_unstable();
    let rows = db.count("SELECT count(*) FROM chunks");
    assert_eq!(
        rows,
        seqs.len() as u64,
        "chunk rows vs the documents' chunks"
    );
    assert_eq!(db.count("SELECT count(DISTINCT seq) FROM chunks"), rows);
    let indexed = db.count("SELECT count(*) FROM chunks WHERE indexed");
    let pending = cat.pending_vectors().unwrap();
    assert_eq!(
        indexed + pending,
        rows,
        "{indexed} indexed + {pending} pending"
    );
}

/// Batches of random vectors in several documents (ordinals), folds of random sizes in
/// between, replacements of documents whose rows are folded or pending: after every
/// step, the top-k under random admission sets is the exact scan's.
#[test]
fn searches_through_index_and_tail_equal_the_exact_scan() {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let db = Db::new();
    let cat = db.cat();
    let label = |step: usize, did: &str| {
        format!("seed {seed} (TAIL_SEED={seed} reproduces), step {step}, after {did}")
    };
    let mut next_doc = 0;
    for step in 0..24 {
        let did = match rng.gen_range(0..10) {
            0..=4 => {
                let docs = (0..rng.gen_range(1..5))
                    .map(|_| {
                        next_doc += 1;
                        let n = rng.gen_range(1..9);
                        doc(&format!("d{next_doc}"), 0, n, &mut rng)
                    })
                    .collect();
                format!("a commit of {} rows", commit(cat, docs))
            }
            5..=7 => {
                let s = cat.fold_vectors(rng.gen_range(0..40)).unwrap();
                assert!(!s.busy && !s.rebuilt, "{s:?}");
                format!("a fold of {}", s.folded)
            }
            _ if next_doc > 0 => {
                // New content under a stored id: its old rows (folded or not) go.
                let id = format!("d{}", rng.gen_range(1..=next_doc));
                let n = rng.gen_range(1..6);
                commit(cat, vec![doc(&id, step as u64 + 1, n, &mut rng)]);
                format!("replacing {id}")
            }
            _ => continue,
        };
        let what = label(step, &did);
        assert_rows_whole(&db);
        check_searches(cat, &mut rng, &what);
        // The same through the exact path of the trait.
        let admit = everything(cat);
        let q = unit(&mut rng);
        assert_same_top(
            &cat.search_vectors(&q, 4, &admit, true).unwrap().unwrap(),
            &cat.search_vectors_exact(&q, 4, &admit).unwrap(),
            &what,
        );
    }
    let left = cat.fold_vectors(usize::MAX).unwrap();
    assert_eq!(left.pending, 0, "{left:?}");
    check_searches(cat, &mut rng, &format!("seed {seed}, all folded"));
}

/// A commit's rows wait in the tail; folds move them into the index oldest first, as
/// many as asked; a replaced or deleted document takes its pending rows with it.
#[test]
fn commits_leave_rows_pending_and_folds_move_them() {
    let mut rng = StdRng::seed_from_u64(7);
    let db = Db::new();
    let cat = db.cat();
    assert_eq!(cat.pending_vectors().unwrap(), 0);
    assert_eq!(load(cat, "a", 3, 4, &mut rng), 12);
    assert_eq!(cat.pending_vectors().unwrap(), 12, "a commit folds nothing");
    assert_eq!(db.count("SELECT count(*) FROM chunks WHERE indexed"), 0);

    let s = cat.fold_vectors(5).unwrap();
    assert_eq!(
        (s.folded, s.pending, s.rebuilt, s.busy),
        (5, 7, false, false)
    );
    assert!(s.ms >= 0.0);
    // Oldest first: the five lowest sequence numbers.
    assert_eq!(
        db.count("SELECT max(seq) FROM chunks WHERE indexed"),
        db.count("SELECT min(seq) FROM chunks") + 4
    );
    let s = cat.fold_vectors(100).unwrap();
    assert_eq!((s.folded, s.pending), (7, 0));
    let s = cat.fold_vectors(100).unwrap();
    assert_eq!((s.folded, s.pending, s.rebuilt), (0, 0, false));
    let s = cat.fold_vectors(0).unwrap();
    assert_eq!((s.folded, s.pending), (0, 0));

    // A folded document replaced: its new rows wait, its old ones are gone.
    commit(cat, vec![doc("a0", 1, 2, &mut rng)]);
    assert_eq!(cat.pending_vectors().unwrap(), 2);
    assert_eq!(db.count("SELECT count(*) FROM chunks"), 10);
    // A pending document deleted: nothing of it is left to fold.
    load(cat, "b", 1, 5, &mut rng);
    assert_eq!(cat.pending_vectors().unwrap(), 7);
    cat.commit(CommitBatch {
        deletes: vec![("t".into(), "b0".into(), None)],
        ..Default::default()
    })
    .unwrap();
    assert_eq!(cat.pending_vectors().unwrap(), 2);
    assert_rows_whole(&db);
    let s = cat.fold_vectors(100).unwrap();
    assert_eq!((s.folded, s.pending), (2, 0));
    assert_rows_whole(&db);
    assert_partial_hnsw(&db);
    check_searches(cat, &mut rng, "after the folds");
}

/// One process folds at a time: a fold that finds the lock held returns at once, busy,
/// folding nothing. Two catalogs folding at once while a third commits and replaces
/// documents: every row ends up folded exactly once, none lost or doubled.
#[test]
fn folds_from_two_processes_serialise_and_lose_nothing() {
    let mut rng = StdRng::seed_from_u64(11);
    let db = Db::new();
    let cat = db.cat();
    load(cat, "a", 40, 10, &mut rng);

    // The lock held by someone else.
    let mut holder = db.sql();
    holder
        .execute("SELECT pg_advisory_lock($1)", &[&FOLD_LOCK])
        .unwrap();
    let s = cat.fold_vectors(100).unwrap();
    assert_eq!((s.busy, s.folded, s.pending), (true, 0, 400), "{s:?}");
    holder
        .execute("SELECT pg_advisory_unlock($1)", &[&FOLD_LOCK])
        .unwrap();
    drop(holder);

    let others: Vec<Arc<PgCatalog>> = (0..2)
        .map(|_| Arc::new(PgCatalog::connect(&db.url).unwrap()))
        .collect();
    let writing = Arc::new(AtomicBool::new(true));
    let folders: Vec<_> = others
        .iter()
        .map(|c| {
            let (c, writing) = (c.clone(), writing.clone());
            std::thread::spawn(move || {
                let (mut folded, mut busy) = (0u64, 0u64);
                loop {
                    let s = c.fold_vectors(37).unwrap();
                    folded += s.folded;
                    busy += s.busy as u64;
                    if !s.busy && s.pending == 0 && !writing.load(Ordering::SeqCst) {
                        return (folded, busy);
                    }
                }
            })
        })
        .collect();
    let mut added = 400;
    for i in 0..30 {
        if i % 3 == 0 {
            // A replacement: its old rows may be folding right now.
            let id = format!("a{}", rng.gen_range(0..40));
            commit(cat, vec![doc(&id, i + 1, 10, &mut rng)]);
        } else {
            added += load(cat, &format!("w{i}-"), 2, 5, &mut rng);
        }
    }
    writing.store(false, Ordering::SeqCst);
    let mut folded = 0;
    for f in folders {
        let (n, busy) = f.join().unwrap();
        println!("one folder folded {n} rows and found the other folding {busy} times");
        folded += n;
    }
    // Replaced rows may have gone before their fold: folded at most once each.
    let rows = db.count("SELECT count(*) FROM chunks");
    assert!(
        folded >= rows && folded <= added + 100,
        "{folded} folded, {rows} rows, {added} added"
    );
    assert_eq!(cat.pending_vectors().unwrap(), 0);
    assert_eq!(db.count("SELECT count(*) FROM chunks WHERE indexed"), rows);
    assert_rows_whole(&db);
    assert_partial_hnsw(&db);
    check_searches(cat, &mut rng, "after concurrent folds");
}

/// A tail at least as long as the index and the threshold (a first load) is folded by
/// rebuilding the index whole; a rebuild that died half way (index missing, or left
/// INVALID by a failed concurrent build) is finished by the next fold. Searches are
/// right throughout.
#[test]
fn a_long_tail_is_folded_by_rebuilding_the_index() {
    let mut rng = StdRng::seed_from_u64(13);
    let db = Db::new();
    let cat = db.cat();
    cat.set_fold_rebuild_threshold(100);
    load(cat, "a", 30, 10, &mut rng);
    check_searches(cat, &mut rng, "all in the tail");
    let s = cat.fold_vectors(10).unwrap();
    assert_eq!((s.rebuilt, s.folded, s.pending), (true, 300, 0), "{s:?}");
    assert_partial_hnsw(&db);
    check_searches(cat, &mut rng, "after the first rebuild");

    // Shorter than the threshold: row by row.
    load(cat, "b", 5, 10, &mut rng);
    let s = cat.fold_vectors(1000).unwrap();
    assert_eq!((s.rebuilt, s.folded, s.pending), (false, 50, 0), "{s:?}");
    // Longer than the threshold but not than the index: row by row, as asked.
    load(cat, "c", 20, 10, &mut rng);
    let s = cat.fold_vectors(60).unwrap();
    assert_eq!((s.rebuilt, s.folded, s.pending), (false, 60, 140), "{s:?}");
    // At least as long as the index (410 rows): rebuilt, the whole tail folded.
    load(cat, "d", 28, 10, &mut rng);
    let s = cat.fold_vectors(60).unwrap();
    assert_eq!((s.rebuilt, s.folded, s.pending), (true, 420, 0), "{s:?}");
    assert_partial_hnsw(&db);
    check_searches(cat, &mut rng, "after the second rebuild");

    // Killed between the drop and the build: no index; searches scan.
    cat.set_fold_rebuild_threshold(1_000_000);
    db.sql()
        .batch_execute("DROP INDEX chunks_embedding")
        .unwrap();
    load(cat, "e", 2, 10, &mut rng);
    check_searches(cat, &mut rng, "with no vector index");
    let s = cat.fold_vectors(5).unwrap();
    assert_eq!((s.rebuilt, s.folded, s.pending), (true, 20, 0), "{s:?}");
    assert_partial_hnsw(&db);

    // A concurrent build that failed leaves an INVALID index under the name (here a
    // unique one over duplicate values; the planner never uses an invalid index).
    let mut c = db.sql();
    c.batch_execute("DROP INDEX chunks_embedding").unwrap();
    assert!(c
        .batch_execute("CREATE UNIQUE INDEX CONCURRENTLY chunks_embedding ON chunks (dv)")
        .is_err());
    assert_eq!(vector_index(&db).map(|(_, valid)| valid), Some(false));
    load(cat, "f", 1, 10, &mut rng);
    check_searches(cat, &mut rng, "with an invalid vector index");
    let s = cat.fold_vectors(5).unwrap();
    assert_eq!((s.rebuilt, s.folded, s.pending), (true, 10, 0), "{s:?}");
    assert_partial_hnsw(&db);
    assert_rows_whole(&db);
    check_searches(cat, &mut rng, "after the repair");
}

/// A store created before the tail (a full HNSW index, no `indexed` column) is upgraded
/// when opened: its rows count as folded, its index becomes the partial one, and
/// commits after it go to the tail. The migration is idempotent.
#[test]
fn a_store_from_before_the_tail_is_upgraded() {
    let mut rng = StdRng::seed_from_u64(17);
    let db = Db::new();
    load(db.cat(), "a", 10, 8, &mut rng);
    // Back to the schema before V3, as `create` made it then (and without the later
    // migrations, which such a store has not seen either).
    db.sql()
        .batch_execute(
            "DROP INDEX chunks_embedding;
             DROP INDEX chunks_pending;
             ALTER TABLE chunks DROP COLUMN indexed;
             CREATE INDEX chunks_embedding ON chunks USING hnsw (embedding vector_ip_ops)
                 WITH (m = 16, ef_construction = 100);
             DROP TABLE audit_log, audit_traces;
             DELETE FROM dossier_schema_history WHERE version >= 3;",
        )
        .unwrap();
    let (def, _) = vector_index(&db).unwrap();
    assert!(!def.contains("WHERE"), "{def}");

    let cat = PgCatalog::connect(&db.url).unwrap();
    assert_eq!(
        db.count("SELECT count(*) FROM dossier_schema_history WHERE version = 3"),
        1
    );
    assert_partial_hnsw(&db);
    assert_eq!(
        cat.pending_vectors().unwrap(),
        0,
        "rows from before were indexed"
    );
    assert_eq!(db.count("SELECT count(*) FROM chunks WHERE indexed"), 80);
    check_searches(&cat, &mut rng, "upgraded");

    // Running the migration again changes nothing (not even the index's identity).
    let oid = |db: &Db| -> u32 {
        db.sql()
            .query_one("SELECT to_regclass('chunks_embedding')::oid", &[])
            .unwrap()
            .get(0)
    };
    let before = oid(&db);
    db.sql()
        .batch_execute(include_str!("../migrations/V3__vector_tail.sql"))
        .unwrap();
    assert_eq!(oid(&db), before);
    assert_partial_hnsw(&db);

    load(&cat, "b", 3, 4, &mut rng);
    assert_eq!(cat.pending_vectors().unwrap(), 12);
    check_searches(&cat, &mut rng, "upgraded, with a tail");
    assert_eq!(cat.fold_vectors(100).unwrap().pending, 0);
    check_searches(&cat, &mut rng, "upgraded, folded");
}
