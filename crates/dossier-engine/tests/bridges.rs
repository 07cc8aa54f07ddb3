//! Second hops in `graph` mode: a question about "the director of film X" reaches the
//! director's own passage through the film passage that names it, over randomised
//! corpora (names, years, cities drawn from a seed; dozens of look-alike director
//! passages as distractors). And the hop reads only what the reader may read: for a
//! reader who may not read the film passage, every graph search answers exactly as in a
//! store without that passage.

use std::path::Path;

use chrono::NaiveDate;
use dossier_engine::{Engine, Mode, SearchRequest};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ren", "ta", "vo", "sel", "dor", "an", "bri", "cu", "fen", "gar", "hol",
    "ix", "jun", "mar", "nel", "or", "pra", "qui", "ros", "sun", "tev", "ul", "vin", "wes",
];

fn name(rng: &mut StdRng) -> String {
    let mut part = || {
        let n = rng.gen_range(2..4);
        let s: String = (0..n)
            .map(|_| SYLLABLES[rng.gen_range(0..SYLLABLES.len())])
            .collect();
        let mut c = s.chars();
        c.next().unwrap().to_uppercase().collect::<String>() + c.as_str()
    };
    format!("{} {}", part(), part())
}

struct World {
    film: String,
    director_id: String,
}

fn doc(dir: &Path, id: &str, title: &str, acl: Option<&str>, text: &str) {
    let acl = acl.map(|g| format!("acl: [{g}]\n")).unwrap_or_default();
    std::fs::write(
        dir.join(format!("{id}.md")),
        format!("---\nid: {id}\nversion: \"1\"\ntitle: {title}\ntenant: t\n{acl}---\n# {title}\n\n{text}\n"),
    )
    .unwrap();
}

