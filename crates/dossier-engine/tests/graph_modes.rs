//! Graph retrieval modes and graph inspection on ../shared/scenarios with the real e5
//! model: DEPENDS_ON expansion, supplier events by principal, aliases, tenants, and
//! deletes that leave no edge behind.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::OnceLock;

use chrono::NaiveDate;
use dossier_engine::{Engine, Error, Mode, SearchRequest, SearchResponse, SubgraphJson};

fn shared() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/scenarios")
}

fn open_ingested() -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(
        dossier_engine::dossier_store::testing::location(dir.path()),
        "e5",
    )
    .expect("e5 model (run scripts/setup-models)");
    let report = engine
        .ingest(&[shared().join("shop"), shared().join("acme")], &mut ())
        .unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    (dir, engine)
}

fn engine() -> &'static Engine {
    static ENGINE: OnceLock<(tempfile::TempDir, Engine)> = OnceLock::new();
    &ENGINE.get_or_init(open_ingested).1
}

const NOW: &str = "2026-11-30";
const E1: &str = "哪些产品受到供应商事件 E-1 影响？";

fn date(s: &str) -> NaiveDate {
    s.parse().unwrap()
}

fn search_in(engine: &Engine, who: &str, q: &str, mode: Mode) -> SearchResponse {
    search_k(engine, who, q, mode, 5)
}

fn search_k(engine: &Engine, who: &str, q: &str, mode: Mode, k: usize) -> SearchResponse {
    engine
        .search(&SearchRequest {
            principal: who.into(),
            query: q.into(),
            mode,
            k,
            now: date(NOW),
            as_of: None,
            kbs: vec![],
        })
        .unwrap()
}

fn search(who: &str, q: &str, mode: Mode) -> SearchResponse {
    search_in(engine(), who, q, mode)
}

fn has_edge(s: &SubgraphJson, from: &str, relation: &str, to: &str) -> bool {
    s.edges
        .iter()
        .any(|e| e.from == from && e.relation == relation && e.to == to)
}

fn scope(engine: &Engine, who: &str) -> dossier_engine::Scope {
    engine.scope(who, date(NOW)).unwrap()
}

#[test]
fn mode_names_parse() {
    for m in Mode::ALL.into_iter().chain(Mode::GRAPH_MODES) {
        assert_eq!(m.name().parse::<Mode>().unwrap(), m);
    }
    assert!(matches!("globe".parse::<Mode>(), Err(Error::Invalid(_))));
}

#[test]
fn depends_on_pulls_in_the_auth_version_in_force() {
    for mode in Mode::GRAPH_MODES {
        // One hit asked for: the dependency comes on top of it, not from the ranking.
        let r = search_k(engine(), "u7", "怎么调用支付 API 创建支付单？", mode, 1);
        let got: Vec<(String, String)> = r
            .hits
            .iter()
            .map(|h| (h.doc_id.clone(), h.version.clone()))
            .collect();
        assert_eq!(got[0].0, "payment-api", "{mode:?}: {got:?}");
        assert!(
            got.iter().any(|(d, v)| d == "api-auth" && v == "2.0"),
            "{mode:?}: {got:?}"
        );
        assert!(
            !got.iter().any(|(d, v)| d == "api-auth" && v == "1.0"),
            "{mode:?}: {got:?}"
        );
        assert!(r.subgraph.is_some());
    }
}

#[test]
fn customers_get_nothing_from_the_supplier_notice() {
    for mode in Mode::GRAPH_MODES {
        let r = search("u7", E1, mode);
        assert!(
            r.hits.iter().all(|h| h.doc_id != "supplier-notice-S-8"),
            "{mode:?}: {:?}",
            r.hits
        );
        let s = r.subgraph.expect("subgraph");
        assert!(
            !has_edge(&s, "S-8", "affected_by", "E-1"),
            "{mode:?}: {s:?}"
        );
        let all = serde_json::to_string(&s).unwrap();
        assert!(
            !all.contains("supplier-notice") && !all.contains("E-1") && !all.contains("八号"),
            "{mode:?}: {all}"
        );
    }
}

