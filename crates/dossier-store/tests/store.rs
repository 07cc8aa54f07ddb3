//! Store lifecycle: whole commits, catching up after a crash, generations.

use dossier_core::{Chunk, DocKind, DocumentVersion};
use dossier_store::catalog::{CommitBatch, NewDocument};
use dossier_store::postgres::PgCatalog;
use dossier_store::{testing, Catalog, CatalogBackend, Error, Store, StoreLocation};

const DIM: usize = 4;

fn doc(id: &str, version: &str, texts: &[&str]) -> NewDocument {
    let meta = DocumentVersion {
        doc_id: id.into(),
        version: version.into(),
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
        digest: format!("{id}{version}{}", texts.join("")),
    };
    let chunks: Vec<Chunk> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| Chunk {
            chunk_id: Chunk::make_id(id, version, i as u32),
            doc_id: id.into(),
            version: version.into(),
            ordinal: i as u32,
            section: vec![],
            text: t.to_string(),
            byte_start: 0,
            byte_end: t.len(),
            source_uri: meta.source_uri.clone(),
            tenant: "t".into(),
            kb: None,
            acl: None,
            title: id.into(),
        })
        .collect();
    let vectors = (0..chunks.len())
        .map(|i| {
            let mut v = vec![0.0; DIM];
            v[i % DIM] = 1.0;
            v
        })
        .collect();
    NewDocument {
        meta,
        chunks,
        vectors,
    }
}

fn batch(docs: Vec<NewDocument>) -> CommitBatch {
    CommitBatch {
        documents: docs,
        ..Default::default()
    }
}

/// The store of `dir`: the directory itself, or with `DOSSIER_TEST_POSTGRES` set a
/// database named after it (the same suite runs against both backends).
fn open(dir: &std::path::Path) -> Store {
    Store::open(testing::location(dir), "hash:4", "hash-4", DIM).unwrap()
}

/// The catalog of `dir`'s store opened on its own, as another process would.
fn raw_catalog(dir: &std::path::Path) -> Box<dyn CatalogBackend> {
    match testing::location(dir) {
        StoreLocation::Dir(d) => Box::new(Catalog::open(&d.join("catalog.redb")).unwrap()),
        StoreLocation::Postgres { url, .. } => Box::new(PgCatalog::connect(&url).unwrap()),
    }
}

#[test]
fn index_catches_up_after_a_crash_between_catalog_and_index() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = open(dir.path());
        s.commit(batch(vec![doc("a", "1", &["alpha one", "alpha two"])]))
            .unwrap();
        assert_eq!(s.active().bm25.len(), 2);
    }
    // Simulate a writer that committed the catalog and died before touching the index.
    {
        let c = raw_catalog(dir.path());
        c.commit(batch(vec![doc("b", "1", &["beta"])])).unwrap();
        c.commit(CommitBatch {
            deletes: vec![("t".into(), "a".into(), None)],
            ..Default::default()
        })
        .unwrap();
    }
    let s = open(dir.path());
    let g = s.active();
    assert_eq!(g.generation().unwrap(), s.catalog().generation().unwrap());
    assert_eq!(g.bm25.len(), 1, "a's chunks deleted, b's added");
    assert_eq!(s.catalog().chunk_count().unwrap(), 1);
    assert_eq!(s.view().len(), 1);
}

#[test]
fn replacing_a_version_swaps_its_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.commit(batch(vec![doc("a", "1", &["old text", "more old"])]))
        .unwrap();
    let c = s.commit(batch(vec![doc("a", "1", &["new text"])])).unwrap();
    assert_eq!(c.removed.len(), 2);
    assert_eq!(c.added.len(), 1);
    assert_eq!(s.catalog().chunk_count().unwrap(), 1);
    assert_eq!(s.active().bm25.len(), 1);
}