/// Writes the corpus of `seed`; with `film_passage: false`, without the film's passage.
fn write(dir: &Path, seed: u64, film_passage: bool) -> World {
    let mut rng = StdRng::seed_from_u64(seed);
    let docs = dir.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    let mut used = std::collections::HashSet::new();
    let mut fresh = |rng: &mut StdRng| loop {
        let n = name(rng);
        if used.insert(n.clone()) {
            return n;
        }
    };
    let film = fresh(&mut rng);
    let director = fresh(&mut rng);
    let city = fresh(&mut rng);
    // Drawn whether or not the passage is written, so both worlds share every other draw.
    let year = rng.gen_range(1950..2020);
    // The cast: named by the film passage too, so a walk from it reaches eight people
    // alike; only scoring them against the question tells the director.
    let cast: Vec<(String, String)> = (0..8).map(|_| (fresh(&mut rng), fresh(&mut rng))).collect();
    if film_passage {
        let names: Vec<&str> = cast.iter().map(|(a, _)| a.as_str()).collect();
        doc(
            &docs,
            "film",
            &film,
            Some("cinema"),
            &format!(
                "{film} is a {year} drama film directed by {director}. It stars {}.",
                names.join(", ")
            ),
        );
    }
    doc(
        &docs,
        "director",
        &director,
        None,
        &format!("{director} is a film director. {director} was born in {city}."),
    );
    for (i, (a, c)) in cast.iter().enumerate() {
        doc(
            &docs,
            &format!("actor-{i}"),
            a,
            None,
            &format!("{a} is an actor. {a} was born in {c}."),
        );
    }
    // Look-alikes: directors born somewhere, and films directed by someone.
    for i in 0..40 {
        let (d, c) = (fresh(&mut rng), fresh(&mut rng));
        doc(
            &docs,
            &format!("other-director-{i}"),
            &d,
            None,
            &format!("{d} is a film director. {d} was born in {c}."),
        );
        let (f, by) = (fresh(&mut rng), fresh(&mut rng));
        doc(
            &docs,
            &format!("other-film-{i}"),
            &f,
            None,
            &format!("{f} is a drama film directed by {by}."),
        );
    }
    std::fs::write(
        dir.join("principals.yaml"),
        "principals:\n- {id: fan, tenant: t, groups: [cinema]}\n- {id: guest, tenant: t, groups: []}\n",
    )
    .unwrap();
    World {
        film,
        director_id: "director".into(),
    }
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

fn docs_found(engine: &Engine, who: &str, q: &str, mode: Mode, k: usize) -> Vec<String> {
    let r = engine
        .search(&SearchRequest {
            principal: who.into(),
            query: q.into(),
            mode,
            k,
            now: NaiveDate::from_ymd_opt(2026, 11, 30).unwrap(),
            as_of: None,
            kbs: vec![],
        })
        .unwrap();
    r.hits.iter().map(|h| h.doc_id.clone()).collect()
}

fn seeds() -> Vec<u64> {
    match std::env::var("DOSSIER_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(s) => vec![s],
        None => (0..5).map(|_| rand::random()).collect(),
    }
}

/// Over 40 random worlds (the hashing embedder, so that meaning cannot find the director
/// by itself: 40 look-alike directors match the question as well as the right one does,
/// and the film passage names eight actors beside the director), `graph` mode puts the
/// director's passage in the top 5 in at least three worlds in four, and in more
/// worlds than `hybrid` does. Without the second hop it reaches fewer than half.
#[test]
fn the_director_of_a_film_is_reached_through_the_film_passage() {
    let base: u64 = std::env::var("DOSSIER_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    let worlds = 40;
    let (mut graph_reached, mut hybrid_reached, mut missed) = (0, 0, Vec::new());
    for i in 0..worlds {
        let seed = base.wrapping_add(i);
        let dir = tempfile::tempdir().unwrap();
        let corpus = dir.path().join("corpus");
        let w = write(&corpus, seed, true);
        let engine = engine(dir.path(), &corpus);
        let q = format!("Where was the director of {} born?", w.film);
        let graph = docs_found(&engine, "fan", &q, Mode::Graph, 5);
        if graph.contains(&w.director_id) {
            graph_reached += 1;
        } else {
            missed.push((seed, graph));
        }
        if docs_found(&engine, "fan", &q, Mode::Hybrid, 5).contains(&w.director_id) {
            hybrid_reached += 1;
        }
    }
    assert!(
        graph_reached * 4 >= worlds * 3 && graph_reached > hybrid_reached,
        "base seed {base}: graph reached the director in {graph_reached} of {worlds} worlds, \
         hybrid in {hybrid_reached}; missed: {missed:?}"
    );
}

#[test]
fn a_hop_from_a_passage_the_reader_may_not_read_is_never_taken() {
    for seed in seeds() {
        let with = tempfile::tempdir().unwrap();
        let without = tempfile::tempdir().unwrap();
        let w = write(&with.path().join("corpus"), seed, true);
        write(&without.path().join("corpus"), seed, false);
        let a = engine(with.path(), &with.path().join("corpus"));
        let b = engine(without.path(), &without.path().join("corpus"));
        let q = format!("Where was the director of {} born?", w.film);
        for mode in [
            Mode::Bm25,
            Mode::Vector,
            Mode::Hybrid,
            Mode::Graph,
            Mode::Local,
            Mode::Drift,
        ] {
            for k in [3, 5, 10] {
                assert_eq!(
                    docs_found(&a, "guest", &q, mode, k),
                    docs_found(&b, "guest", &q, mode, k),
                    "seed {seed}: {mode:?} k={k} tells the guest about a passage it may not read"
                );
            }
        }
    }
}

/// The mention linker reads names as people write them: the director's page is titled
/// "NAME (filmmaker)" and a namesake's "NAME (footballer)", while the film passage
/// writes "by the filmmaker NAME". Over 12 random worlds, `graph` mode reaches the
/// director in at least three in four (the passage's word "filmmaker" tells the two
/// pages apart; nothing in the question names either), and the film passage names the
/// director's page and never the namesake's. Linking whole titles only, or guessing
/// between namesakes, fails this. (Whether the namesake lands in the top 5 is left to
/// chance: with the hashing embedder it is one of 32 pages that say "born".)
#[test]
fn a_name_written_without_its_qualifier_reaches_the_right_namesake() {
    let base: u64 = std::env::var("DOSSIER_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    let worlds = 12;
    let (mut reached, mut namesake_found) = (0, Vec::new());
    for i in 0..worlds {
        let seed = base.wrapping_add(i);
        let mut rng = StdRng::seed_from_u64(seed);
        let dir = tempfile::tempdir().unwrap();
        let docs = dir.path().join("corpus").join("docs");
        std::fs::create_dir_all(&docs).unwrap();
        let (film, director) = (name(&mut rng), name(&mut rng));
        let (city, elsewhere) = (name(&mut rng), name(&mut rng));
        doc(
            &docs,
            "film",
            &film,
            None,
            &format!("{film} is a drama film by the filmmaker {director}."),
        );
        doc(
            &docs,
            "director",
            &format!("{director} (filmmaker)"),
            None,
            &format!("{director} made three pictures. {director} was born in {city}."),
        );
        doc(
            &docs,
            "namesake",
            &format!("{director} (footballer)"),
            None,
            &format!("{director} played as a striker. {director} was born in {elsewhere}."),
        );
        for j in 0..30 {
            let (d, c) = (name(&mut rng), name(&mut rng));
            doc(
                &docs,
                &format!("other-{j}"),
                &d,
                None,
                &format!("{d} made three pictures. {d} was born in {c}."),
            );
        }
        std::fs::write(
            dir.path().join("corpus").join("principals.yaml"),
            "principals:\n- {id: fan, tenant: t, groups: []}\n",
        )
        .unwrap();
        let engine = engine(dir.path(), &dir.path().join("corpus"));
        let q = format!("Where was the director of {film} born?");
        let found = docs_found(&engine, "fan", &q, Mode::Graph, 5);
        if found.iter().any(|d| d == "director") {
            reached += 1;
        }
        let scope = engine
            .scope("fan", NaiveDate::from_ymd_opt(2026, 11, 30).unwrap())
            .unwrap();
        let named: Vec<String> = engine
            .documents_named_by(&scope, &["film@1#0"])
            .unwrap()
            .into_iter()
            .map(|n| n.doc_id)
            .collect();
        if named != ["director"] {
            namesake_found.push((seed, named));
        }
    }
    assert!(
        reached * 4 >= worlds * 3,
        "base seed {base}: the director reached in {reached} of {worlds} worlds"
    );
    assert!(
        namesake_found.is_empty(),
        "the film passage did not name exactly the director's page: {namesake_found:?}"
    );
}
