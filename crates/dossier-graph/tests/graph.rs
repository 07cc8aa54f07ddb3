//! The graph on the shared scenario corpus (`../shared/scenarios`): what each principal
//! sees, resolution, paths, communities and reports, and property tests of visibility.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::OnceLock;

use dossier_core::{Chunk, DocumentVersion, Principal, RecordRow, RecordSchema};
use dossier_graph::{
    declared_records, declared_versions, extract, CommunityOptions, EntityId, GraphView,
    Provenance, Source, TenantGraph, TitleTable,
};
use dossier_ingest::{parse_paths, IngestOptions, Item};
use proptest::prelude::*;

/// The scenario corpus, parsed once.
struct Corpus {
    versions: Vec<DocumentVersion>,
    chunks: Vec<Chunk>,
    tables: Vec<(RecordSchema, Vec<RecordRow>)>,
    principals: Vec<Principal>,
}

fn corpus() -> &'static Corpus {
    static C: OnceLock<Corpus> = OnceLock::new();
    C.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/scenarios");
        let parsed = parse_paths(
            &[root.join("shop"), root.join("acme")],
            &IngestOptions::default(),
        );
        assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
        let mut c = Corpus {
            versions: vec![],
            chunks: vec![],
            tables: vec![],
            principals: vec![],
        };
        for item in parsed.items {
            match item {
                Item::Document(d) => {
                    c.versions.push(d.meta);
                    c.chunks.extend(d.chunks);
                }
                Item::Records(t) => c.tables.push((t.schema, t.rows)),
                Item::Principals { principals, .. } => c.principals.extend(principals),
            }
        }
        c
    })
}

fn build(tenant: &str) -> TenantGraph {
    let c = corpus();
    let versions: Vec<DocumentVersion> = c
        .versions
        .iter()
        .filter(|v| v.tenant == tenant)
        .cloned()
        .collect();
    let chunks: Vec<Chunk> = c
        .chunks
        .iter()
        .filter(|ch| ch.tenant == tenant)
        .cloned()
        .collect();
    let titles = TitleTable::new(&versions);
    let mut g = TenantGraph::new(tenant);
    g.add(declared_versions(&versions)).unwrap();
    g.add(extract(&chunks, &titles)).unwrap();
    for (schema, rows) in c.tables.iter().filter(|(s, _)| s.tenant == tenant) {
        g.add(declared_records(schema, rows)).unwrap();
    }
    g
}

fn graph(tenant: &str) -> &'static TenantGraph {
    static G: OnceLock<BTreeMap<String, TenantGraph>> = OnceLock::new();
    &G.get_or_init(|| {
        ["shop", "acme"]
            .into_iter()
            .map(|t| (t.to_string(), build(t)))
            .collect()
    })[tenant]
}

/// What a principal may read: documents by tenant and ACL, rows by the table's schema.
fn may_read(principal: &str) -> impl Fn(&Provenance) -> bool {
    let c = corpus();
    let p = c
        .principals
        .iter()
        .find(|p| p.id == principal)
        .expect("known principal")
        .clone();
    move |prov: &Provenance| {
        if prov.tenant != p.tenant {
            return false;
        }
        match prov.record_table() {
            Some(table) => c.tables.iter().any(|(s, rows)| {
                s.table == table
                    && s.tenant == p.tenant
                    && rows
                        .iter()
                        .any(|r| r.key == prov.version && s.row_readable_by(r, &p.id, &p.groups))
            }),
            None => c.versions.iter().any(|v| {
                v.doc_id == prov.doc_id
                    && v.version == prov.version
                    && v.tenant == p.tenant
                    && v.readable_by(&p.groups)
            }),
        }
    }
}

fn view(principal: &str) -> GraphView {
    let tenant = corpus()
        .principals
        .iter()
        .find(|p| p.id == principal)
        .unwrap()
        .tenant
        .clone();
    graph(&tenant).view(&may_read(principal))
}

fn id(v: &GraphView, name: &str) -> EntityId {
    v.resolve(name)
        .unwrap_or_else(|| panic!("{name} does not resolve"))
}

/// `relation` targets of `name` in the view, by display name.
fn targets(v: &GraphView, name: &str, relation: &str) -> BTreeSet<String> {
    let from = id(v, name);
    v.edges()
        .iter()
        .filter(|e| e.from == from && e.relation == relation)
        .map(|e| v.entity(&e.to).unwrap().name.clone())
        .collect()
}