#[test]
fn supply_chain_sees_the_sourced_path() {
    for mode in Mode::GRAPH_MODES {
        let r = search("zhang", E1, mode);
        let s = r.subgraph.expect("subgraph");
        let edge = |from: &str, rel: &str, to: &str| {
            s.edges
                .iter()
                .find(|e| e.from == from && e.relation == rel && e.to == to)
                .unwrap_or_else(|| panic!("{mode:?}: no {from} {rel} {to} in {s:?}"))
        };
        assert!(edge("P-204", "supplied_by", "S-8")
            .provenance
            .iter()
            .any(|c| c.starts_with("product-manual-P-204@v1#")));
        assert!(edge("S-8", "affected_by", "E-1")
            .provenance
            .iter()
            .any(|c| c.starts_with("supplier-notice-S-8@v1#")));
        assert!(
            r.hits.iter().any(|h| h.doc_id == "supplier-notice-S-8"),
            "{mode:?}: {:?}",
            r.hits
        );
    }
    let e = engine();
    // Record rows are graph sources too, each readable as its table's schema says.
    let p204 = e.graph_entity(&scope(e, "u7"), "P-204").unwrap();
    assert!(
        p204.edges.iter().any(|x| x.relation == "supplied_by"
            && x.provenance.contains(&"records/products@P-204".to_string())),
        "{p204:?}"
    );
    assert!(e.graph_entity(&scope(e, "u7"), "A123").is_ok());
    assert!(matches!(
        e.graph_entity(&scope(e, "u7"), "A100"),
        Err(Error::NotFound(_))
    ));
    assert!(e.graph_entity(&scope(e, "zhang"), "A100").is_ok());
    let path = e
        .graph_path(&scope(e, "zhang"), "P-204", "E-1", 3)
        .unwrap()
        .expect("path");
    let rels: Vec<&str> = path.iter().map(|x| x.relation.as_str()).collect();
    assert_eq!(rels, ["supplied_by", "affected_by"]);
    // For u7 the event does not exist, which reads like any unknown name.
    let u7 = scope(e, "u7");
    let hidden = e.graph_path(&u7, "P-204", "E-1", 3).unwrap_err();
    let unknown = e.graph_path(&u7, "P-204", "E-999", 3).unwrap_err();
    assert_eq!(
        hidden.to_string().replace("E-1", "X"),
        unknown.to_string().replace("E-999", "X")
    );
}

#[test]
fn aliases_resolve_within_the_tenant() {
    for mode in Mode::GRAPH_MODES {
        let r = search("oncall", "pay-gw 依赖哪些服务？", mode);
        let s = r.subgraph.expect("subgraph");
        assert!(
            has_edge(&s, "payment-gateway", "depends_on", "risk-engine"),
            "{mode:?}: {s:?}"
        );
        let all = serde_json::to_string(&s).unwrap();
        assert!(!all.contains("acme-ledger"), "{mode:?}: {all}");
    }
    let e = engine();
    let n = e.graph_neighbors(&scope(e, "oncall"), "pay-gw", 1).unwrap();
    assert!(has_edge(&n, "payment-gateway", "depends_on", "risk-engine"));
}

#[test]
fn other_tenants_never_show() {
    let e = engine();
    let acme = scope(e, "acme-admin");
    let g = e.graph_export(&acme).unwrap();
    let all = serde_json::to_string(&g).unwrap();
    for shop in [
        "payments-core",
        "risk-engine",
        "P-204",
        "incident-4821",
        "api-auth",
    ] {
        assert!(!all.contains(shop), "{shop}: {all}");
    }
    assert!(has_edge(&g, "payment-gateway", "depends_on", "acme-ledger"));
    for mode in Mode::GRAPH_MODES {
        let r = search("acme-admin", "payment-gateway 由哪个团队负责？", mode);
        assert!(r.hits.iter().all(|h| h.doc_id != "incident-4821"));
        let s = serde_json::to_string(&r.subgraph).unwrap();
        assert!(!s.contains("payments-core"), "{mode:?}: {s}");
    }
    assert!(matches!(
        e.graph_entity(&acme, "pay-gw"),
        Err(Error::NotFound(m)) if m == "no entity pay-gw"
    ));
    let shop = e.graph_entity(&scope(e, "oncall"), "pay-gw").unwrap();
    assert_eq!(shop.name, "payment-gateway");
}