#[test]
fn deleting_an_unknown_document_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.commit(batch(vec![doc("a", "1", &["x"])])).unwrap();
    let before = s.catalog().generation().unwrap();
    let err = s
        .commit(CommitBatch {
            deletes: vec![("t".into(), "nope".into(), None)],
            documents: vec![doc("b", "1", &["y"])],
            ..Default::default()
        })
        .unwrap_err();
    assert!(matches!(err, Error::NotFound(_)));
    assert_eq!(
        s.catalog().generation().unwrap(),
        before,
        "the whole batch was rolled back"
    );
    assert_eq!(s.catalog().chunk_count().unwrap(), 1);
}

#[test]
fn draft_promote_rollback() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.commit(batch(vec![doc("a", "1", &["alpha", "beta"])]))
        .unwrap();
    let first = s.active().name.clone();
    let draft = s.build_draft(|_| {}).unwrap();
    assert_eq!(draft.status, "draft");
    assert_eq!(
        s.active().name,
        first,
        "the active generation keeps serving"
    );
    // A commit after the draft was built: promotion must catch the draft up.
    s.commit(batch(vec![doc("b", "1", &["gamma"])])).unwrap();
    // draft → shadow → active: no verdict, or a failed one, keeps the draft out.
    let refused = s.promote(None, false).unwrap_err().to_string();
    assert!(refused.contains("not been shadowed"), "{refused}");
    s.save_shadow(
        &draft.name,
        &serde_json::json!({"passed": false, "verdict": "bm25: overlap@k 0.5 < 0.9"}),
    )
    .unwrap();
    let refused = s.promote(None, false).unwrap_err().to_string();
    assert!(refused.contains("overlap@k 0.5"), "{refused}");
    assert_eq!(s.active().name, first, "a refused promote changes nothing");
    s.save_shadow(&draft.name, &serde_json::json!({"passed": true}))
        .unwrap();
    let promoted = s.promote(None, false).unwrap();
    assert_eq!(promoted.name, draft.name);
    assert_eq!(promoted.chunks, 3);
    let list = s.list_generations().unwrap();
    assert!(list
        .iter()
        .any(|g| g.name == first && g.status == "previous"));
    let back = s.rollback().unwrap();
    assert_eq!(back.name, first);
    assert_eq!(back.chunks, 3);
    assert!(
        s.rollback().is_err(),
        "nothing earlier than the first generation"
    );
    drop(s);
    // The pointer survives a reopen.
    assert_eq!(open(dir.path()).active().name, first);
}

#[test]
fn a_store_refuses_vectors_from_another_model() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    let err = Store::open(testing::location(dir.path()), "hash:8", "hash-8", 8)
        .err()
        .unwrap();
    assert!(matches!(err, Error::EmbedderMismatch { .. }), "{err}");
}