fn chunk_text(id: &str) -> Option<String> {
    corpus()
        .chunks
        .iter()
        .find(|c| c.chunk_id == id)
        .map(|c| c.text.clone())
}

fn cites(e: &dossier_graph::Edge) -> Vec<String> {
    e.provenance.iter().map(Provenance::cite).collect()
}

fn edge<'a>(
    v: &'a GraphView,
    from: &str,
    relation: &str,
    to: &str,
) -> Option<&'a dossier_graph::Edge> {
    let (f, t) = (v.resolve(from)?, v.resolve(to)?);
    v.edges()
        .iter()
        .find(|e| e.from == f && e.to == t && e.relation == relation)
}

#[test]
fn supplier_event_path_is_sourced_for_supply_chain() {
    let v = view("zhang");
    let supplied = edge(&v, "P-204", "supplied_by", "S-8").expect("P-204 supplied_by S-8");
    assert!(cites(supplied)
        .iter()
        .any(|c| c.starts_with("product-manual-P-204@v1#")));
    assert!(supplied
        .provenance
        .iter()
        .any(|p| p.source == Source::Declared && p.doc_id == "records/products"));
    let affected = edge(&v, "S-8", "affected_by", "E-1").expect("S-8 affected_by E-1");
    assert!(cites(affected)
        .iter()
        .all(|c| c.starts_with("supplier-notice-S-8@v1#")));
    let (a, b) = affected.provenance[0].span.unwrap();
    assert!(
        chunk_text(affected.provenance[0].chunk_id.as_deref().unwrap()).unwrap()[a..b]
            .contains("受到")
    );

    let path = v
        .path(&id(&v, "P-204"), &id(&v, "E-1"), 3)
        .expect("a path P-204 → E-1");
    let rels: Vec<&str> = path.iter().map(|e| e.relation.as_str()).collect();
    assert_eq!(rels, ["supplied_by", "affected_by"]);
    assert!(path.iter().all(|e| !e.provenance.is_empty()));
    // P-205 is supplied by another supplier: no two-hop link to E-1.
    assert!(v.path(&id(&v, "P-205"), &id(&v, "E-1"), 2).is_none());
    assert_eq!(v.resolve("供应商八号"), Some(id(&v, "S-8")));
    assert_eq!(v.resolve("深圳八号电池有限公司"), Some(id(&v, "S-8")));
}

#[test]
fn customers_see_nothing_derived_from_the_supplier_notice() {
    let v = view("u7");
    // P-204 supplied_by S-8 is in the product manual and the products table, both readable.
    assert!(edge(&v, "P-204", "supplied_by", "S-8").is_some());
    assert!(v.resolve("供应商八号").is_none());
    assert!(v.resolve("深圳八号电池有限公司").is_none());
    assert!(v.resolve("E-1").is_none());
    assert!(v.path(&id(&v, "P-204"), &id(&v, "S-8"), 3).is_some());
    for e in v.edges() {
        assert!(
            e.provenance
                .iter()
                .all(|p| p.doc_id != "supplier-notice-S-8"),
            "{e:?}"
        );
    }
    for e in v.entities() {
        let all = format!("{} {:?} {:?}", e.name, e.aliases, e.sources);
        assert!(
            !all.contains("supplier-notice") && !all.contains("鼓包") && !all.contains("八号"),
            "{all}"
        );
    }
    let s8 = v.entity(&id(&v, "S-8")).unwrap();
    assert!(s8.aliases.is_empty());
}

