//! `dossier eval DATASET --mode …,agent`: the ask loop scored as a retrieval mode beside
//! the search modes, on a generated two-hop dataset (films, their directors, where the
//! directors were born; look-alikes at every hop) in a hash-embedder store.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_dossier");

fn dossier(store: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(BIN)
        .env_remove("DOSSIER_STORE")
        .env_remove("DOSSIER_EMBEDDER")
        .env_remove("DOSSIER_LLM")
        .arg("--store")
        .arg(store)
        .arg("--embedder")
        .arg("hash:64")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run dossier");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Eight questions over 8 films, 8 directors and 8 cities, plus 20 look-alike films and
/// directors.
fn dataset(dir: &Path) -> Vec<(String, Vec<String>)> {
    std::fs::create_dir_all(dir).unwrap();
    let name = |kind: &str, i: usize| {
        let syl = [
            "ka", "lo", "mi", "ren", "ta", "vo", "sel", "dor", "bri", "fen",
        ];
        let a = syl[i % 10];
        let b = syl[(i / 10 + kind.len()) % 10];
        let c = syl[(i * 7 + kind.len() * 3) % 10];
        format!("{}{a}{b} {}{c}", &kind[..1].to_uppercase(), kind)
    };
    let mut corpus = Vec::new();
    let mut questions = Vec::new();
    for i in 0..28 {
        let (film, director, city) = (name("film", i), name("dir", i), name("town", i));
        corpus.push(json!({"id": format!("film-{i}"), "title": film,
            "text": format!("{film} is a drama film directed by {director}.")}));
        corpus.push(json!({"id": format!("director-{i}"), "title": director,
            "text": format!("{director} is a film director. {director} was born in {city}.")}));
        if i < 8 {
            let gold = vec![format!("film-{i}"), format!("director-{i}")];
            questions.push((format!("Where was the director of {film} born?"), gold));
        }
    }
    let lines: Vec<String> = corpus.iter().map(Value::to_string).collect();
    std::fs::write(dir.join("corpus.jsonl"), lines.join("\n")).unwrap();
    let qs: Vec<String> = questions
        .iter()
        .enumerate()
        .map(|(i, (q, gold))| {
            json!({"id": format!("q{i}"), "question": q, "answers": [], "gold_ids": gold})
                .to_string()
        })
        .collect();
    std::fs::write(dir.join("questions.jsonl"), qs.join("\n")).unwrap();
    questions
}

fn recall(gold: &[String], got: &[String], k: usize) -> f64 {
    got.iter().take(k).filter(|d| gold.contains(d)).count() as f64 / gold.len() as f64
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_agent_is_scored_beside_the_search_modes_from_the_evidence_it_gathered() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("films");
    let store = tmp.path().join("store");
    let questions = dataset(&data);
    let d = data.to_str().unwrap();
    let (code, out, err) = dossier(
        &store,
        &[
            "--json",
            "eval",
            d,
            "--mode",
            "hybrid,agent",
            "--per-question",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let modes = v["modes"].as_array().unwrap();
    assert_eq!(modes.len(), 2, "{v}");
    assert_eq!(modes[0]["mode"], "hybrid");
    let agent = &modes[1];
    assert_eq!(agent["mode"], "agent");
    assert_eq!(agent["questions"], questions.len());
    assert_eq!(agent["errors"], 0);
    assert!(agent["steps"].as_f64().unwrap() >= 1.0, "{agent}");
    assert!(agent["tool_calls"].as_f64().unwrap() >= 1.0, "{agent}");
    let per = agent["per_question"].as_array().unwrap();
    assert_eq!(per.len(), questions.len());
    let (mut r2, mut r5, mut r10, mut mrr) = (0.0, 0.0, 0.0, 0.0);
    for (q, (text, gold)) in per.iter().zip(&questions) {
        assert_eq!(q["question"], text.as_str());
        let got = strings(&q["retrieved"]);
        let cited = strings(&q["cited"]);
        // Cited first, in citation order; then the rest of the pool, each document once.
        assert_eq!(
            &got[..cited.len().min(got.len())],
            &cited[..cited.len().min(10)]
        );
        let mut seen = std::collections::HashSet::new();
        assert!(got.iter().all(|d| seen.insert(d)), "{got:?}");
        assert!(strings(&q["reranked"])
            .iter()
            .all(|d| got.contains(d) || got.len() == 10));
        assert_eq!(q["recall@5"].as_f64().unwrap(), recall(gold, &got, 5));
        r2 += recall(gold, &got, 2);
        r5 += recall(gold, &got, 5);
        r10 += recall(gold, &got, 10);
        mrr += got
            .iter()
            .position(|d| gold.contains(d))
            .map_or(0.0, |i| 1.0 / (i + 1) as f64);
    }
    let n = questions.len() as f64;
    for (key, want) in [
        ("recall@2", r2 / n),
        ("recall@5", r5 / n),
        ("recall@10", r10 / n),
        ("mrr", mrr / n),
    ] {
        assert!(
            (agent[key].as_f64().unwrap() - want).abs() < 1e-9,
            "{key}: {} against {want}",
            agent[key]
        );
    }
    // Every film passage names its director: the loop finds both hops for most.
    assert!(r5 / n >= 0.5, "{agent}");

    // The agent alone: one flat object, as for one search mode; the human table too.
    let (code, out, err) = dossier(&store, &["--json", "eval", d, "--mode", "agent"]);
    assert_eq!(code, Some(0), "{err}");
    let one: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(one["mode"], "agent");
    assert_eq!(one["recall@5"], agent["recall@5"]);
    assert!(one.get("per_question").is_none(), "{one}");
    let (code, out, err) = dossier(&store, &["eval", d, "--mode", "bm25,agent"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("agent") && out.contains("steps"), "{out}");
}

#[test]
fn bad_mode_lists_fail_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("films");
    dataset(&data);
    let d = data.to_str().unwrap();
    let store = tmp.path().join("store");
    for args in [
        vec!["eval", d, "--mode", "agent,nonsense"],
        vec!["eval", d, "--mode", "agent", "--ask"],
        vec!["eval", d, "--mode", "agent", "--llm", "ftp://nowhere"],
    ] {
        let (code, _, err) = dossier(&store, &args);
        assert!(
            matches!(code, Some(c) if c != 0 && c != 101),
            "{args:?}: {code:?} {err}"
        );
        assert!(!err.contains("panicked") && !err.trim().is_empty(), "{err}");
    }
}

/// `eval DIR --ask` on a case directory: its documents and principals ingested, every
/// case checked, the figures by kind and language; a malformed case fails with its id.
#[test]
fn a_case_directory_is_checked_case_by_case_and_tallied() {
    let dir = tempfile::tempdir().unwrap();
    let set = dir.path().join("set");
    std::fs::create_dir_all(set.join("docs")).unwrap();
    std::fs::write(
        set.join("docs/canteen.md"),
        "---\nid: canteen\nversion: \"1\"\ntitle: Canteen\ntenant: t\n---\n# Canteen\n\nThe canteen opens at 11:30 on working days.\n",
    )
    .unwrap();
    std::fs::write(
        set.join("principals.yaml"),
        "principals:\n- {id: reader, tenant: t, groups: []}\n",
    )
    .unwrap();
    let case = |id: &str, kind: &str, status: &str| {
        format!(
            "- id: {id}\n  kind: {kind}\n  lang: en\n  as: reader\n  now: 2026-10-15\n  question: When does the canteen open?\n  expect:\n    status: {status}\n"
        )
    };
    std::fs::write(
        set.join("cases.yaml"),
        case("open", "time", "answered") + &case("closed", "absent", "insufficient_evidence"),
    )
    .unwrap();
    let store = dir.path().join("store");
    let (code, out, err) = dossier(&store, &["--json", "eval", set.to_str().unwrap(), "--ask"]);
    assert_eq!(code, Some(0), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let all = &v["report"]["all"];
    assert_eq!(all["cases"], 2, "{v}");
    assert_eq!(all["answerable"], 1);
    assert_eq!(all["unanswerable"], 1);
    // One of the two expectations must fail: the same question cannot be both.
    assert_eq!(
        all["passed"].as_u64().unwrap() + v["report"]["failed"].as_array().unwrap().len() as u64,
        2
    );
    assert_eq!(v["report"]["by_kind"]["time"]["cases"], 1);
    assert_eq!(v["cases"].as_array().unwrap().len(), 2);

    std::fs::write(set.join("cases.yaml"), "- id: broken\n  now: 2026-10-15\n").unwrap();
    // With --json the error is a JSON object on stdout.
    let (code, out, _) = dossier(&store, &["--json", "eval", set.to_str().unwrap(), "--ask"]);
    assert_ne!(code, Some(0));
    assert!(out.contains("case broken") && out.contains("`as`"), "{out}");
}