/// Defect: commit, index catch-up and view swap ran without one writer lock, so two
/// concurrent commits could replay the same change set into BM25/HNSW (duplicate
/// hits) or publish their views out of order (a stale view keeping a superseded
/// version in force). Many threads commit at once; afterwards every index holds each
/// chunk exactly once and the view is the catalog's.
#[test]
fn concurrent_commits_are_serialised_by_one_writer() {
    let dir = tempfile::tempdir().unwrap();
    let s = std::sync::Arc::new(open(dir.path()));
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                for i in 0..6 {
                    let id = format!("d{t}-{i}");
                    s.commit(batch(vec![doc(&id, "1", &["one text", "two text"])]))
                        .unwrap();
                    // A new version of a shared document, racing the other threads.
                    let v = format!("{}", t * 100 + i + 2);
                    s.commit(batch(vec![doc("shared", &v, &["shared text"])]))
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let catalog_chunks = s.catalog().chunk_count().unwrap();
    let active = s.active();
    assert_eq!(
        active.bm25.len(),
        catalog_chunks,
        "BM25 holds a chunk twice or lost one"
    );
    let view = s.view();
    let stored = s.catalog().documents().unwrap();
    assert_eq!(view.len(), stored.len(), "the view is not the catalog's");
    let mut in_view: Vec<(String, String, u32)> = view
        .entries()
        .map(|e| (e.meta.doc_id.clone(), e.meta.version.clone(), e.dv))
        .collect();
    let mut in_catalog: Vec<(String, String, u32)> = stored
        .iter()
        .map(|e| (e.meta.doc_id.clone(), e.meta.version.clone(), e.dv))
        .collect();
    in_view.sort();
    in_catalog.sort();
    assert_eq!(in_view, in_catalog, "a stale view was published last");
    // Every live vector once: no change set replayed twice into HNSW either.
    let generation = active.generation().unwrap();
    assert_eq!(generation, s.catalog().generation().unwrap());
    // Reopening replays nothing more (the indexes recorded the last generation).
    drop(active);
    drop(view);
    let s = std::sync::Arc::try_unwrap(s).ok().unwrap();
    drop(s);
    let s = open(dir.path());
    assert_eq!(s.active().bm25.len(), catalog_chunks);
}

/// A commit made by another process (the CLI, another replica) reaches an open store
/// through `refresh`: its indexes, view and the tenant's generation move on, and the
/// other tenant's generation stays where it was. The embedded store is one process's:
/// a second open of the same directory is refused rather than silently diverging.
#[test]
fn a_commit_made_elsewhere_arrives_by_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let mut other_tenant = doc("z", "1", &["zeta"]);
    other_tenant.meta.tenant = "u".into();
    s.commit(batch(vec![doc("a", "1", &["alpha"]), other_tenant]))
        .unwrap();
    let u_before = s.snapshot().tenant_generation("u");
    if !testing::on_postgres() {
        let second = Store::open(testing::location(dir.path()), "hash:4", "hash-4", DIM);
        assert!(second.is_err(), "two processes on one embedded store");
        return;
    }
    let replica = open(dir.path());
    assert_ne!(
        replica.dir(),
        s.dir(),
        "two replicas share one lexical index"
    );
    replica
        .commit(batch(vec![doc("b", "1", &["beta through the replica"])]))
        .unwrap();
    assert!(s.active().bm25.len() < 3, "seen before any refresh");
    // What readyz reports as lag: the unreplayed commit's age, then nothing.
    let pg = s.shared().expect("a shared store");
    let waited = pg.unreplayed_for_ms(s.snapshot().generation).unwrap();
    assert!(waited.is_some_and(|ms| ms >= 0.0), "{waited:?}");
    assert!(s.refresh().unwrap(), "the replica's commit did not arrive");
    let pg = s.shared().unwrap();
    assert_eq!(pg.unreplayed_for_ms(s.snapshot().generation).unwrap(), None);
    assert!(!s.refresh().unwrap(), "nothing more to replay");
    assert_eq!(s.active().bm25.len(), 3);
    assert_eq!(s.view().len(), 3);
    let snap = s.snapshot();
    assert_eq!(snap.generation, replica.snapshot().generation);
    assert_eq!(snap.tenant_generation("t"), snap.generation);
    assert_eq!(
        snap.tenant_generation("u"),
        u_before,
        "tenant u was not touched"
    );
}

/// What a view says, in an order that does not depend on how it was built.
fn view_facts(s: &Store) -> (Vec<String>, Vec<String>) {
    let view = s.view();
    // Every entry is found by its key (the view's key index is kept up per commit too).
    for (i, e) in view.entries().enumerate() {
        assert_eq!(
            view.find(&e.meta.tenant, &e.meta.doc_id, &e.meta.version),
            Some(i),
            "{}/{}@{}",
            e.meta.tenant,
            e.meta.doc_id,
            e.meta.version
        );
    }
    assert_eq!(view.find("t", "no-such-document", "1"), None);
    // Positions follow `dv`, so views built either way list versions in one order.
    let dvs: Vec<u32> = view.entries().map(|e| e.dv).collect();
    assert!(
        dvs.windows(2).all(|w| w[0] < w[1]),
        "positions out of dv order"
    );
    let mut entries: Vec<String> = view
        .entries()
        .enumerate()
        .map(|(i, e)| {
            let v = view.validity(i);
            format!(
                "{}/{}@{} dv{} {:?} {:?}",
                e.meta.tenant, e.meta.doc_id, e.meta.version, e.dv, e.seqs, v
            )
        })
        .collect();
    entries.sort();
    let mut conflicts: Vec<String> = view
        .look_alikes()
        .iter()
        .map(|(t, l)| format!("{t} {l:?}"))
        .collect();
    conflicts.sort();
    (entries, conflicts)
}

