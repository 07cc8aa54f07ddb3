//! The agent's follow-up searches into documents its evidence names, over randomised
//! three-hop worlds: "In which country is the city where the director of film X was
//! born?" — the film passage names the director, the director's passage names the city,
//! and only the city's passage says the country. `graph` search reaches the director (a
//! second hop from its best hits) but not the city; the loop follows the director's
//! passage to the city, and the trace says why. A follow-up never reads, and the whole
//! answer never shows, a passage the reader may not read: a reader who may not read the
//! director's passage gets the same answer as in a world without it.

use std::path::Path;

use chrono::NaiveDate;
use dossier_agent::{Agent, AskRequest, AskResponse, EngineTools};
use dossier_engine::Engine;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;

const SYLLABLES: &[&str] = &[
    "ba", "ce", "di", "fo", "gu", "ha", "je", "ki", "lu", "mo", "ny", "pe", "qa", "ri", "so", "tu",
    "va", "we", "xi", "yo", "za", "bel", "cor", "dun", "fal", "gim", "hos",
];

fn name(rng: &mut StdRng) -> String {
    let mut part = || {
        let s: String = (0..rng.gen_range(2..4))
            .map(|_| SYLLABLES[rng.gen_range(0..SYLLABLES.len())])
            .collect();
        let mut c = s.chars();
        c.next().unwrap().to_uppercase().collect::<String>() + c.as_str()
    };
    format!("{} {}", part(), part())
}

struct World {
    film: String,
    city: String,
}

fn page(dir: &Path, id: &str, title: &str, acl: Option<&str>, text: &str) {
    let acl = acl.map(|g| format!("acl: [{g}]\n")).unwrap_or_default();
    std::fs::write(
        dir.join(format!("{id}.md")),
        format!("---\nid: {id}\nversion: \"1\"\ntitle: {title}\ntenant: t\n{acl}---\n# {title}\n\n{text}\n"),
    )
    .unwrap();
}

/// The corpus of `seed`; with `director: false`, without the director's passage (every
/// other draw the same).
fn write(dir: &Path, seed: u64, director: bool) -> World {
    let mut rng = StdRng::seed_from_u64(seed);
    std::fs::create_dir_all(dir).unwrap();
    let mut used = std::collections::HashSet::new();
    let mut fresh = |rng: &mut StdRng| loop {
        let n = name(rng);
        if used.insert(n.clone()) {
            return n;
        }
    };
    let (film, person, city, country) = (
        fresh(&mut rng),
        fresh(&mut rng),
        fresh(&mut rng),
        fresh(&mut rng),
    );
    page(
        dir,
        "film",
        &film,
        None,
        &format!("{film} is a drama film directed by {person}."),
    );
    if director {
        page(
            dir,
            "director",
            &person,
            Some("crew"),
            &format!("{person} is a film director. {person} was born in {city}."),
        );
    }
    page(
        dir,
        "city",
        &city,
        None,
        &format!("{city} lies in {country}."),
    );
    // Look-alikes at every hop: films, directors born in cities, cities in countries.
    for i in 0..25 {
        let (f, p, c, k) = (
            fresh(&mut rng),
            fresh(&mut rng),
            fresh(&mut rng),
            fresh(&mut rng),
        );
        page(
            dir,
            &format!("film-{i}"),
            &f,
            None,
            &format!("{f} is a drama film directed by {p}."),
        );
        page(
            dir,
            &format!("director-{i}"),
            &p,
            None,
            &format!("{p} is a film director. {p} was born in {c}."),
        );
        page(
            dir,
            &format!("city-{i}"),
            &c,
            None,
            &format!("{c} lies in {k}."),
        );
    }
    std::fs::write(
        dir.join("principals.yaml"),
        "principals:\n- {id: crew, tenant: t, groups: [crew]}\n- {id: guest, tenant: t, groups: []}\n",
    )
    .unwrap();
    World { film, city }
}

fn engine(dir: &Path, corpus: &Path) -> Engine {
    let engine = Engine::with_embedder(
        dossier_engine::dossier_store::testing::location(&dir.join("store")),
        "hash:64",
        Box::new(dossier_embed::HashEmbedder::new(64)),
    )
    .unwrap();
    let r = engine.ingest(&[corpus.to_path_buf()], &mut ()).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    engine
}

fn today() -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 11, 30).unwrap()
}