#[test]
fn export_and_graphml_hold_only_visible_provenance() {
    let e = engine();
    let g = e.graph_export(&scope(e, "u7")).unwrap();
    assert!(!g.edges.is_empty());
    for edge in &g.edges {
        assert!(!edge.provenance.is_empty(), "{edge:?}");
        assert!(
            edge.provenance
                .iter()
                .all(|c| !c.starts_with("supplier-notice")
                    && !c.starts_with("incident-4821")
                    && !c.starts_with("risk-alerts")
                    && !c.starts_with("api-auth@1.0")),
            "{edge:?}"
        );
    }
    let xml = g.to_graphml();
    assert!(xml.starts_with("<?xml") && xml.contains("<graphml") && !xml.contains("E-1"));
    // As of a date when 1.0 was in force, its facts are there and 2.0's are not.
    let then = e.scope("u7", date("2025-06-01")).unwrap();
    let old = e.graph_export(&then).unwrap();
    let cites: Vec<&String> = old.edges.iter().flat_map(|x| &x.provenance).collect();
    assert!(
        cites.iter().any(|c| c.starts_with("api-auth@1.0")),
        "{cites:?}"
    );
    assert!(
        !cites.iter().any(|c| c.starts_with("api-auth@2.0")),
        "{cites:?}"
    );
}

#[test]
fn global_mode_answers_from_community_reports_that_trace_back_to_sources() {
    let r = search("oncall", "支付相关的主要稳定性风险有哪些？", Mode::Global);
    let reports = r.reports.expect("global returns the reports it used");
    assert!(!reports.is_empty());
    let oncall = scope(engine(), "oncall");
    let mut cited_chunks = HashSet::new();
    for rep in &reports {
        assert!(!rep.sources.is_empty(), "{rep:?}");
        assert!(!rep.source_documents.is_empty(), "{rep:?}");
        for line in &rep.summary {
            assert!(rep.sources.contains(&line.chunk_id), "{rep:?}");
            cited_chunks.insert(line.chunk_id.clone());
        }
        // Lineage chunks are real chunks the principal may read.
        for d in &rep.source_documents {
            let (doc, _) = d.rsplit_once('@').unwrap();
            assert!(
                engine().graph_entity(&oncall, doc).is_ok(),
                "{d} is not visible to oncall"
            );
        }
    }
    assert!(
        reports.iter().any(|rep| rep
            .source_documents
            .iter()
            .any(|d| d.starts_with("incident-4821@"))),
        "{reports:?}"
    );
    assert!(
        r.hits.iter().any(|h| h.doc_id == "incident-4821"),
        "{:?}",
        r.hits
    );
    // Hits come from what the reports cite (plus DEPENDS_ON expansions).
    assert!(r.hits.iter().any(|h| cited_chunks.contains(&h.chunk_id)));

    // A customer's reports are built only from what the customer may read.
    let u7 = scope(engine(), "u7");
    for rep in engine().community_reports(&u7).unwrap() {
        for d in &rep.source_documents {
            assert!(
                ![
                    "supplier-notice-S-8",
                    "incident-4821",
                    "risk-alerts-2026-11"
                ]
                .iter()
                .any(|x| d.starts_with(&format!("{x}@"))),
                "u7 got a report built from {d}"
            );
        }
        let text: String = rep.summary.iter().map(|l| l.text.as_str()).collect();
        assert!(!text.contains("E-1") && !text.contains("RA-77"), "{rep:?}");
    }
}

#[test]
fn drift_mixes_the_neighbourhood_with_community_context() {
    let r = search("zhang", E1, Mode::Drift);
    assert!(r.reports.as_ref().is_some_and(|v| !v.is_empty()));
    let s = r.subgraph.unwrap();
    assert!(has_edge(&s, "S-8", "affected_by", "E-1"), "{s:?}");
    assert!(r.hits.iter().any(|h| h.doc_id == "supplier-notice-S-8"));
}