#[test]
fn aliases_resolve_within_the_tenant() {
    let v = view("oncall");
    let pg = id(&v, "payment-gateway");
    for name in ["pay-gw", "PGW", "支付网关", "ＰＡＹ－ＧＷ"] {
        assert_eq!(v.resolve(name), Some(pg.clone()), "{name}");
    }
    let deps = v.neighbors(&pg, 1, Some(&["depends_on"]));
    let names: BTreeSet<&str> = deps.nodes.iter().map(|n| n.name.as_str()).collect();
    assert!(
        names.contains("risk-engine") && !names.contains("acme-ledger"),
        "{names:?}"
    );
    assert!(deps
        .edges
        .iter()
        .all(|e| e.relation == "depends_on" && !e.provenance.is_empty()));
    assert!(deps.edges.iter().any(|e| e
        .provenance
        .iter()
        .any(|c| c.starts_with("incident-4821@v1#"))));
    assert_eq!(
        targets(&v, "pay-gw", "owned_by"),
        BTreeSet::from(["payments-core".to_string()])
    );

    // The merge is explained, and reversing it splits the names again.
    let mut g = graph("shop").clone();
    let m = g
        .resolver()
        .merge_log()
        .iter()
        .find(|m| m.alias == "pay-gw" && m.canonical == "payment-gateway")
        .expect("pay-gw merge")
        .clone();
    assert!(m.reason.contains("又称"));
    assert!(m
        .provenance
        .as_ref()
        .unwrap()
        .chunk_id
        .as_deref()
        .unwrap()
        .starts_with("incident-4821@v1#"));
    assert!(v.merges().iter().any(|x| x.id == m.id));
    g.resolver_mut().unmerge(m.id).unwrap();
    let v2 = g.view(&may_read("oncall"));
    assert_ne!(v2.resolve("pay-gw"), v2.resolve("payment-gateway"));
    assert_eq!(v2.resolve("PGW"), v2.resolve("payment-gateway"));
}

#[test]
fn same_name_in_two_tenants_is_two_entities() {
    let acme = view("acme-admin");
    let shop = view("oncall");
    let (a, s) = (id(&acme, "payment-gateway"), id(&shop, "payment-gateway"));
    assert_ne!(a, s);
    assert!(acme.entity(&s).is_none() && shop.entity(&a).is_none());
    assert_eq!(
        targets(&acme, "payment-gateway", "depends_on"),
        BTreeSet::from(["acme-ledger".to_string()])
    );
    assert_eq!(
        targets(&acme, "payment-gateway", "owned_by"),
        BTreeSet::from(["acme-infra".to_string()])
    );
    assert!(acme.resolve("pay-gw").is_none() && acme.resolve("payments-core").is_none());
    assert!(shop.resolve("acme-ledger").is_none());
    // A shop fact is refused by acme's graph.
    let mut g = graph("acme").clone();
    let shop_versions: Vec<DocumentVersion> = corpus()
        .versions
        .iter()
        .filter(|v| v.tenant == "shop")
        .cloned()
        .collect();
    assert!(g.add(declared_versions(&shop_versions)).is_err());
    // A principal of acme reads nothing of shop, whatever its groups.
    assert!(graph("shop")
        .view(&may_read("acme-admin"))
        .entities()
        .is_empty());
}

#[test]
fn incident_impact_and_risk_alerts_follow_the_acl() {
    let customers = BTreeSet::from(["C-1001", "C-1002", "C-1003"].map(String::from));
    for p in ["oncall", "zhang"] {
        let v = view(p);
        assert_eq!(targets(&v, "INC-4821", "affects"), customers, "{p}");
        assert_eq!(
            targets(&v, "INC-4821", "resolved_by"),
            BTreeSet::from(["CHG-1093".to_string()])
        );
    }
    let oncall = view("oncall");
    let hit = edge(&oncall, "C-1002", "hit", "RA-77").expect("C-1002 hit RA-77");
    assert!(cites(hit)
        .iter()
        .all(|c| c.starts_with("risk-alerts-2026-11@v1#")));
    assert!(edge(&oncall, "C-1004", "hit", "RA-77").is_none());
    let zhang = view("zhang");
    assert!(zhang.resolve("RA-77").is_none());
    let c1002 = id(&zhang, "C-1002");
    assert!(zhang
        .neighbors(&c1002, 2, None)
        .nodes
        .iter()
        .all(|n| n.name != "RA-77"));
    // u7 may read neither the postmortem nor the customers table.
    assert!(view("u7").resolve("INC-4821").is_none() && view("u7").resolve("C-1001").is_none());
}

