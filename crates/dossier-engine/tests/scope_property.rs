//! Property: whatever the tenants, ACLs and version histories, no hit in any mode
//! falls outside the principal's tenant, groups, or the versions in force; and BM25
//! loses no admitted match to the top-k cut.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use chrono::NaiveDate;
use dossier_core::validity::plan_validity;
use dossier_core::{DocKind, DocumentVersion, VersionRef};
use dossier_engine::{Engine, Mode, SearchRequest};
use proptest::prelude::*;

const WORDS: [&str; 6] = ["apple", "river", "stone", "cloud", "退货", "网关"];
const GROUPS: [&str; 3] = ["red", "blue", "green"];

#[derive(Debug, Clone)]
struct Doc {
    tenant: usize,
    id: usize,
    acl: Option<usize>,
    day: u32,
    supersedes_prev: bool,
    words: Vec<usize>,
}

fn doc_strategy() -> impl Strategy<Value = Doc> {
    (
        0..2usize,
        0..4usize,
        proptest::option::of(0..3usize),
        1..28u32,
        any::<bool>(),
        proptest::collection::vec(0..6usize, 1..4),
    )
        .prop_map(|(tenant, id, acl, day, supersedes_prev, words)| Doc {
            tenant,
            id,
            acl,
            day,
            supersedes_prev,
            words,
        })
}

fn date(day: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 3, day).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn no_hit_outside_scope(docs in proptest::collection::vec(doc_strategy(), 1..14),
                            who in 0..6usize, day in 1..30u32, word in 0..6usize) {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir_all(&src).unwrap();
        // Versions of one (tenant, id) are numbered in order; a version may supersede the one before.
        let mut next_version: HashMap<(usize, usize), usize> = HashMap::new();
        let mut metas = Vec::new();
        for (n, d) in docs.iter().enumerate() {
            let v = next_version.entry((d.tenant, d.id)).or_insert(0);
            *v += 1;
            let mut fm = format!("---\nid: doc{}\nversion: v{}\ntitle: doc {} {}\ntenant: t{}\neffective_from: {}\n", d.id, v, d.id, n, d.tenant, date(d.day));
            let sup = (d.supersedes_prev && *v > 1).then(|| format!("doc{}@v{}", d.id, *v - 1));
            if let Some(s) = &sup { writeln!(fm, "supersedes: {s}").unwrap(); }
            if let Some(g) = d.acl { writeln!(fm, "acl: [{}]", GROUPS[g]).unwrap(); }
            let body: Vec<&str> = d.words.iter().map(|&w| WORDS[w]).collect();
            std::fs::write(src.join(format!("f{n}.md")), format!("{fm}---\n# Doc\n{}\n", body.join(" "))).unwrap();
            metas.push(DocumentVersion {
                doc_id: format!("doc{}", d.id), version: format!("v{v}"), title: String::new(), tenant: format!("t{}", d.tenant),
                kb: None, acl: d.acl.map(|g| vec![GROUPS[g].to_string()]), effective_from: Some(date(d.day)), effective_to: None,
                supersedes: sup.as_deref().and_then(VersionRef::parse), supersedes_evidence: None, depends_on: vec![],
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
        // Documents of the scope that contain the word: BM25 must return all of them.
        let with_word: HashSet<(String, String)> = docs.iter().zip(&metas)
            .filter(|(d, m)| d.words.contains(&word) && m.tenant == tenant && allowed.contains(&(m.doc_id.clone(), m.version.clone())))
            .map(|(_, m)| (m.doc_id.clone(), m.version.clone()))
            .collect();
        for mode in Mode::ALL {
            let r = engine.search(&SearchRequest { principal: format!("p{who}"), query: WORDS[word].into(), mode, k: 100, now: at, as_of: None }).unwrap();
            for h in &r.hits {
                prop_assert!(allowed.contains(&(h.doc_id.clone(), h.version.clone())), "{mode:?} leaked {}@{}", h.doc_id, h.version);
            }
            if mode == Mode::Bm25 {
                let got: HashSet<(String, String)> = r.hits.iter().map(|h| (h.doc_id.clone(), h.version.clone())).collect();
                prop_assert_eq!(&got, &with_word);
                // And a cut at k = the number of matches still holds every one of them.
                let cut = engine.search(&SearchRequest { principal: format!("p{who}"), query: WORDS[word].into(), mode, k: with_word.len().max(1), now: at, as_of: None }).unwrap();
                prop_assert_eq!(cut.hits.len(), with_word.len());
            }
        }
    }
}
