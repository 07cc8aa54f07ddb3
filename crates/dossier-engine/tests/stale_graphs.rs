//! Graphs refreshed beside requests: after a commit in a tenant, requests keep answering
//! from the graph built before it (no rebuild inside a request) until
//! `refresh_graphs` swaps in the next one, and meanwhile nothing they return — graph
//! views, community reports, every graph mode's hits and subgraph — names a document
//! the caller may no longer read (deleted, or replaced by a version behind a group) or
//! a record row it may no longer read (deleted, or given to another owner).
//! Randomised operations, checked against an oracle of what each principal may read,
//! on whole serialised responses; both backends (`DOSSIER_TEST_POSTGRES`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use chrono::NaiveDate;
use dossier_engine::{Engine, Mode, SearchRequest};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const GROUPS: [&str; 2] = ["red", "blue"];
/// Principals of tenant `t` and their groups.
const READERS: [(&str, &[&str]); 3] = [("pa", &["red"]), ("pb", &["blue"]), ("pc", &[])];
const NOW: &str = "2026-11-30";

/// One stored document of tenant `t`: its ACL group, if any.
#[derive(Clone)]
struct Doc {
    acl: Option<usize>,
    product: u32,
    supplier: u32,
}

fn id(n: usize) -> String {
    format!("d{n:03}")
}

fn write_doc(src: &Path, n: usize, d: &Doc, generation: usize) {
    let acl = d
        .acl
        .map_or(String::new(), |g| format!("acl: [{}]\n", GROUPS[g]));
    // The generation makes a replacement's digest differ from the version it replaces.
    let text = format!(
        "---\nid: {id}\nversion: v1\ntitle: note {id}\ntenant: t\n{acl}---\n# Note {id}\n\n\
         The amplifier of P-{p} is supplied by V-{s}. Batch {id} passed inspection {generation}.\n\
         Incident E-{s} affects V-{s}; see {id} for the timeline.\n",
        id = id(n),
        p = d.product,
        s = d.supplier,
    );
    std::fs::write(src.join(format!("{}.md", id(n))), text).unwrap();
}

/// Record rows of tenant `t`'s `orders` table: key number → (owner, product). The
/// owner reads a row, and so does group `blue`.
type Orders = BTreeMap<usize, (usize, u32)>;

fn order_key(n: usize) -> String {
    format!("Q-{n:03}")
}

fn write_orders(src: &Path, orders: &Orders) {
    let dir = src.join("records");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("orders.schema.yaml"),
        "table: orders\ntenant: t\nkey: order_id\nowner_field: owner\nread_groups: [blue]\n\
         links:\n  - field: product\n    entity: Product\n    relation: contains_product\n",
    )
    .unwrap();
    let rows: String = orders
        .iter()
        .map(|(n, (owner, product))| {
            format!(
                "{{\"order_id\":\"{}\",\"owner\":\"{}\",\"product\":\"P-{product}\"}}\n",
                order_key(*n),
                READERS[*owner].0
            )
        })
        .collect();
    std::fs::write(dir.join("orders.jsonl"), rows).unwrap();
}

/// The rows `who` may read.
fn readable_orders(orders: &Orders, who: &str, groups: &[&str]) -> BTreeSet<String> {
    orders
        .iter()
        .filter(|(_, (owner, _))| groups.contains(&"blue") || READERS[*owner].0 == who)
        .map(|(n, _)| order_key(*n))
        .collect()
}

fn date() -> NaiveDate {
    NOW.parse().unwrap()
}

/// Every check one reader gets after an operation: whole responses serialised, and no
/// document id the oracle says it may not read appears anywhere in them.
fn check_reader(
    engine: &Engine,
    who: &str,
    readable: &BTreeSet<String>,
    all: &BTreeSet<String>,
    step: &str,
) {
    let scope = engine.scope(who, date()).unwrap();
    let mut outputs: Vec<(String, String)> = Vec::new();
    let view = engine.graph_view(&scope).unwrap();
    outputs.push((
        "graph view".into(),
        serde_json::to_string(&(view.entities(), view.edges())).unwrap(),
    ));
    outputs.push((
        "community reports".into(),
        serde_json::to_string(&engine.community_reports(&scope).unwrap()).unwrap(),
    ));
    for mode in Mode::GRAPH_MODES {
        for query in [
            "Which products does V-1 supply?",
            "incident E-2",
            "P-3 amplifier",
        ] {
            let r = engine
                .search(&SearchRequest {
                    principal: who.into(),
                    query: query.into(),
                    mode,
                    k: 10,
                    now: date(),
                    as_of: None,
                    kbs: vec![],
                })
                .unwrap();
            for h in &r.hits {
                assert!(
                    readable.contains(&h.doc_id),
                    "{step}: {mode:?} gave {who} a hit from {}",
                    h.doc_id
                );
            }
            outputs.push((
                format!("{mode:?} {query}"),
                serde_json::to_string(&r).unwrap(),
            ));
        }
    }
    for (what, body) in &outputs {
        for doc in all.difference(readable) {
            assert!(
                !body.contains(doc.as_str()),
                "{step}: {who}'s {what} names {doc}, which {who} may not read: {body}"
            );
        }
    }
}