#[test]
fn version_graph_and_document_links() {
    let v = view("u7");
    let sup = edge(&v, "api-auth@2.0", "supersedes", "api-auth@1.0").expect("supersedes");
    assert!(sup.evidence.iter().any(|e| e.contains("REL-2026-04")));
    assert!(edge(&v, "api-auth@2.0", "version_of", "api-auth").is_some());
    // The draft is a look-alike, never a declared successor.
    let draft = id(&v, "api-auth-mtls-draft");
    assert!(v
        .edges()
        .iter()
        .filter(|e| e.relation == "supersedes")
        .all(|e| e.from != draft && e.to != draft));
    assert!(v
        .edges()
        .iter()
        .filter(|e| e.relation == "version_of")
        .all(|e| e.to != draft || e.from.key.contains("api-auth-mtls-draft@")));
    assert!(edge(&v, "payment-api", "depends_on", "api-auth").is_some());
    let m = edge(&v, "payment-api", "mentions_document", "api-auth")
        .expect("《开放平台 API 认证说明》");
    assert!(cites(m).iter().all(|c| c.starts_with("payment-api@2.0#")));
    assert_eq!(v.resolve("耳机售后政策"), Some(id(&v, "headphone-policy")));
    assert!(edge(&v, "P-204", "governed_by", "headphone-policy").is_some());
    assert!(edge(&v, "A123", "contains_product", "P-204").is_some());
    // Rows u7 does not own are not there.
    assert!(v.resolve("A100").is_none());
    // A hidden document is not there either, not even as a link target.
    assert!(
        v.resolve("supplier-notice-S-8").is_none() && v.resolve("risk-alerts-2026-11").is_none()
    );
}

#[test]
fn graph_propagation_reaches_the_passages_of_a_multi_hop_answer() {
    let v = view("zhang");
    let e1 = id(&v, "E-1");
    let scores = v.chunk_scores(&[(e1.clone(), 1.0)], &[], 0.85, 40);
    let rank = |prefix: &str| scores.iter().position(|(c, _)| c.starts_with(prefix));
    let (notice, p204, p205) = (
        rank("supplier-notice-S-8@"),
        rank("product-manual-P-204@"),
        rank("product-manual-P-205@"),
    );
    assert_eq!(notice, Some(0), "{scores:?}");
    assert!(
        p204.is_some() && (p205.is_none() || p204 < p205),
        "{scores:?}"
    );
    let ranked = v.personalized_pagerank(&[(e1, 1.0)], 0.85, 40);
    let pos = |n: &str| {
        ranked
            .iter()
            .position(|(i, _)| Some(i) == v.resolve(n).as_ref())
    };
    assert!(pos("P-204") < pos("P-205").or(Some(usize::MAX)));
    // For u7 the seed does not exist, so nothing flows.
    let u7 = view("u7");
    assert!(u7.resolve("E-1").is_none());
    assert!(u7.chunk_scores(&[], &[], 0.85, 40).is_empty());
}

#[test]
fn deleting_a_source_leaves_nothing_derived_from_it() {
    let mut g = graph("shop").clone();
    assert!(g.remove_document("supplier-notice-S-8") > 0);
    assert!(g.sources().iter().all(|(d, _)| d != "supplier-notice-S-8"));
    assert!(g
        .resolver()
        .merge_log()
        .iter()
        .all(|m| m.alias != "供应商八号"));
    let v = g.view(&may_read("zhang"));
    assert!(v.resolve("E-1").is_none() && v.resolve("供应商八号").is_none());
    for c in v.communities(&CommunityOptions::default()) {
        assert!(c
            .chunk_ids
            .iter()
            .all(|c| !c.starts_with("supplier-notice-S-8@")));
    }
}

#[test]
fn communities_are_deterministic_and_reports_are_built_from_readable_chunks() {
    for p in ["u7", "zhang", "oncall", "acme-admin"] {
        let v = view(p);
        let opts = CommunityOptions::default();
        let cs = v.communities(&opts);
        assert_eq!(cs, view(p).communities(&opts), "{p}");
        assert!(!cs.is_empty(), "{p}");
        assert!(cs.iter().any(|c| c.level == 0));
        let readable = readable_chunks(p);
        for c in &cs {
            let r = v.report(c, &chunk_text, 5);
            assert!(r.sources.iter().all(|s| readable.contains(s)), "{p}: {r:?}");
            for line in &r.summary {
                assert!(r.sources.contains(&line.chunk_id));
                assert!(chunk_text(&line.chunk_id).unwrap().contains(&line.text));
            }
            assert!(!r.title.is_empty());
            if p == "u7" {
                let all = format!("{r:?}");
                assert!(
                    !all.contains("鼓包")
                        && !all.contains("深圳八号")
                        && !all.contains("supplier-notice"),
                    "{all}"
                );
            }
        }
    }
    // The supply chain community of zhang tells the E-1 story from its sources.
    let v = view("zhang");
    let e1 = id(&v, "E-1");
    let c = v
        .communities(&CommunityOptions::default())
        .into_iter()
        .find(|c| c.level == 0 && c.entities.contains(&e1))
        .unwrap();
    let r = v.report(&c, &chunk_text, 5);
    assert!(r.summary.iter().any(|l| l.text.contains("E-1")), "{r:?}");
}