/// A commit re-reads only the document versions it names and, in the tenants it
/// touches, plans again only what it can change. After random batches in three tenants
/// — new documents and versions, versions superseding their own document's or another's,
/// look-alike titles in two knowledge bases, passages, replaced versions, deletes of a
/// version or a whole document, review decisions approving or rejecting supersessions —
/// the view kept up commit by commit equals one rebuilt from the catalog, checked
/// whenever the store is reopened (at random, so chains of every length are checked).
#[test]
fn the_view_updated_commit_by_commit_equals_one_rebuilt_from_the_catalog() {
    use dossier_core::review::{Decision, Subject, Verdict};
    use dossier_core::VersionRef;
    use rand::{Rng, SeedableRng};
    let seed: u64 = std::env::var("VIEW_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen());
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    let tenants = ["t", "u", "v"];
    let vref = |rng: &mut rand::rngs::StdRng| VersionRef {
        doc_id: format!("d{}", rng.gen_range(0..6)),
        version: rng.gen_range(1..4).to_string(),
    };
    let mut checks = 0;
    for step in 0..120 {
        let tenant = tenants[rng.gen_range(0..tenants.len())];
        let mut batch = CommitBatch::default();
        for _ in 0..rng.gen_range(1..4) {
            let id = format!("d{}", rng.gen_range(0..6));
            let roll = rng.gen_range(0..10);
            if roll == 0 {
                batch.deletes.push((tenant.into(), id, None));
            } else if roll == 1 {
                let version = rng.gen_range(1..4).to_string();
                batch.deletes.push((tenant.into(), id, Some(version)));
            } else if roll == 2 {
                let (newer, older) = (vref(&mut rng), vref(&mut rng));
                let subject = Subject::Supersession { newer, older };
                batch.decisions.push(Decision {
                    id: subject.id(tenant),
                    tenant: tenant.into(),
                    subject,
                    verdict: if rng.gen_bool(0.7) {
                        Verdict::Approved
                    } else {
                        Verdict::Rejected
                    },
                    by: "reviewer".into(),
                    at: "2026-01-01T00:00:00Z".into(),
                    note: String::new(),
                });
            } else {
                let version = rng.gen_range(1..4).to_string();
                let mut d = doc(&id, &version, &["some text", "more text"]);
                d.meta.tenant = tenant.into();
                // Look-alike titles across ids, dates that overlap or not.
                d.meta.title = format!("Policy {}", rng.gen_range(0..3));
                d.meta.kb = rng.gen_bool(0.2).then(|| "hr".to_string());
                if rng.gen_bool(0.1) {
                    d.meta.kind = DocKind::Passage;
                }
                d.meta.effective_from = rng
                    .gen_bool(0.9)
                    .then(|| chrono::NaiveDate::from_ymd_opt(2025, rng.gen_range(1..13), 1))
                    .flatten();
                if rng.gen_bool(0.15) {
                    d.meta.effective_to =
                        chrono::NaiveDate::from_ymd_opt(2026, rng.gen_range(1..13), 1);
                }
                d.meta.digest = format!("{step}");
                if rng.gen_bool(0.4) {
                    // Its own document's first version, or any version of any document.
                    let target = if rng.gen_bool(0.5) {
                        VersionRef {
                            doc_id: id.clone(),
                            version: "1".into(),
                        }
                    } else {
                        vref(&mut rng)
                    };
                    d.meta.supersedes = Some(target);
                    d.meta.supersedes_evidence = Some("release note".into());
                }
                for c in &mut d.chunks {
                    c.tenant = tenant.into();
                }
                // One version of a document per batch.
                batch.documents.retain(|o| {
                    (&o.meta.doc_id, &o.meta.version) != (&d.meta.doc_id, &d.meta.version)
                });
                batch.documents.push(d);
            }
        }
        // A delete of a document that is not there fails and changes nothing.
        let _ = s.commit(batch);
        if rng.gen_bool(0.3) || step == 119 {
            let incremental = view_facts(&s);
            drop(s);
            s = open(dir.path());
            let rebuilt = view_facts(&s);
            assert_eq!(
                incremental, rebuilt,
                "seed {seed} step {step} (VIEW_SEED={seed} reproduces)"
            );
            checks += 1;
        }
    }
    assert!(checks > 10);
    let (entries, conflicts) = view_facts(&s);
    assert!(
        !entries.is_empty() && !conflicts.is_empty(),
        "seed {seed}: a dull run"
    );
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &target);
        } else if e.file_name() != "replica.lock" {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// Defect: an index directory was trusted by its generation number alone, so another
/// store's indexes at the same generation (a database dropped and created again at the
/// same URL, an index directory reused for another database) served the other store's
/// chunks. Indexes are now bound to their store and rebuilt when they are not its own.
#[test]
fn another_stores_indexes_are_rebuilt_not_trusted() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = open(a_dir.path());
    a.commit(batch(vec![doc("a", "1", &["alpha one", "alpha two"])]))
        .unwrap();
    let a_indexes = a.dir().join("indexes");
    let b = open(b_dir.path());
    b.commit(batch(vec![doc("b", "1", &["beta"])])).unwrap();
    let b_indexes = b.dir().join("indexes");
    drop(b);
    std::fs::remove_dir_all(&b_indexes).unwrap();
    copy_dir(&a_indexes, &b_indexes);
    drop(a);
    let b = open(b_dir.path());
    assert_eq!(b.catalog().chunk_count().unwrap(), 1);
    assert_eq!(b.active().bm25.len(), 1, "store a's index served store b");
}