#[test]
fn deleting_a_source_removes_every_edge_it_supported() {
    let (_dir, engine) = open_ingested();
    let zhang = scope(&engine, "zhang");
    let from_notice = |g: &SubgraphJson| {
        g.edges
            .iter()
            .filter(|e| {
                e.provenance
                    .iter()
                    .any(|c| c.starts_with("supplier-notice-S-8@"))
            })
            .count()
    };
    assert!(from_notice(&engine.graph_export(&zhang).unwrap()) > 0);
    let notice_text = engine
        .search(&SearchRequest {
            principal: "zhang".into(),
            query: E1.into(),
            mode: Mode::Bm25,
            k: 20,
            now: date(NOW),
            as_of: None,
            kbs: vec![],
        })
        .unwrap()
        .hits
        .into_iter()
        .filter(|h| h.doc_id == "supplier-notice-S-8")
        .map(|h| h.text)
        .collect::<Vec<_>>()
        .join("\n");
    let built_from_notice = |reports: &[dossier_engine::ReportJson]| {
        reports
            .iter()
            .filter(|r| {
                r.source_documents
                    .iter()
                    .any(|d| d.starts_with("supplier-notice-S-8@"))
                    || r.sources
                        .iter()
                        .any(|c| c.starts_with("supplier-notice-S-8@"))
                    || r.summary
                        .iter()
                        .any(|l| notice_text.contains(l.text.as_str()))
            })
            .count()
    };
    assert!(built_from_notice(&engine.community_reports(&zhang).unwrap()) > 0);
    engine.delete("supplier-notice-S-8", None).unwrap();
    // Every report built from the notice is gone; none keeps its text.
    assert_eq!(
        built_from_notice(&engine.community_reports(&zhang).unwrap()),
        0
    );
    let after = engine.graph_export(&zhang).unwrap();
    assert_eq!(from_notice(&after), 0, "{after:?}");
    assert!(!has_edge(&after, "S-8", "affected_by", "E-1"));
    assert!(matches!(
        engine.graph_entity(&zhang, "E-1"),
        Err(Error::NotFound(_))
    ));
    for mode in Mode::GRAPH_MODES {
        let r = search_in(&engine, "zhang", E1, mode);
        assert!(r.hits.iter().all(|h| h.doc_id != "supplier-notice-S-8"));
        let s = r.subgraph.unwrap();
        assert_eq!(from_notice(&s), 0, "{mode:?}: {s:?}");
        assert_eq!(
            built_from_notice(r.reports.as_deref().unwrap_or(&[])),
            0,
            "{mode:?}"
        );
    }
    // The graph follows the catalog the other way too: ingesting the notice again
    // brings its edges back (the cached graph is rebuilt on the new generation).
    let report = engine
        .ingest(
            &[shared().join("shop/docs/supplier-notice-S-8.md")],
            &mut (),
        )
        .unwrap();
    assert_eq!(report.documents_added, 1, "{report:?}");
    let again = engine.graph_export(&zhang).unwrap();
    assert!(has_edge(&again, "S-8", "affected_by", "E-1"), "{again:?}");
    // A document the graph has never seen shows up after its commit.
    let extra = tempfile::tempdir().unwrap();
    let notice = extra.path().join("s9.md");
    std::fs::write(
        &notice,
        "---\nid: supplier-notice-S-9\nversion: v1\ntitle: 供应商专项通知：S-9\ntenant: shop\n\
         effective_from: 2026-07-01\nacl: [supply-chain]\n---\n# 供应商专项通知：S-9\n\n\
         供应商 S-9 受到电池鼓包事件 E-2 影响。\n",
    )
    .unwrap();
    engine.ingest(&[notice], &mut ()).unwrap();
    let fresh = engine.graph_export(&zhang).unwrap();
    assert!(has_edge(&fresh, "S-9", "affected_by", "E-2"), "{fresh:?}");
    assert!(!has_edge(
        &engine.graph_export(&scope(&engine, "u7")).unwrap(),
        "S-9",
        "affected_by",
        "E-2"
    ));
}