fn readable_chunks(principal: &str) -> BTreeSet<String> {
    let read = may_read(principal);
    corpus()
        .chunks
        .iter()
        .filter(|c| {
            read(&Provenance {
                tenant: c.tenant.clone(),
                doc_id: c.doc_id.clone(),
                version: c.version.clone(),
                chunk_id: Some(c.chunk_id.clone()),
                span: None,
                source: Source::Extracted,
            })
        })
        .map(|c| c.chunk_id.clone())
        .collect()
}

/// Random visibility: a subset of documents and of record rows is readable.
fn arbitrary_reader() -> impl Strategy<Value = (BTreeSet<String>, BTreeSet<String>)> {
    let c = corpus();
    let docs: Vec<String> = c
        .versions
        .iter()
        .filter(|v| v.tenant == "shop")
        .map(|v| format!("{}@{}", v.doc_id, v.version))
        .collect();
    let rows: Vec<String> = c
        .tables
        .iter()
        .flat_map(|(s, rows)| {
            rows.iter()
                .map(move |r| format!("records/{}@{}", s.table, r.key))
        })
        .collect();
    (
        proptest::sample::subsequence(docs.clone(), 0..=docs.len()),
        proptest::sample::subsequence(rows.clone(), 0..=rows.len()),
    )
        .prop_map(|(d, r)| (d.into_iter().collect(), r.into_iter().collect()))
}

/// Everything a reader with these documents and rows may see, normalised.
fn readable_material(docs: &BTreeSet<String>, rows: &BTreeSet<String>) -> String {
    let c = corpus();
    let mut m = String::new();
    for v in c
        .versions
        .iter()
        .filter(|v| docs.contains(&format!("{}@{}", v.doc_id, v.version)))
    {
        m += &format!("{}|{}@{}|{}|", v.doc_id, v.doc_id, v.version, v.title);
    }
    for ch in c
        .chunks
        .iter()
        .filter(|ch| docs.contains(&format!("{}@{}", ch.doc_id, ch.version)))
    {
        m += &format!("{}|{}|{}|", ch.text, ch.title, ch.section.join("|"));
    }
    for (s, rs) in &c.tables {
        for r in rs
            .iter()
            .filter(|r| rows.contains(&format!("records/{}@{}", s.table, r.key)))
        {
            m += &format!("{}|{}|", r.key, serde_json::Value::Object(r.fields.clone()));
        }
    }
    dossier_core::text::normalize(&m)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn nothing_reaches_a_reader_without_readable_provenance((docs, rows) in arbitrary_reader()) {
        let read = |p: &Provenance| {
            p.tenant == "shop" && (docs.contains(&format!("{}@{}", p.doc_id, p.version)) || rows.contains(&format!("{}@{}", p.doc_id, p.version)))
        };
        let v = graph("shop").view(&read);
        let readable_cites: BTreeSet<String> = corpus()
            .chunks
            .iter()
            .filter(|c| docs.contains(&format!("{}@{}", c.doc_id, c.version)))
            .map(|c| c.chunk_id.clone())
            .chain(docs.iter().cloned())
            .chain(rows.iter().cloned())
            .collect();
        for e in v.edges() {
            prop_assert!(!e.provenance.is_empty());
            prop_assert!(e.provenance.iter().all(read), "{:?}", e);
            prop_assert!(v.entity(&e.from).is_some() && v.entity(&e.to).is_some());
        }
        let material = readable_material(&docs, &rows);
        for e in v.entities() {
            prop_assert!(!e.sources.is_empty(), "{:?}", e);
            prop_assert!(e.sources.iter().all(|s| readable_cites.contains(s)), "{:?}", e);
            for name in std::iter::once(&e.name).chain(&e.aliases) {
                prop_assert!(material.contains(&dossier_core::text::normalize(name)), "{} of {:?}", name, e);
            }
        }
        for c in v.communities(&CommunityOptions::default()) {
            let r = v.report(&c, &chunk_text, 5);
            prop_assert!(r.sources.iter().all(|s| readable_cites.contains(s)));
            prop_assert!(r.summary.iter().all(|l| readable_cites.contains(&l.chunk_id)));
        }
    }
}