fn run(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let mut principals = String::from("principals:\n");
    for (who, groups) in READERS {
        principals.push_str(&format!(
            "  - {{id: {who}, tenant: t, groups: [{}]}}\n",
            groups.join(", ")
        ));
    }
    principals.push_str("  - {id: po, tenant: o, groups: []}\n");
    std::fs::write(src.join("principals.yaml"), principals).unwrap();
    let engine = Engine::with_embedder(
        dossier_engine::dossier_store::testing::location(&dir.path().join("store")),
        "hash:32",
        Box::new(dossier_embed::HashEmbedder::new(32)),
    )
    .unwrap();
    engine.serve_stale_graphs(true);

    let mut docs: BTreeMap<usize, Doc> = BTreeMap::new();
    let mut ever: BTreeSet<String> = BTreeSet::new();
    let mut next = 0usize;
    let mut orders: Orders = BTreeMap::new();
    let mut next_order = 0usize;
    for _ in 0..4 {
        orders.insert(
            next_order,
            (rng.gen_range(0..READERS.len()), rng.gen_range(0..5)),
        );
        ever.insert(order_key(next_order));
        next_order += 1;
    }
    write_orders(&src, &orders);
    let new_doc = |rng: &mut StdRng| Doc {
        acl: rng.gen_bool(0.4).then(|| rng.gen_range(0..GROUPS.len())),
        product: rng.gen_range(0..5),
        supplier: rng.gen_range(0..4),
    };
    for _ in 0..8 {
        let d = new_doc(&mut rng);
        write_doc(&src, next, &d, 0);
        ever.insert(id(next));
        docs.insert(next, d);
        next += 1;
    }
    let report = engine.ingest(std::slice::from_ref(&src), &mut ()).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);

    let readable_docs = |docs: &BTreeMap<usize, Doc>, groups: &[&str]| -> BTreeSet<String> {
        docs.iter()
            .filter(|(_, d)| d.acl.is_none_or(|g| groups.contains(&GROUPS[g])))
            .map(|(n, _)| id(*n))
            .collect()
    };
    let readable = |docs: &BTreeMap<usize, Doc>, orders: &Orders, who: &str, groups: &[&str]| {
        let mut r = readable_docs(docs, groups);
        r.extend(readable_orders(orders, who, groups));
        r
    };
    // Warm: every reader's view and reports exist before the first commit.
    for (who, groups) in READERS {
        check_reader(
            &engine,
            who,
            &readable(&docs, &orders, who, groups),
            &ever,
            "warm",
        );
    }
    let mut in_requests = engine.graph_builds().in_requests;
    let mut refreshed = 0;
    for step in 0..24 {
        let op = rng.gen_range(0..7);
        let what = match op {
            // A new document.
            0 => {
                let d = new_doc(&mut rng);
                write_doc(&src, next, &d, step);
                ever.insert(id(next));
                docs.insert(next, d);
                next += 1;
                engine.ingest(std::slice::from_ref(&src), &mut ()).unwrap();
                format!("added {}", id(next - 1))
            }
            // A stored version replaced by one behind a group (newly restricted).
            1 if !docs.is_empty() => {
                let n = *docs.keys().nth(rng.gen_range(0..docs.len())).unwrap();
                let d = docs.get_mut(&n).unwrap();
                d.acl = Some(rng.gen_range(0..GROUPS.len()));
                write_doc(&src, n, d, step + 100);
                engine.ingest(std::slice::from_ref(&src), &mut ()).unwrap();
                format!("restricted {} to {}", id(n), GROUPS[d.acl.unwrap()])
            }
            // A document deleted.
            2 if !docs.is_empty() => {
                let n = *docs.keys().nth(rng.gen_range(0..docs.len())).unwrap();
                docs.remove(&n);
                std::fs::remove_file(src.join(format!("{}.md", id(n)))).unwrap();
                engine.delete(&id(n), Some("t")).unwrap();
                format!("deleted {}", id(n))
            }
            // A record row added.
            3 => {
                let owner = rng.gen_range(0..READERS.len());
                orders.insert(next_order, (owner, rng.gen_range(0..5)));
                ever.insert(order_key(next_order));
                next_order += 1;
                write_orders(&src, &orders);
                engine.ingest(std::slice::from_ref(&src), &mut ()).unwrap();
                format!(
                    "added {} for {}",
                    order_key(next_order - 1),
                    READERS[owner].0
                )
            }
            // A record row given to another owner.
            4 if !orders.is_empty() => {
                let n = *orders.keys().nth(rng.gen_range(0..orders.len())).unwrap();
                let row = orders.get_mut(&n).unwrap();
                row.0 = (row.0 + rng.gen_range(1..READERS.len())) % READERS.len();
                let owner = READERS[row.0].0;
                write_orders(&src, &orders);
                engine.ingest(std::slice::from_ref(&src), &mut ()).unwrap();
                format!("gave {} to {owner}", order_key(n))
            }
            // A record row deleted.
            5 if !orders.is_empty() => {
                let n = *orders.keys().nth(rng.gen_range(0..orders.len())).unwrap();
                orders.remove(&n);
                write_orders(&src, &orders);
                engine.ingest(std::slice::from_ref(&src), &mut ()).unwrap();
                format!("deleted {}", order_key(n))
            }
            // The maintenance loop's turn.
            _ => {
                refreshed += engine.refresh_graphs().unwrap();
                "refreshed".to_string()
            }
        };
        let label = format!("seed {seed} step {step} ({what})");
        for (who, groups) in READERS {
            let readable = readable(&docs, &orders, who, groups);
            check_reader(&engine, who, &readable, &ever, &label);
        }
        let builds = engine.graph_builds().in_requests;
        assert_eq!(
            builds, in_requests,
            "{label}: a request rebuilt the tenant graph"
        );
        in_requests = builds;
    }
    // After a refresh the graph holds every readable document and row again.
    engine.refresh_graphs().unwrap();
    for (who, groups) in READERS {
        let scope = engine.scope(who, date()).unwrap();
        let view = engine.graph_view(&scope).unwrap();
        let named = serde_json::to_string(&view.entities()).unwrap();
        for item in readable(&docs, &orders, who, groups) {
            assert!(
                named.contains(&item),
                "seed {seed}: {item} missing from {who}'s view after the refresh"
            );
        }
    }
    assert!(
        refreshed > 0 || engine.graph_builds().beside_requests > 0,
        "seed {seed}: nothing refreshed"
    );
}