/// Every chunk sequence number a search for each axis finds, with every document admitted.
fn found_by_vectors(s: &Store) -> std::collections::BTreeSet<u64> {
    let snap = s.snapshot();
    let admit =
        dossier_index::Admit::from_ordinals(s.catalog().documents().unwrap().iter().map(|d| d.dv));
    let mut found = std::collections::BTreeSet::new();
    for axis in 0..DIM {
        let mut q = vec![0.0; DIM];
        q[axis] = 1.0;
        for hit in s.search_vectors(&snap, &q, 50, &admit).unwrap() {
            found.insert(hit.seq);
        }
    }
    found
}

#[test]
fn committed_vectors_are_searchable_before_linking_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let texts: Vec<String> = (0..40).map(|i| format!("chunk {i}")).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let expected = {
        let s = open(dir.path());
        s.commit(batch(vec![doc("a", "1", &refs[..20])])).unwrap();
        s.settle().unwrap();
        assert_eq!(s.pending_vectors().unwrap(), 0);
        s.commit(batch(vec![doc("b", "1", &refs[20..])])).unwrap();
        assert_eq!(s.pending_vectors().unwrap(), 20, "the commit links nothing");
        let found = found_by_vectors(&s);
        assert_eq!(found.len(), 40, "linked and pending rows are both searched");
        found
    };
    // Reopened without linking: the pending rows come back from the change log.
    {
        let s = open(dir.path());
        assert_eq!(found_by_vectors(&s), expected);
        let linked = s.settle().unwrap();
        assert_eq!(linked.pending, 0);
        assert_eq!(found_by_vectors(&s), expected);
    }
    // Reopened after linking: nothing pending, nothing lost.
    let s = open(dir.path());
    assert_eq!(s.pending_vectors().unwrap(), 0);
    assert_eq!(found_by_vectors(&s), expected);
}
