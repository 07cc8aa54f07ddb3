//! The review queue: look-alike supersessions and name merges become facts only by a
//! recorded decision, and every derived view follows the decision.

use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use dossier_core::review::{Subject, Verdict};
use dossier_engine::review::ReviewStatus;
use dossier_engine::{Engine, Error, Mode, SearchRequest};

fn scenarios() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/scenarios/shop")
}

fn open(dir: &Path) -> Engine {
    Engine::with_embedder(
        dossier_engine::dossier_store::testing::location(dir),
        "hash:64",
        Box::new(dossier_embed::HashEmbedder::new(64)),
    )
    .unwrap()
}

fn docs_for(engine: &Engine, q: &str, now: &str) -> (Vec<String>, usize) {
    let r = engine
        .search(&SearchRequest {
            principal: "u7".into(),
            query: q.into(),
            mode: Mode::Bm25,
            k: 20,
            now: now.parse::<NaiveDate>().unwrap(),
            as_of: None,
            kbs: vec![],
        })
        .unwrap();
    let docs = r
        .hits
        .iter()
        .map(|h| format!("{}@{}", h.doc_id, h.version))
        .collect();
    (docs, r.conflicts.len())
}

const AUTH: &str = "API 认证方式 双向 TLS OAuth";

#[test]
fn an_approved_supersession_deprecates_the_older_version_and_ends_the_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path());
    engine.ingest(&[scenarios()], &mut ()).unwrap();

    let open_items = engine.review_list(Some("shop"), false).unwrap();
    let sup: Vec<_> = open_items
        .iter()
        .filter(|i| matches!(i.subject, Subject::Supersession { .. }))
        .collect();
    assert_eq!(sup.len(), 1, "{open_items:?}");
    let id = sup[0].id.clone();
    match &sup[0].subject {
        Subject::Supersession { newer, older } => {
            assert_eq!(
                newer.doc_id, "api-auth-mtls-draft",
                "the later start is the candidate successor"
            );
            assert_eq!(older.to_string(), "api-auth@2.0");
        }
        other => panic!("{other:?}"),
    }
    // Shown with the text of both documents.
    let shown = engine.review_show(&id).unwrap();
    assert!(shown
        .evidence
        .iter()
        .any(|e| e.doc_id == "api-auth" && e.text.contains("OAuth")));
    assert!(shown
        .evidence
        .iter()
        .any(|e| e.doc_id == "api-auth-mtls-draft" && e.text.contains("双向 TLS")));
    assert!(engine
        .review_list(Some("acme"), false)
        .unwrap()
        .iter()
        .all(|i| i.tenant == "acme"));

    // Before any decision: both in force, reported as a conflict.
    let (docs, conflicts) = docs_for(&engine, AUTH, "2026-11-30");
    assert!(
        docs.contains(&"api-auth@2.0".to_string()) && conflicts > 0,
        "{docs:?}"
    );

    let d = engine
        .review_decide(&id, Verdict::Approved, "alice", "release note R-9")
        .unwrap();
    assert_eq!(d.by, "alice");
    let (docs, conflicts) = docs_for(&engine, AUTH, "2026-11-30");
    assert!(!docs.contains(&"api-auth@2.0".to_string()), "{docs:?}");
    assert!(
        docs.contains(&"api-auth-mtls-draft@0.9".to_string()),
        "{docs:?}"
    );
    assert_eq!(conflicts, 0);
    // Before the successor's start, 2.0 is still the version in force.
    let (docs, _) = docs_for(&engine, AUTH, "2026-05-01");
    assert!(docs.contains(&"api-auth@2.0".to_string()), "{docs:?}");
    let shown = engine.review_show(&id).unwrap();
    assert_eq!(shown.status, ReviewStatus::Approved);
    assert!(shown
        .evidence
        .iter()
        .any(|e| e.doc_id == "api-auth" && e.status == "deprecated"));
    assert!(engine
        .review_list(None, false)
        .unwrap()
        .iter()
        .all(|i| i.id != id));

    // The decision is stored: a reopened store still follows it.
    drop(engine);
    let engine = open(dir.path());
    let (docs, _) = docs_for(&engine, AUTH, "2026-11-30");
    assert!(!docs.contains(&"api-auth@2.0".to_string()), "{docs:?}");

    // A later rejection replaces it: different documents, both in force, no conflict.
    engine
        .review_decide(&id, Verdict::Rejected, "bob", "not a successor")
        .unwrap();
    let (docs, conflicts) = docs_for(&engine, AUTH, "2026-11-30");
    assert!(docs.contains(&"api-auth@2.0".to_string()), "{docs:?}");
    assert!(
        docs.contains(&"api-auth-mtls-draft@0.9".to_string()),
        "{docs:?}"
    );
    assert_eq!(conflicts, 0);
    let all = engine.review_list(None, true).unwrap();
    let item = all.iter().find(|i| i.id == id).unwrap();
    assert_eq!(item.status, ReviewStatus::Rejected);
    assert_eq!(item.decision.as_ref().unwrap().by, "bob");
}