mod property {
    use std::collections::{HashMap, HashSet};
    use std::fmt::Write as _;

    use dossier_core::validity::plan_validity;
    use dossier_core::{DocKind, DocumentVersion, VersionRef};
    use dossier_engine::{Engine, Mode, SearchRequest};
    use proptest::prelude::*;

    use super::date as parse_date;

    const WORDS: [&str; 4] = ["apple", "river", "退货", "网关"];
    const GROUPS: [&str; 3] = ["red", "blue", "green"];

    #[derive(Debug, Clone)]
    struct Doc {
        tenant: usize,
        id: usize,
        acl: Option<usize>,
        day: u32,
        supersedes_prev: bool,
        depends_on: Option<usize>,
        words: Vec<usize>,
    }

    fn doc_strategy() -> impl Strategy<Value = Doc> {
        (
            0..2usize,
            0..4usize,
            proptest::option::weighted(0.3, 0..3usize),
            1..28u32,
            any::<bool>(),
            proptest::option::weighted(0.8, 0..4usize),
            proptest::collection::vec(0..4usize, 1..3),
        )
            .prop_map(
                |(tenant, id, acl, day, supersedes_prev, depends_on, words)| Doc {
                    tenant,
                    id,
                    acl,
                    day,
                    supersedes_prev,
                    depends_on,
                    words,
                },
            )
    }

    fn date(day: u32) -> chrono::NaiveDate {
        parse_date(&format!("2026-03-{day:02}"))
    }

