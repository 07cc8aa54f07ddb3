//! Property: whatever the tenants, ACLs, knowledge bases and version histories, no hit
//! in any mode falls outside the principal's tenant, groups, knowledge bases (its own,
//! narrowed by the request's), or the versions in force; and BM25 loses no admitted
//! match to the top-k cut.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use chrono::NaiveDate;
use dossier_core::validity::plan_validity;
use dossier_core::{DocKind, DocumentVersion, VersionRef};
use dossier_engine::{Engine, Mode, SearchRequest};
use proptest::prelude::*;

const WORDS: [&str; 6] = ["apple", "river", "stone", "cloud", "退货", "网关"];
const GROUPS: [&str; 3] = ["red", "blue", "green"];
/// Knowledge bases; the last is never given to a document.
const KBS: [&str; 3] = ["kb-a", "kb-b", "kb-ghost"];

#[derive(Debug, Clone)]
struct Doc {
    tenant: usize,
    id: usize,
    acl: Option<usize>,
    kb: Option<usize>,
    day: u32,
    supersedes_prev: bool,
    words: Vec<usize>,
}

fn doc_strategy() -> impl Strategy<Value = Doc> {
    (
        0..2usize,
        0..4usize,
        proptest::option::of(0..3usize),
        proptest::option::of(0..2usize),
        1..28u32,
        any::<bool>(),
        proptest::collection::vec(0..6usize, 1..4),
    )
        .prop_map(|(tenant, id, acl, kb, day, supersedes_prev, words)| Doc {
            tenant,
            id,
            acl,
            kb,
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
                            who in 0..6usize, day in 1..30u32, word in 0..6usize,
                            asked in proptest::collection::vec(0..3usize, 0..3)) {
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
            if let Some(k) = d.kb { writeln!(fm, "kb: {}", KBS[k]).unwrap(); }
            let body: Vec<&str> = d.words.iter().map(|&w| WORDS[w]).collect();
            std::fs::write(src.join(format!("f{n}.md")), format!("{fm}---\n# Doc\n{}\n", body.join(" "))).unwrap();
            metas.push(DocumentVersion {
                doc_id: format!("doc{}", d.id), version: format!("v{v}"), title: String::new(), tenant: format!("t{}", d.tenant),
                kb: d.kb.map(|k| KBS[k].to_string()), acl: d.acl.map(|g| vec![GROUPS[g].to_string()]), effective_from: Some(date(d.day)), effective_to: None,
                supersedes: sup.as_deref().and_then(VersionRef::parse), supersedes_evidence: None, depends_on: vec![],
                source_uri: String::new(), kind: DocKind::Markdown, digest: String::new(),
            });
        }
        let principals = "principals:\n  - {id: p0, tenant: t0, groups: []}\n  - {id: p1, tenant: t0, groups: [red]}\n  - {id: p2, tenant: t0, groups: [blue, green], kbs: [kb-a]}\n  - {id: p3, tenant: t1, groups: []}\n  - {id: p4, tenant: t1, groups: [red, blue]}\n  - {id: p5, tenant: t1, groups: [green], kbs: [kb-a, kb-b]}\n";
        std::fs::write(src.join("principals.yaml"), principals).unwrap();
        let engine = Engine::with_embedder(dossier_engine::dossier_store::testing::location(&dir.path().join("store")), "hash:32", Box::new(dossier_embed::HashEmbedder::new(32))).unwrap();
        let report = engine.ingest(&[src], &mut ()).unwrap();
        prop_assert!(report.problems.is_empty(), "{:?}", report.problems);

        let groups: [&[&str]; 6] = [&[], &["red"], &["blue", "green"], &[], &["red", "blue"], &["green"]];
        let (tenant, my_groups) = (format!("t{}", who / 3), groups[who]);
        // The knowledge bases read: the principal's own (p2, p5), narrowed by the
        // request's (`asked`, which may name kbs the principal may not read or that no
        // document has).
        let own: Option<Vec<&str>> = match who { 2 => Some(vec!["kb-a"]), 5 => Some(vec!["kb-a", "kb-b"]), _ => None };
        let requested: Vec<String> = asked.iter().map(|&k| KBS[k].to_string()).collect();
        let kbs: Option<Vec<&str>> = if requested.is_empty() {
            own.clone()
        } else {
            Some(requested.iter().map(String::as_str).filter(|k| own.as_ref().is_none_or(|o| o.contains(k))).collect())
        };
        let at = date(day);
        let plan = plan_validity(&metas.iter().filter(|m| m.tenant == tenant).cloned().collect::<Vec<_>>());
        let allowed: HashSet<(String, String)> = metas.iter()
            .filter(|m| m.tenant == tenant)
            .filter(|m| m.acl.as_ref().is_none_or(|a| a.iter().any(|g| my_groups.contains(&g.as_str()))))
            .filter(|m| kbs.as_ref().is_none_or(|ks| m.kb.as_deref().is_some_and(|k| ks.contains(&k))))
            .filter(|m| plan[&m.key()].in_force(at))
            .map(|m| (m.doc_id.clone(), m.version.clone()))
            .collect();
        // Documents of the scope that contain the word: BM25 must return all of them.
        let with_word: HashSet<(String, String)> = docs.iter().zip(&metas)
            .filter(|(d, m)| d.words.contains(&word) && m.tenant == tenant && allowed.contains(&(m.doc_id.clone(), m.version.clone())))
            .map(|(_, m)| (m.doc_id.clone(), m.version.clone()))
            .collect();
        for mode in Mode::ALL {
            let r = engine.search(&SearchRequest { principal: format!("p{who}"), query: WORDS[word].into(), mode, k: 100, now: at, as_of: None, kbs: requested.clone() }).unwrap();
            for h in &r.hits {
                prop_assert!(allowed.contains(&(h.doc_id.clone(), h.version.clone())), "{mode:?} leaked {}@{}", h.doc_id, h.version);
            }
            if mode == Mode::Bm25 {
                let got: HashSet<(String, String)> = r.hits.iter().map(|h| (h.doc_id.clone(), h.version.clone())).collect();
                prop_assert_eq!(&got, &with_word);
                // And a cut at k = the number of matches still holds every one of them.
                let cut = engine.search(&SearchRequest { principal: format!("p{who}"), query: WORDS[word].into(), mode, k: with_word.len().max(1), now: at, as_of: None, kbs: requested.clone() }).unwrap();
                prop_assert_eq!(cut.hits.len(), with_word.len());
            }
        }
    }
}
