//! `dossier migrate` end to end, through the real binary: the scenario store is copied
//! from a directory to PostgreSQL and back, and all three stores must answer alike.
//!
//! The tests that need PostgreSQL fail (never skip) when `DOSSIER_TEST_POSTGRES` is not
//! set, as the e5 test of `cli.rs` fails without its model: a migration test that passes
//! without a database would prove nothing. `scripts/pg start` starts a local server and
//! prints the URL to set.

use std::fmt;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use dossier_store::testing::{database_for, POSTGRES_ENV};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_dossier");
/// The business date of every search.
const NOW: &str = "2026-11-01";
/// The counts `migrate` reports, in its order.
const KINDS: [&str; 7] = [
    "document_versions",
    "chunks",
    "record_tables",
    "records",
    "principals",
    "decisions",
    "model_candidates",
];

/// The server the Postgres tests create their databases on.
fn postgres_server() -> String {
    match std::env::var(POSTGRES_ENV) {
        Ok(url) if !url.is_empty() => url,
        _ => panic!(
            "this test needs PostgreSQL: run `scripts/pg start` and set {POSTGRES_ENV} to the URL it prints (e.g. {POSTGRES_ENV}=postgres://dossier@127.0.0.1:55432/dossier)"
        ),
    }
}

/// What one run of the binary did.
struct Run {
    args: Vec<String>,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl fmt::Display for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "dossier {:?}\nexit: {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.args, self.code, self.stdout, self.stderr
        )
    }
}

impl Run {
    fn ok(self) -> Run {
        assert_eq!(self.code, Some(0), "expected success:\n{self}");
        self
    }

    /// A clean failure: a non-zero exit with a message, not a panic or a signal.
    fn fails(self) -> Run {
        assert!(
            matches!(self.code, Some(c) if c != 0 && c != 101),
            "expected a clean failure:\n{self}"
        );
        assert!(!self.stderr.contains("panicked"), "panicked:\n{self}");
        self
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{self}"))
    }
}