#[test]
fn unknown_candidates_and_anonymous_decisions_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path());
    engine.ingest(&[scenarios()], &mut ()).unwrap();
    assert!(matches!(
        engine.review_show("sup-000000000000"),
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        engine.review_decide("sup-000000000000", Verdict::Approved, "alice", ""),
        Err(Error::NotFound(_))
    ));
    let id = engine.review_list(None, false).unwrap()[0].id.clone();
    assert!(matches!(
        engine.review_decide(&id, Verdict::Approved, "  ", ""),
        Err(Error::Invalid(_))
    ));
}

#[test]
fn an_approved_merge_joins_two_names_in_the_graph_and_a_rejection_keeps_them_apart() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    std::fs::create_dir_all(&corpus).unwrap();
    std::fs::write(
        corpus.join("principals.yaml"),
        "principals:\n  - {id: ops, tenant: t, groups: [ops]}\n",
    )
    .unwrap();
    std::fs::write(
        corpus.join("a.md"),
        "---\nid: a\nversion: \"1\"\ntitle: Gateway notes\ntenant: t\n---\n# Notes\nThe settlement-gateway depends on the ledger-service.\n",
    )
    .unwrap();
    std::fs::write(
        corpus.join("b.md"),
        "---\nid: b\nversion: \"1\"\ntitle: Ownership\ntenant: t\n---\n# Owners\nThe settlement-gateways are owned by team-orbit.\n",
    )
    .unwrap();
    let engine = open(&dir.path().join("store"));
    let report = engine.ingest(&[corpus], &mut ()).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);

    let scope = engine.scope("ops", "2026-11-30".parse().unwrap()).unwrap();
    let before = engine.graph_entity(&scope, "settlement-gateway").unwrap();
    assert!(
        before.edges.iter().all(|e| e.to != "team-orbit"),
        "{before:?}"
    );

    let items = engine.review_list(Some("t"), false).unwrap();
    let merge = items
        .iter()
        .find(|i| {
            matches!(&i.subject, Subject::Merge { alias, canonical }
            if [alias.as_str(), canonical.as_str()].iter().all(|n| n.contains("settlementgateway")))
        })
        .unwrap_or_else(|| panic!("no merge candidate in {items:?}"));
    let shown = engine.review_show(&merge.id).unwrap();
    assert!(
        shown
            .evidence
            .iter()
            .any(|e| e.text.contains("settlement-gateways are owned")),
        "{shown:?}"
    );

    engine
        .review_decide(&merge.id, Verdict::Approved, "alice", "same service")
        .unwrap();
    let after = engine.graph_entity(&scope, "settlement-gateway").unwrap();
    assert!(
        after
            .edges
            .iter()
            .any(|e| e.relation == "owned_by" && e.to == "team-orbit"),
        "{after:?}"
    );
    assert!(
        after.edges.iter().any(|e| e.relation == "depends_on"),
        "{after:?}"
    );
    assert_eq!(
        engine
            .graph_entity(&scope, "settlement-gateways")
            .unwrap()
            .id,
        after.id
    );

    engine
        .review_decide(&merge.id, Verdict::Rejected, "bob", "two services")
        .unwrap();
    let apart = engine.graph_entity(&scope, "settlement-gateway").unwrap();
    assert!(
        apart.edges.iter().all(|e| e.to != "team-orbit"),
        "{apart:?}"
    );
    assert!(
        engine
            .review_list(Some("t"), false)
            .unwrap()
            .iter()
            .all(|i| i.id != merge.id),
        "a rejected pair leaves the queue"
    );
}
