//! Model extraction through the seam (a scripted double stands in for the model here;
//! the real model runs in model_scenarios.rs): the written policy accepts only grounded,
//! known relations between known entities; the rest waits for review, and nothing
//! ungrounded is kept. Accepted and approved relations are edges visible exactly where
//! their chunk is.

use std::path::PathBuf;

use dossier_core::review::{Subject, Verdict};
use dossier_engine::review::POLICY_REVIEWER;
use dossier_engine::Engine;
use dossier_llm::{ChatResponse, ScriptedChat};

fn engine(dir: &std::path::Path) -> Engine {
    let e = Engine::with_embedder(
        dir,
        "hash:64",
        Box::new(dossier_embed::HashEmbedder::new(64)),
    )
    .unwrap();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/scenarios/shop");
    e.ingest(&[root], &mut ()).unwrap();
    e
}

fn scope(e: &Engine, who: &str) -> dossier_engine::Scope {
    e.scope(who, "2026-11-30".parse().unwrap()).unwrap()
}

#[test]
fn policy_accepts_little_queues_the_rest_and_drops_the_ungrounded() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    let n = e.tenant_chunks("shop", 1000).unwrap().len();
    // One reply per chunk; only the reply for the P-204 manual says anything.
    let chunks = e.tenant_chunks("shop", 1000).unwrap();
    let replies = chunks.iter().map(|c| {
        if c.doc_id == "product-manual-P-204" && c.text.contains("S-8") {
            ChatResponse::text(
                r#"{"relations":[
                    {"from":"P-204","relation":"supplied_by","to":"S-8","confidence":0.97},
                    {"from":"P-204","relation":"is a","to":"无线降噪耳机","confidence":0.99},
                    {"from":"P-999","relation":"supplied_by","to":"S-8","confidence":0.99},
                    {"from":"P-204","relation":"supplied_by","to":"S-8","confidence":0.4}
                ]}"#,
            )
        } else if c.doc_id == "supplier-notice-S-8" {
            ChatResponse::text(r#"{"relations":[{"from":"E-1","relation":"involves","to":"电池模组","confidence":0.8}]}"#)
        } else {
            ChatResponse::text("not json")
        }
    });
    let model = ScriptedChat::new(replies).named("scripted");
    let r = dossier_agent::extract::propose_relations(&e, &model, "shop", 1000).unwrap();
    assert_eq!(r.chunks, n);
    assert_eq!(r.unusable_replies, n - 2, "{r:?}");
    // Every request asked for schema-constrained JSON.
    assert!(model.requests().iter().all(|q| q.json_schema.is_some()));
    let o = &r.outcome;
    assert_eq!(o.accepted.len(), 1, "{o:?}");
    assert!(o.accepted[0].contains("supplied_by"));
    assert_eq!(o.discarded.len(), 1, "P-999 is not in the text: {o:?}");
    assert_eq!(o.queued.len(), 2, "{o:?}");

    // The queue shows the model's candidates with their source text.
    let queue = e.review_list(Some("shop"), false).unwrap();
    let is_a = queue
        .iter()
        .find(|i| matches!(&i.subject, Subject::Relation { relation, .. } if relation == "is_a"))
        .expect("queued");
    let shown = e.review_show(&is_a.id).unwrap();
    assert!(shown
        .evidence
        .iter()
        .any(|x| x.text.contains("无线降噪耳机")));
    let located = queue
        .iter()
        .find(
            |i| matches!(&i.subject, Subject::Relation { relation, .. } if relation == "involves"),
        )
        .expect("queued");

    // Before any review, no queued relation is an edge.
    let u7 = scope(&e, "u7");
    let g = e.graph_export(&u7).unwrap();
    assert!(!g.edges.iter().any(|x| x.relation == "is_a"));
    // The policy's decision is recorded like a reviewer's.
    let decided = e.review_list(Some("shop"), true).unwrap();
    assert!(decided
        .iter()
        .any(|i| i.decision.as_ref().is_some_and(|d| d.by == POLICY_REVIEWER)));

    // Approved by a person: an edge with the chunk as provenance, seen where the chunk is.
    e.review_decide(&is_a.id, Verdict::Approved, "alice", "true")
        .unwrap();
    e.review_decide(&located.id, Verdict::Approved, "alice", "true")
        .unwrap();
    let g = e.graph_export(&u7).unwrap();
    let edge = g
        .edges
        .iter()
        .find(|x| x.relation == "is_a")
        .expect("approved edge");
    assert!(edge
        .provenance
        .iter()
        .all(|p| p.starts_with("product-manual-P-204@")));
    // The notice is not u7's to read: its approved relation does not exist for u7 ...
    assert!(!g.edges.iter().any(|x| x.relation == "involves"));
    // ... but does for the supply chain.
    let zhang = e.graph_export(&scope(&e, "zhang")).unwrap();
    assert!(zhang.edges.iter().any(|x| x.relation == "involves"));

    // Deleting the source removes the approved edge with it.
    e.delete("product-manual-P-204", None).unwrap();
    assert!(!e
        .graph_export(&u7)
        .unwrap()
        .edges
        .iter()
        .any(|x| x.relation == "is_a"));
}