#[test]
fn stale_graphs_never_show_what_a_reader_lost_and_requests_never_rebuild() {
    for seed in 0..4 {
        run(seed);
    }
}

#[test]
fn without_a_refresher_requests_build_the_current_graph() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(
        src.join("principals.yaml"),
        "principals:\n  - {id: pc, tenant: t, groups: []}\n",
    )
    .unwrap();
    let d = Doc {
        acl: None,
        product: 1,
        supplier: 1,
    };
    write_doc(&src, 0, &d, 0);
    let engine = Engine::with_embedder(
        dossier_engine::dossier_store::testing::location(&dir.path().join("store")),
        "hash:32",
        Box::new(dossier_embed::HashEmbedder::new(32)),
    )
    .unwrap();
    engine.ingest(std::slice::from_ref(&src), &mut ()).unwrap();
    let scope = engine.scope("pc", date()).unwrap();
    assert!(
        serde_json::to_string(&engine.graph_view(&scope).unwrap().entities())
            .unwrap()
            .contains("d000")
    );
    write_doc(
        &src,
        1,
        &Doc {
            acl: None,
            product: 2,
            supplier: 3,
        },
        0,
    );
    engine.ingest(&[src], &mut ()).unwrap();
    let named = serde_json::to_string(&engine.graph_view(&scope).unwrap().entities()).unwrap();
    assert!(
        named.contains("d001"),
        "the next request sees the new document: {named}"
    );
    assert_eq!(engine.graph_builds().in_requests, 2);
}