/// Runs the binary on `store` (a directory or a URL). A shared store keeps its lexical
/// index where it does by default — under the cache directory, one per database — with
/// the cache in `cache`, so tests leave nothing in the user's.
fn dossier(store: &str, cache: &Path, args: &[&str]) -> Run {
    let mut all = vec!["--store", store, "--embedder", "hash:64"];
    all.extend_from_slice(args);
    let out = Command::new(BIN)
        .env_remove("DOSSIER_STORE")
        .env_remove("DOSSIER_EMBEDDER")
        .env_remove("DOSSIER_INDEX_DIR")
        .env("XDG_CACHE_HOME", cache)
        .args(&all)
        .stdin(Stdio::null())
        .output()
        .expect("run dossier");
    Run {
        args: args.iter().map(|a| a.to_string()).collect(),
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The scenario corpus of both tenants in a new store at `dir`, with one review decision
/// (the api-auth supersession approved), so decisions travel too.
fn scenario_store(dir: &Path, cache: &Path) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/scenarios");
    for tenant in ["shop", "acme"] {
        let r = dossier(
            path(dir),
            cache,
            &["--json", "ingest", path(&root.join(tenant))],
        )
        .ok();
        assert_eq!(r.json()["problems"], Value::Array(vec![]), "{r}");
    }
    let list = dossier(path(dir), cache, &["--json", "review", "list"])
        .ok()
        .json();
    let id = list["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .find(|c| c["subject"]["kind"] == "supersession")
        .and_then(|c| c["id"].as_str())
        .unwrap_or_else(|| panic!("no supersession candidate in {list}"))
        .to_string();
    dossier(
        path(dir),
        cache,
        &["review", "approve", &id, "--by", "alice", "--note", "R-9"],
    )
    .ok();
}

/// `--json migrate --to DEST` from `from`, expected to verify: every kind equal.
fn migrate(from: &str, to: &str, cache: &Path) -> Value {
    let r = dossier(from, cache, &["--json", "migrate", "--to", to]).ok();
    let report = r.json();
    assert_eq!(report["verified"], true, "{r}");
    assert_eq!(report["differs"], Value::Array(vec![]), "{r}");
    assert_eq!(report["index"]["ok"], true, "{r}");
    let kinds = report["kinds"].as_array().expect("kinds");
    let names: Vec<&str> = kinds.iter().map(|k| k["kind"].as_str().unwrap()).collect();
    assert_eq!(names, KINDS, "{r}");
    for k in kinds {
        assert_eq!(k["equal"], true, "{r}");
        assert_eq!(k["source"], k["destination"], "{r}");
        assert_eq!(k["source_digest"], k["destination_digest"], "{r}");
    }
    report
}

/// `kind → (count, digest)` of a report.
fn contents(report: &Value) -> Vec<(String, u64, String)> {
    report["kinds"]
        .as_array()
        .expect("kinds")
        .iter()
        .map(|k| {
            (
                k["kind"].as_str().unwrap().to_string(),
                k["destination"].as_u64().unwrap(),
                k["destination_digest"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// What `status` says of the contents (not of where the store lives).
fn status(store: &str, cache: &Path) -> Value {
    let s = dossier(store, cache, &["--json", "status"]).ok().json();
    let keep = [
        "format_version",
        "embedder",
        "dim",
        "document_versions",
        "chunks",
        "principals",
        "look_alike_conflicts",
    ];
    keep.iter().map(|k| (k.to_string(), s[k].clone())).collect()
}

/// Every search the stores are compared on: `(principal, query)`, each tenant's
/// principals, restricted text included (zhang reads the supplier notice).
const SEARCHES: [(&str, &str); 7] = [
    ("u7", "耳机 退货"),
    ("u7", "API 认证方式"),
    ("zhang", "供应商 质量 通知"),
    ("zhang", "耳机 退货"),
    ("acme-admin", "payment-gateway 依赖"),
    ("acme-admin", "耳机 退货"),
    ("u7", "payment-gateway 依赖"),
];

/// Hits (document, version, section) and conflicts of one search, in rank order.
fn answers(store: &str, cache: &Path, principal: &str, query: &str, mode: &str) -> Value {
    let r = dossier(
        store,
        cache,
        &[
            "--json", "search", query, "--as", principal, "--now", NOW, "--mode", mode, "-k", "8",
        ],
    )
    .ok();
    let v = r.json();
    let hits: Vec<Value> = v["hits"]
        .as_array()
        .unwrap_or_else(|| panic!("no hits array:\n{r}"))
        .iter()
        .map(|h| serde_json::json!([h["doc_id"], h["version"], h["section"], h["score"]]))
        .collect();
    serde_json::json!({ "hits": hits, "conflicts": v["conflicts"] })
}

/// Scores closer than this are a tie: pgvector and the in-process kernels round inner
/// products differently in the last bits, so near-ties may come out in either order.
const TIE: f64 = 1e-4;

/// Whether two stores answered alike: the same conflicts, the same hits with the same
/// scores (within [`TIE`]), and every hit ranked above another by more than a tie on
/// one store ranked above it on the other too.
fn alike(a: &Value, b: &Value) -> Result<(), String> {
    if a["conflicts"] != b["conflicts"] {
        return Err("conflicts differ".into());
    }
    let hits = |v: &Value| -> Vec<(String, f64)> {
        v["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                (
                    format!("{}|{}|{}", h[0], h[1], h[2]),
                    h[3].as_f64().unwrap_or(f64::NAN),
                )
            })
            .collect()
    };
    let (ha, hb) = (hits(a), hits(b));
    let keys = |h: &[(String, f64)]| {
        let mut k: Vec<String> = h.iter().map(|x| x.0.clone()).collect();
        k.sort();
        k
    };
    if keys(&ha) != keys(&hb) {
        return Err("different hits".into());
    }
    let rank_b = |k: &str| hb.iter().position(|x| x.0 == k).unwrap();
    for (i, (ki, si)) in ha.iter().enumerate() {
        let sb = hb[rank_b(ki)].1;
        if (si - sb).abs() > TIE {
            return Err(format!("{ki}: score {si} against {sb}"));
        }
        for (kj, sj) in &ha[i + 1..] {
            if si - sj > TIE && rank_b(ki) > rank_b(kj) {
                return Err(format!("{ki} ranked above {kj} on one store only"));
            }
        }
    }
    Ok(())
}

#[test]
fn the_scenario_store_goes_to_postgres_and_back_and_answers_alike() {
    let server = postgres_server();
    let tmp = tempfile::tempdir().expect("tempdir");
    let cache = tmp.path().join("cache");
    let a = tmp.path().join("a");
    scenario_store(&a, &cache);

    // Directory → database → directory, and database → database.
    let db = tmp.path().join("db");
    fs::create_dir_all(&db).unwrap();
    let pg = database_for(&server, &db);
    let db2 = tmp.path().join("db2");
    fs::create_dir_all(&db2).unwrap();
    let pg2 = database_for(&server, &db2);
    let c = tmp.path().join("c");

    let there = migrate(path(&a), &pg, &cache);
    assert_eq!(there["from_backend"], "embedded");
    assert_eq!(there["to_backend"], "postgres");
    assert_eq!(there["embedder_model"], "hash-64");
    let counts: Vec<u64> = contents(&there).iter().map(|k| k.1).collect();
    assert_eq!(counts, [14, 26, 3, 10, 6, 1, 0], "{there}");
    let back = migrate(&pg, path(&c), &cache);
    assert_eq!(back["to_backend"], "embedded");
    let across = migrate(&pg, &pg2, &cache);
    // The same contents end to end: every digest survives both trips.
    assert_eq!(contents(&there), contents(&back));
    assert_eq!(contents(&there), contents(&across));

    let stores = [path(&a).to_string(), pg.clone(), path(&c).to_string(), pg2];
    let first = status(&stores[0], &cache);
    assert_eq!(first["document_versions"], 14, "{first}");
    for s in &stores[1..] {
        assert_eq!(status(s, &cache), first, "status of {s}");
    }

    // The same hits, scores and ranking for every principal, query and mode on every
    // store, up to ties (see `alike`).
    let mut seen = 0;
    for (principal, query) in SEARCHES {
        for mode in ["graph", "hybrid", "bm25", "vector"] {
            let want = answers(&stores[0], &cache, principal, query, mode);
            seen += want["hits"].as_array().unwrap().len();
            for s in &stores[1..] {
                let got = answers(s, &cache, principal, query, mode);
                if let Err(why) = alike(&got, &want) {
                    panic!("{principal} searching {query:?} ({mode}) on {s}: {why}\n{got}\n{want}");
                }
            }
        }
    }
    assert!(
        seen > 50,
        "the searches found too little to compare: {seen}"
    );

    // A migration never writes into an existing store, whichever way round.
    for (from, to) in [
        (path(&a), pg.as_str()),
        (pg.as_str(), path(&c)),
        (path(&c), path(&a)),
    ] {
        let r = dossier(from, &cache, &["migrate", "--to", to]).fails();
        assert!(r.stderr.contains("already holds a Dossier store"), "{r}");
    }
    // The refused attempts changed nothing.
    assert_eq!(status(&pg, &cache), first);

    // An index directory another store left behind is not taken for this one's (once a
    // defect: it was, and served the other store's chunks): the acme runbook alone,
    // into a new database, with the scenario copy's index directory.
    let shared = tmp.path().join("shared-index");
    let db3 = tmp.path().join("db3");
    fs::create_dir_all(&db3).unwrap();
    let pg3 = database_for(&server, &db3);
    let to_shared = ["--json", "migrate", "--to-index-dir", path(&shared), "--to"];
    let mut args = to_shared.to_vec();
    args.push(&pg3);
    let r = dossier(path(&c), &cache, &args).ok();
    assert_eq!(r.json()["index"]["ok"], true, "{r}");
    let acme = tmp.path().join("acme");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/scenarios/acme");
    dossier(path(&acme), &cache, &["ingest", path(&root)]).ok();
    let db4 = tmp.path().join("db4");
    fs::create_dir_all(&db4).unwrap();
    let pg4 = database_for(&server, &db4);
    let mut args = to_shared.to_vec();
    args.push(&pg4);
    // The store binds its index directory to itself: the other store's indexes are
    // rebuilt for this one, and the copy verifies.
    let r = dossier(path(&acme), &cache, &args).ok();
    let report = r.json();
    assert_eq!(report["index"]["ok"], true, "{r}");
    assert_eq!(report["differs"], serde_json::json!([]), "{r}");
}

#[test]
fn a_directory_store_copies_to_a_new_directory_and_never_onto_a_store() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let cache = tmp.path().join("cache");
    let a = tmp.path().join("a");
    scenario_store(&a, &cache);
    let b = tmp.path().join("b");

    // Text output: one line per kind, all equal.
    let r = dossier(path(&a), &cache, &["migrate", "--to", path(&b)]).ok();
    for kind in KINDS {
        let line = r
            .stdout
            .lines()
            .find(|l| l.starts_with(kind))
            .unwrap_or_else(|| panic!("no {kind} line:\n{r}"));
        assert!(line.ends_with("yes"), "{r}");
    }
    assert_eq!(status(path(&b), &cache), status(path(&a), &cache));
    assert_eq!(
        answers(path(&b), &cache, "zhang", "供应商 质量 通知", "hybrid"),
        answers(path(&a), &cache, "zhang", "供应商 质量 通知", "hybrid")
    );

    // Onto a store (another or itself), or into a directory holding anything: refused.
    for to in [&b, &a] {
        let r = dossier(path(&a), &cache, &["migrate", "--to", path(to)]).fails();
        assert!(r.stderr.contains("already holds a Dossier store"), "{r}");
    }
    let junk = tmp.path().join("junk");
    fs::create_dir_all(&junk).unwrap();
    fs::write(junk.join("notes.txt"), "mine").unwrap();
    let r = dossier(path(&a), &cache, &["migrate", "--to", path(&junk)]).fails();
    assert!(r.stderr.contains("not empty"), "{r}");
    assert_eq!(
        fs::read_dir(&junk).unwrap().count(),
        1,
        "a refused destination is left alone"
    );

    // No source store: said so, and nothing is created at the destination.
    let none = tmp.path().join("none");
    let d = tmp.path().join("d");
    let r = dossier(
        path(&none),
        &cache,
        &["--json", "migrate", "--to", path(&d)],
    )
    .fails();
    let e = r.json()["error"].as_str().unwrap_or_default().to_string();
    assert!(e.contains("no Dossier store"), "{r}");
    assert!(!d.exists() && !none.exists(), "{r}");
}

#[test]
fn a_database_that_does_not_answer_is_a_clear_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let cache = tmp.path().join("cache");
    let a = tmp.path().join("a");
    scenario_store(&a, &cache);
    let before = status(path(&a), &cache);

    // Nothing listens on port 1; the password must not be echoed back.
    let url = "postgres://dossier:hunter2@127.0.0.1:1/nowhere";
    let r = dossier(path(&a), &cache, &["--json", "migrate", "--to", url]).fails();
    let e = r.json()["error"].as_str().unwrap_or_default().to_string();
    assert!(
        e.contains("cannot connect") && e.contains("127.0.0.1:1/nowhere"),
        "{r}"
    );
    assert!(
        !r.stdout.contains("hunter2") && !r.stderr.contains("hunter2"),
        "{r}"
    );

    // A URL that does not parse.
    let r = dossier(
        path(&a),
        &cache,
        &["migrate", "--to", "postgres://dossier@127.0.0.1:port/x"],
    )
    .fails();
    assert!(r.stderr.contains("error:"), "{r}");

    // The source is untouched.
    assert_eq!(status(path(&a), &cache), before);
}