fn ask(engine: &Engine, who: &str, q: &str) -> AskResponse {
    let tools = EngineTools::new(engine);
    let agent = Agent {
        engine,
        tools: &tools,
        model: None,
    };
    agent.ask(&AskRequest::new(who, q, today())).expect("ask")
}

fn question(w: &World) -> String {
    format!(
        "In which country is the city where the director of {} was born?",
        w.film
    )
}

/// The whole answer as JSON, every timing masked (they differ run to run) and the
/// store's own directory written as `ROOT`.
fn timing_free(r: &AskResponse, root: &Path) -> Value {
    fn mask(v: &mut Value) {
        match v {
            Value::Object(o) => {
                for (k, x) in o.iter_mut() {
                    if k.ends_with("_ms") || k == "max_wall" {
                        *x = Value::Null;
                    } else {
                        mask(x);
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(mask),
            _ => {}
        }
    }
    let text = serde_json::to_string(r)
        .unwrap()
        .replace(&root.display().to_string(), "ROOT");
    let mut v: Value = serde_json::from_str(&text).unwrap();
    mask(&mut v);
    v
}

/// Over 40 random worlds, the city's passage is in the pool the loop gathered (the
/// reranked trace) in at least three worlds in four; in some worlds only a follow-up
/// brought it (no other step did); and every follow-up's step says which passage named
/// which document, by its title.
#[test]
fn the_loop_follows_the_evidence_to_the_third_hop() {
    let base: u64 = std::env::var("DOSSIER_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    // About one world in seven needs the follow-up: 40 make missing every one of them
    // by chance unlikely (0.86^40 < 0.3 %).
    let worlds = 40;
    let (mut reached, mut only_by_follow_up) = (0, 0);
    let mut missed = Vec::new();
    for i in 0..worlds {
        let seed = base.wrapping_add(i);
        let dir = tempfile::tempdir().unwrap();
        let corpus = dir.path().join("corpus");
        let w = write(&corpus, seed, true);
        let e = engine(dir.path(), &corpus);
        let r = ask(&e, "crew", &question(&w));
        let doc_of = |chunk: &String| {
            r.trace
                .rerank
                .after
                .iter()
                .find(|p| &p.chunk_id == chunk)
                .map(|p| p.doc_id.as_str())
        };
        let pool: Vec<&str> = r
            .trace
            .rerank
            .after
            .iter()
            .map(|p| p.doc_id.as_str())
            .collect();
        if !pool.contains(&"city") {
            missed.push((seed, pool.iter().map(|s| s.to_string()).collect::<Vec<_>>()));
            continue;
        }
        reached += 1;
        let by_other_steps = r
            .trace
            .steps
            .iter()
            .filter(|s| s.why.is_none())
            .flat_map(|s| &s.evidence)
            .any(|c| doc_of(c) == Some("city"));
        for s in r.trace.steps.iter().filter(|s| s.why.is_some()) {
            let why = s.why.as_deref().unwrap();
            let target = s.args["documents"][0].as_str().unwrap();
            assert!(why.contains(&format!("({target})")), "seed {seed}: {why}");
            if target == "city" {
                assert!(
                    why.contains(&format!("\"{}\"", w.city)),
                    "seed {seed}: {why}"
                );
            }
        }
        if !by_other_steps {
            only_by_follow_up += 1;
        }
    }
    assert!(
        reached * 4 >= worlds * 3 && only_by_follow_up > 0,
        "base seed {base}: the loop reached the city in {reached} of {worlds} worlds \
         ({only_by_follow_up} only by a follow-up); missed: {missed:?}"
    );
}

#[test]
fn no_follow_up_starts_from_or_leads_to_what_the_reader_may_not_read() {
    let seeds: Vec<u64> = match std::env::var("DOSSIER_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(s) => vec![s],
        None => (0..4).map(|_| rand::random()).collect(),
    };
    for seed in seeds {
        let with = tempfile::tempdir().unwrap();
        let without = tempfile::tempdir().unwrap();
        let w = write(&with.path().join("corpus"), seed, true);
        write(&without.path().join("corpus"), seed, false);
        let a = engine(with.path(), &with.path().join("corpus"));
        let b = engine(without.path(), &without.path().join("corpus"));
        let q = question(&w);
        let (ra, rb) = (ask(&a, "guest", &q), ask(&b, "guest", &q));
        assert_eq!(
            timing_free(&ra, with.path()),
            timing_free(&rb, without.path()),
            "seed {seed}: the guest's answer tells of the director's passage"
        );
        assert!(!serde_json::to_string(&ra).unwrap().contains("\"director\""));
    }
}
