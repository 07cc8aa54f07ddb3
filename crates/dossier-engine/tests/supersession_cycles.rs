//! Issue 39: A@2 superseding B@2 while B@2 supersedes A@2 ingested with exit 0 and hid
//! both documents on every date. A cycle is a problem reported at ingest now, and the
//! version that would close it is not written.

use std::path::Path;

use chrono::NaiveDate;
use dossier_engine::{Engine, Mode, SearchRequest};

fn open(dir: &Path) -> Engine {
    Engine::with_embedder(
        dossier_engine::dossier_store::testing::location(dir),
        "hash:64",
        Box::new(dossier_embed::HashEmbedder::new(64)),
    )
    .unwrap()
}

fn doc(id: &str, supersedes: &str, word: &str) -> String {
    format!(
        "---\nid: {id}\nversion: \"2\"\ntitle: {id} rules\ntenant: t\neffective_from: 2026-01-01\nsupersedes: {supersedes}\n---\n# {id}\n\nThe {word} rule of {id}.\n"
    )
}

fn visible(engine: &Engine, q: &str) -> Vec<String> {
    let r = engine
        .search(&SearchRequest {
            principal: "reader".into(),
            query: q.into(),
            mode: Mode::Bm25,
            k: 20,
            now: NaiveDate::from_ymd_opt(2026, 6, 1).unwrap(),
            as_of: None,
            kbs: vec![],
        })
        .unwrap();
    r.hits.iter().map(|h| h.doc_id.clone()).collect()
}

fn principals(dir: &Path) {
    std::fs::write(
        dir.join("principals.yaml"),
        "principals:\n  - {id: reader, tenant: t, groups: []}\n",
    )
    .unwrap();
}

#[test]
fn a_supersession_cycle_in_one_ingest_is_reported_and_one_document_stays_visible() {
    let store = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    principals(src.path());
    std::fs::write(src.path().join("a.md"), doc("a", "b@2", "wombat")).unwrap();
    std::fs::write(src.path().join("b.md"), doc("b", "a@2", "wombat")).unwrap();
    let engine = open(store.path());
    let report = engine.ingest(&[src.path().to_path_buf()], &mut ()).unwrap();
    assert_eq!(report.documents_added, 1, "{report:?}");
    assert!(
        report.problems.iter().any(|p| p.contains("cycle")),
        "{:?}",
        report.problems
    );
    assert_eq!(visible(&engine, "wombat rule").len(), 1);
}

#[test]
fn a_supersession_cycle_across_two_ingests_is_reported() {
    let store = tempfile::tempdir().unwrap();
    let engine = open(store.path());
    let first = tempfile::tempdir().unwrap();
    principals(first.path());
    std::fs::write(first.path().join("a.md"), doc("a", "b@2", "quagga")).unwrap();
    std::fs::write(
        first.path().join("b.md"),
        "---\nid: b\nversion: \"2\"\ntitle: b rules\ntenant: t\neffective_from: 2025-01-01\n---\n# b\n\nThe quagga rule of b.\n",
    )
    .unwrap();
    let r = engine
        .ingest(&[first.path().to_path_buf()], &mut ())
        .unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    // b@2 now says it supersedes a@2, which supersedes b@2: refused.
    let second = tempfile::tempdir().unwrap();
    std::fs::write(second.path().join("b.md"), doc("b", "a@2", "quagga")).unwrap();
    let r = engine
        .ingest(&[second.path().to_path_buf()], &mut ())
        .unwrap();
    assert_eq!(r.documents_added, 0, "{r:?}");
    assert!(
        r.problems.iter().any(|p| p.contains("cycle")),
        "{:?}",
        r.problems
    );
    assert_eq!(visible(&engine, "quagga rule"), ["a"]);
}

#[test]
fn a_chain_without_a_cycle_is_not_refused() {
    let store = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    principals(src.path());
    std::fs::write(src.path().join("a.md"), doc("a", "b@2", "okapi")).unwrap();
    std::fs::write(src.path().join("b.md"), doc("b", "c@2", "okapi")).unwrap();
    std::fs::write(
        src.path().join("c.md"),
        "---\nid: c\nversion: \"2\"\ntitle: c rules\ntenant: t\neffective_from: 2025-01-01\n---\n# c\n\nThe okapi rule of c.\n",
    )
    .unwrap();
    let engine = open(store.path());
    let r = engine.ingest(&[src.path().to_path_buf()], &mut ()).unwrap();
    assert_eq!(r.documents_added, 3, "{r:?}");
    assert!(r.problems.is_empty(), "{:?}", r.problems);
}