    /// `(doc, version)` of a citation: `DOC@VERSION` or `DOC@VERSION#N`.
    fn cited(c: &str) -> (String, String) {
        let (d, v) = c.rsplit_once('@').expect("DOC@VERSION");
        let v = v.split('#').next().unwrap();
        (d.to_string(), v.to_string())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
        /// Whatever the tenants, ACLs, versions and dependencies: no hit and no subgraph
        /// edge of a graph mode comes from outside the scope, and a hit's readable
        /// dependency is pulled in.
        #[test]
        fn graph_modes_stay_in_scope(docs in proptest::collection::vec(doc_strategy(), 1..12),
                                     who in 0..6usize, day in 1..30u32, word in 0..4usize,
                                     named in 0..4usize) {
            let dir = tempfile::tempdir().unwrap();
            let src = dir.path().join("src");
            std::fs::create_dir_all(&src).unwrap();
            let mut next_version: HashMap<(usize, usize), usize> = HashMap::new();
            let mut metas = Vec::new();
            for (n, d) in docs.iter().enumerate() {
                let v = next_version.entry((d.tenant, d.id)).or_insert(0);
                *v += 1;
                let mut fm = format!("---\nid: doc{}\nversion: v{}\ntitle: doc {} {}\ntenant: t{}\neffective_from: {}\n", d.id, v, d.id, n, d.tenant, date(d.day));
                let sup = (d.supersedes_prev && *v > 1).then(|| format!("doc{}@v{}", d.id, *v - 1));
                if let Some(s) = &sup { writeln!(fm, "supersedes: {s}").unwrap(); }
                if let Some(g) = d.acl { writeln!(fm, "acl: [{}]", GROUPS[g]).unwrap(); }
                let deps: Vec<String> = d.depends_on.filter(|&x| x != d.id).map(|x| format!("doc{x}")).into_iter().collect();
                if !deps.is_empty() { writeln!(fm, "depends_on: [{}]", deps.join(", ")).unwrap(); }
                let body: Vec<&str> = d.words.iter().map(|&w| WORDS[w]).collect();
                std::fs::write(src.join(format!("f{n}.md")), format!("{fm}---\n# Doc\n{} doc{}\n", body.join(" "), (d.id + 1) % 4)).unwrap();
                metas.push(DocumentVersion {
                    doc_id: format!("doc{}", d.id), version: format!("v{v}"), title: String::new(), tenant: format!("t{}", d.tenant),
                    kb: None, acl: d.acl.map(|g| vec![GROUPS[g].to_string()]), effective_from: Some(date(d.day)), effective_to: None,
                    supersedes: sup.as_deref().and_then(VersionRef::parse), supersedes_evidence: None, depends_on: deps,
                    source_uri: String::new(), kind: DocKind::Markdown, digest: String::new(),
                });
            }
            let principals = "principals:\n  - {id: p0, tenant: t0, groups: []}\n  - {id: p1, tenant: t0, groups: [red]}\n  - {id: p2, tenant: t0, groups: [blue, green]}\n  - {id: p3, tenant: t1, groups: []}\n  - {id: p4, tenant: t1, groups: [red, blue]}\n  - {id: p5, tenant: t1, groups: [green]}\n";
            std::fs::write(src.join("principals.yaml"), principals).unwrap();
            let engine = Engine::with_embedder(dossier_engine::dossier_store::testing::location(&dir.path().join("store")), "hash:32", Box::new(dossier_embed::HashEmbedder::new(32))).unwrap();
            let report = engine.ingest(&[src], &mut ()).unwrap();
            prop_assert!(report.problems.is_empty(), "{:?}", report.problems);

            let groups: [&[&str]; 6] = [&[], &["red"], &["blue", "green"], &[], &["red", "blue"], &["green"]];
            let (tenant, my_groups) = (format!("t{}", who / 3), groups[who]);
            let at = date(day);
            let plan = plan_validity(&metas.iter().filter(|m| m.tenant == tenant).cloned().collect::<Vec<_>>());
            let allowed: HashSet<(String, String)> = metas.iter()
                .filter(|m| m.tenant == tenant)
                .filter(|m| m.acl.as_ref().is_none_or(|a| a.iter().any(|g| my_groups.contains(&g.as_str()))))
                .filter(|m| plan[&m.key()].in_force(at))
                .map(|m| (m.doc_id.clone(), m.version.clone()))
                .collect();
            let query = format!("{} doc{named}", WORDS[word]);
            for mode in Mode::GRAPH_MODES {
                let r = engine.search(&SearchRequest { principal: format!("p{who}"), query: query.clone(), mode, k: 1, now: at, as_of: None, kbs: vec![] }).unwrap();
                let hits: HashSet<(String, String)> = r.hits.iter().map(|h| (h.doc_id.clone(), h.version.clone())).collect();
                for h in &hits {
                    prop_assert!(allowed.contains(h), "{:?} leaked {:?}", mode, h);
                }
                let s = r.subgraph.expect("graph modes return a subgraph");
                for e in &s.edges {
                    prop_assert!(!e.provenance.is_empty());
                    for c in &e.provenance {
                        prop_assert!(allowed.contains(&cited(c)), "{:?} edge {:?} cites {}", mode, e, c);
                    }
                }
                for rep in r.reports.iter().flatten() {
                    for c in &rep.sources {
                        prop_assert!(allowed.contains(&cited(c)), "{:?} report {} built from {}", mode, rep.community_id, c);
                    }
                }
                // A hit's dependency with a version in force for the scope is there too.
                let hit_docs: HashSet<&str> = hits.iter().map(|(d, _)| d.as_str()).collect();
                for m in metas.iter().filter(|m| m.tenant == tenant && hits.contains(&(m.doc_id.clone(), m.version.clone()))) {
                    for dep in &m.depends_on {
                        if allowed.iter().any(|(d, _)| d == dep) {
                            prop_assert!(hit_docs.contains(dep.as_str()), "{:?}: {}@{} depends on {}: {:?}", mode, m.doc_id, m.version, dep, hits);
                        }
                    }
                }
            }
            // Every community report the principal gets is built from sources it may read,
            // and every sentence of it comes from its lineage.
            let scope = engine.scope(&format!("p{who}"), at).unwrap();
            for rep in engine.community_reports(&scope).unwrap() {
                for c in &rep.sources {
                    prop_assert!(allowed.contains(&cited(c)), "report {} built from {}", rep.community_id, c);
                }
                for line in &rep.summary {
                    prop_assert!(rep.sources.contains(&line.chunk_id), "{:?}", rep);
                }
            }
        }
    }
}
