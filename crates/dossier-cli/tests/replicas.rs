//! Two `dossier serve` replicas of one shared PostgreSQL + pgvector store, as real
//! processes: a write through one is served by the other within a bound; both answer
//! every caller identically and within the caller's scope; a replica killed in the
//! middle of an ingest job has that job reported failed by the other and leaves every
//! document whole or absent; PostgreSQL restarted under a running job leaves the same,
//! and the surviving replica recovers. A resent upload completes each interrupted one.
//!
//! The test starts a private PostgreSQL of its own (`scripts/pg` on a free port, data in
//! a temporary directory) so that it needs nothing from its environment and may kill and
//! restart the database; a guard stops it however the test ends.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_dossier");
/// Sections of a generated document, each its own chunk: a document is whole only with
/// all of them.
const SECTIONS: usize = 4;
/// The business date every read is judged at (after every scenario version's start), so
/// that the two replicas never judge at different "todays" and no run depends on the
/// calendar.
const NOW: &str = "2026-11-26";
/// How long a write made through one replica may take to be served by the other. The
/// follower looks every 100 ms (`--follow-ms 100`) and replays a one-document commit in
/// milliseconds; 5 s leaves room for two cores shared with other test binaries, while a
/// replica that does not follow never serves the write at all.
const REPLICATION_BOUND: Duration = Duration::from_secs(5);
/// A killed replica's job is reported failed after 10 s without a heartbeat
/// (`dossier_server::jobs::ABANDONED_AFTER`); 30 s allows for the follower's period and
/// a loaded machine.
const ABANDONED_BOUND: Duration = Duration::from_secs(30);

const KEY_U7: &str = "key-u7";
const KEY_U8: &str = "key-u8";
const KEY_ZHANG: &str = "key-zhang";
const KEY_ACME: &str = "key-acme-admin";
const KEY_UNKNOWN: &str = "key-nobody-holds";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn scenarios() -> PathBuf {
    repo().join("../shared/scenarios")
}

fn seconds(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

// ---------------------------------------------------------------------------------
// The private PostgreSQL.

/// A PostgreSQL of this test's own, run by `scripts/pg` with a port and data directory
/// of its own; stopped when dropped (also on panic).
struct Postgres {
    port: u16,
    data: PathBuf,
    url: String,
}

impl Postgres {
    fn script(&self, action: &str) -> Output {
        Command::new(repo().join("scripts/pg"))
            .arg(action)
            .env("DOSSIER_PG_PORT", self.port.to_string())
            .env("DOSSIER_PG_DATA", &self.data)
            .stdin(Stdio::null())
            .output()
            .expect("scripts/pg runs")
    }

    /// Initialises and starts a server in `dir/pg` on a free port.
    fn start(dir: &Path) -> Postgres {
        let mut pg = Postgres {
            port: free_port(),
            data: dir.join("pg"),
            url: String::new(),
        };
        let out = pg.script("start");
        assert!(
            out.status.success(),
            "scripts/pg start failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        pg.url = String::from_utf8(out.stdout).unwrap().trim().to_string();
        assert!(pg.url.starts_with("postgres://"), "{}", pg.url);
        pg
    }

    /// SIGKILL of the postmaster (`scripts/pg kill`): a crash, not a shutdown.
    fn kill(&self) {
        assert!(self.script("kill").status.success());
    }

    /// Fast shutdown (`scripts/pg stop`).
    fn stop(&self) {
        assert!(self.script("stop").status.success());
    }

    /// Starts the server again after a kill. The killed postmaster's backends leave
    /// only when they notice it has gone, and until then the new one refuses to start
    /// (their shared memory is in use): so this retries, within a bound.
    fn restart(&self) -> Duration {
        let t = Instant::now();
        loop {
            let out = self.script("start");
            if out.status.success() {
                return t.elapsed();
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "PostgreSQL did not start again within 60 s: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self.script("stop");
        // A server that would not stop is killed rather than left behind.
        if self.script("status").status.success() {
            let _ = self.script("kill");
        }
    }
}

/// A port nothing listens on now (the kernel's choice for port 0).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

// ---------------------------------------------------------------------------------
// Replicas and HTTP.

/// A running `dossier serve`; killed when dropped.
struct Replica {
    name: &'static str,
    child: Child,
    base: String,
}

impl Replica {
    fn start(name: &'static str, url: &str, index_dir: &Path, keys: &Path) -> Replica {
        let mut child = Command::new(BIN)
            .args(["--store", url, "--embedder", "hash:64", "--index-dir"])
            .arg(index_dir)
            .args(["serve", "--addr", "127.0.0.1:0", "--keys"])
            .arg(keys)
            // The scope check sends a few hundred requests a second per tenant and per
            // key: above the default rates (50/s a tenant, 20/s a principal), whose 429s
            // would make the comparison vacuous.
            .args(["--quiet", "--follow-ms", "100", "--rate", "100000"])
            .args(["--burst", "100000", "--principal-rate", "100000"])
            .args([
                "--principal-burst",
                "100000",
                "--principal-concurrency",
                "8",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let base = loop {
            let line = lines
                .next()
                .unwrap_or_else(|| panic!("replica {name} ended before serving"))
                .unwrap();
            if let Some(rest) = line.split("serving on ").nth(1) {
                break rest.split_whitespace().next().unwrap().to_string();
            }
        };
        // Keep draining stderr (the server must never block on a full pipe), and show
        // what it says with the replica's name: the test's output on failure.
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                eprintln!("[replica {name}] {line}");
            }
        });
        Replica { name, child, base }
    }

    /// SIGKILL, and reaped.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

struct Http(reqwest::blocking::Client);

impl Http {
    fn new() -> Http {
        Http(
            reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap(),
        )
    }

    fn send(&self, req: reqwest::blocking::RequestBuilder) -> (u16, Value) {
        let resp = req.send().expect("the replica answers");
        let status = resp.status().as_u16();
        let text = resp.text().unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, body)
    }

    fn get(&self, base: &str, path: &str, key: &str) -> (u16, Value) {
        self.send(self.0.get(format!("{base}{path}")).bearer_auth(key))
    }

    fn post(&self, base: &str, path: &str, key: &str, body: &Value) -> (u16, Value) {
        self.send(
            self.0
                .post(format!("{base}{path}"))
                .bearer_auth(key)
                .json(body),
        )
    }

    fn search(&self, base: &str, key: &str, query: &str, mode: &str, k: usize) -> (u16, Value) {
        let body = json!({"query": query, "mode": mode, "k": k, "now": NOW});
        self.post(base, "/v1/search", key, &body)
    }

    /// `/readyz` once it answers 200 with nothing left to replay; panics past `bound`.
    fn wait_caught_up(&self, base: &str, bound: Duration) -> Value {
        let t = Instant::now();
        loop {
            if let Ok(resp) = self.0.get(format!("{base}/readyz")).send() {
                if resp.status().as_u16() == 200 {
                    let v: Value = resp.json().unwrap();
                    if v["behind"] == 0 && v["catalog_generation"] == v["served_generation"] {
                        return v;
                    }
                }
            }
            assert!(
                t.elapsed() < bound,
                "{base} not ready and caught up within {}",
                seconds(bound)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Polls a job until it has ended (`succeeded` or `failed`); panics past `bound`.
    fn wait_job(&self, base: &str, id: &str, bound: Duration) -> Value {
        let t = Instant::now();
        loop {
            let (status, job) = self.get(base, &format!("/v1/jobs/{id}"), KEY_ZHANG);
            assert_eq!(status, 200, "job {id} on {base}: {job}");
            if matches!(job["status"].as_str(), Some("succeeded" | "failed")) {
                return job;
            }
            assert!(
                t.elapsed() < bound,
                "job {id} still {} after {}",
                job["status"],
                seconds(bound)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn keys_file(dir: &Path) -> PathBuf {
    let p = dir.join("keys.yaml");
    let mut text = String::new();
    for (key, principal, admin) in [
        (KEY_U7, "u7", false),
        (KEY_U8, "u8", false),
        (KEY_ZHANG, "zhang", true),
        (KEY_ACME, "acme-admin", true),
    ] {
        text.push_str(&format!(
            "- {{key_sha256: {}, principal: {principal}, admin: {admin}}}\n",
            dossier_server::hash_key(key)
        ));
    }
    std::fs::write(&p, text).unwrap();
    p
}

/// A private PostgreSQL holding the scenarios (ingested by the CLI, which creates the
/// store), and two replicas serving it, each with its own lexical index, both ready.
/// Fields drop in order: replicas, then the database, then the directory.
struct World {
    a: Replica,
    b: Replica,
    pg: Postgres,
    http: Http,
    /// Holds the database's data and the replicas' indexes: removed last.
    _dir: tempfile::TempDir,
}

impl World {
    fn new(started: Instant) -> World {
        let dir = tempfile::tempdir().unwrap();
        // As root, scripts/pg runs the server as `dossierpg`, which must reach the data
        // directory inside this one (mode 0700 as created).
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let pg = Postgres::start(dir.path());
        let http = Http::new();
        eprintln!("postgres at {} ({})", pg.url, seconds(started.elapsed()));

        // 1. The scenarios, ingested by the CLI: this creates the store.
        let out = Command::new(BIN)
            .args(["--store", &pg.url, "--embedder", "hash:64", "--index-dir"])
            .arg(dir.path().join("cli-index"))
            .arg("ingest")
            .arg(scenarios().join("shop"))
            .arg(scenarios().join("acme"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );

        // 2. Two replicas, each with its own lexical index.
        let keys = keys_file(dir.path());
        let a = Replica::start("A", &pg.url, &dir.path().join("index-a"), &keys);
        let b = Replica::start("B", &pg.url, &dir.path().join("index-b"), &keys);
        for r in [&a, &b] {
            let ready = http.wait_caught_up(&r.base, Duration::from_secs(30));
            assert!(
                ready["backend"].as_str().unwrap().starts_with("postgres"),
                "replica {}: {ready}",
                r.name
            );
        }
        World {
            a,
            b,
            pg,
            http,
            _dir: dir,
        }
    }
}

// ---------------------------------------------------------------------------------
// Generated documents for the ingest jobs.

/// `n` documents of tenant shop named `PREFIX-NNNN`, each of [`SECTIONS`] sections
/// carrying a token of their own (`PREFIXtNNNNpJ`).
fn generated(prefix: &str, n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|i| {
            let mut s = format!(
                "---\nid: {prefix}-{i:04}\nversion: \"1\"\ntitle: Generated {prefix} {i} sample\ntenant: shop\n---\n# Generated {prefix} {i} sample\n\n"
            );
            for j in 0..SECTIONS {
                s.push_str(&format!(
                    "## Part {j}\nDocument {i} part {j} carries {} and ordinary words about parcels and refunds.\n\n",
                    token(prefix, i, j)
                ));
            }
            (format!("{prefix}-{i:04}.md"), s)
        })
        .collect()
}

fn token(prefix: &str, i: usize, j: usize) -> String {
    format!("{prefix}t{i:04}p{j}")
}

fn upload_body(files: &[(String, String)]) -> Value {
    json!({"files": files.iter().map(|(n, c)| json!({"name": n, "content": c})).collect::<Vec<_>>()})
}

/// Starts an ingest job of `files` on `base`; its id.
fn start_job(http: &Http, base: &str, files: &[(String, String)]) -> String {
    let (status, job) = http.post(base, "/v1/jobs/ingest", KEY_ZHANG, &upload_body(files));
    assert_eq!(status, 202, "{job}");
    job["id"].as_str().unwrap().to_string()
}

/// Checks, through the replica at `base` (caught up first), that every generated
/// document `PREFIX-*` it serves is whole: all its chunks in the catalog's view, and —
/// for a sample — every section found by its own token in the lexical index, while the
/// sampled absent ones are found by none. Returns the documents present.
fn whole_or_absent(
    http: &Http,
    base: &str,
    prefix: &str,
    n: usize,
    rng: &mut StdRng,
    what: &str,
) -> BTreeSet<usize> {
    http.wait_caught_up(base, Duration::from_secs(30));
    let (status, docs) = http.get(base, &format!("/v1/documents?now={NOW}"), KEY_ZHANG);
    assert_eq!(status, 200, "{docs}");
    let mut present = BTreeSet::new();
    for d in docs.as_array().unwrap() {
        let id = d["doc_id"].as_str().unwrap();
        let Some(i) = id.strip_prefix(&format!("{prefix}-")) else {
            continue;
        };
        assert_eq!(
            d["chunks"], SECTIONS,
            "{what}: {id} is half there ({} of {SECTIONS} chunks)",
            d["chunks"]
        );
        assert!(present.insert(i.parse::<usize>().unwrap()), "{id} twice");
    }
    // The index side, for a sample of present and absent documents.
    let sample: BTreeSet<usize> = (0..12).map(|_| rng.gen_range(0..n)).collect();
    for i in sample {
        for j in 0..SECTIONS {
            let tok = token(prefix, i, j);
            let (status, r) = http.search(base, KEY_ZHANG, &tok, "bm25", 5);
            assert_eq!(status, 200, "{r}");
            let found = r["hits"].as_array().unwrap().iter().any(|h| {
                h["doc_id"] == format!("{prefix}-{i:04}")
                    && h["text"].as_str().unwrap().contains(&tok)
            });
            assert_eq!(
                found,
                present.contains(&i),
                "{what}: section {j} of {prefix}-{i:04} is {} the lexical index but the document is {} the catalog",
                if found { "in" } else { "not in" },
                if present.contains(&i) { "in" } else { "not in" }
            );
        }
    }
    present
}

/// Resends `files` to `base` as a job and checks that it completes them: the ones
/// already stored are skipped as unchanged, the rest added, and then all are whole.
fn resend_completes(
    http: &Http,
    base: &str,
    prefix: &str,
    files: &[(String, String)],
    landed: usize,
    rng: &mut StdRng,
) {
    let t = Instant::now();
    let id = start_job(http, base, files);
    let job = http.wait_job(base, &id, Duration::from_secs(180));
    eprintln!(
        "resent: {} added, {} unchanged, in {}",
        job["result"]["documents_added"],
        job["result"]["documents_unchanged"],
        seconds(t.elapsed())
    );
    assert_eq!(job["status"], "succeeded", "the resent upload: {job}");
    let result = &job["result"];
    assert_eq!(result["documents_unchanged"], landed, "{job}");
    assert_eq!(result["documents_added"], files.len() - landed, "{job}");
    let present = whole_or_absent(http, base, prefix, files.len(), rng, "after the resend");
    assert_eq!(
        present.len(),
        files.len(),
        "not every document after the resend"
    );
}

/// How PostgreSQL is interrupted under a job.
#[derive(Clone, Copy, Debug)]
enum Interruption {
    /// SIGKILL of the postmaster: a crash. Its backends run on until they next wait, so
    /// a commit in flight may still land, and the pool reconnects once the server is
    /// back: the job may fail or ride it out.
    Kill,
    /// Fast shutdown: every session is ended and its open transaction rolled back, so a
    /// job in the middle of a commit fails.
    Stop,
}

/// Starts an ingest job on `base`; once it runs (past a random point), interrupts
/// PostgreSQL and starts it again. Then: the job has ended (`failed` with an error, or
/// `succeeded` with every document there), the replica is ready again and searches,
/// every document is whole or absent, and a resent upload completes the rest. A job
/// that ended before the interruption exercised nothing: tried again with a bigger
/// batch. Returns whether the job failed.
fn restart_under_job(
    http: &Http,
    pg: &Postgres,
    base: &str,
    how: Interruption,
    rng: &mut StdRng,
    seed: u64,
) -> bool {
    for (attempt, n) in [600, 1200, 2400].into_iter().enumerate() {
        let prefix = format!("{how:?}{attempt}").to_lowercase();
        let files = generated(&prefix, n);
        let total = n * SECTIONS;
        let threshold = rng.gen_range(1..=total * 3 / 4) as u64;
        let id = start_job(http, base, &files);
        let t = Instant::now();
        let ran_past = loop {
            let (status, job) = http.get(base, &format!("/v1/jobs/{id}"), KEY_ZHANG);
            assert_eq!(status, 200, "{job}");
            if job["status"] == "running" && job["done"].as_u64().unwrap() >= threshold {
                break true;
            }
            if matches!(job["status"].as_str(), Some("succeeded" | "failed")) {
                eprintln!("{how:?} {attempt}: the job ended before PostgreSQL went: {job}");
                break false;
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "job never ran: {job}"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        if !ran_past {
            continue;
        }
        // Into the commit that follows the progress reached (commits of 256 documents
        // take a second or more), rather than at its very start, where the pool may
        // still be waiting for a connection and ride the restart out.
        std::thread::sleep(Duration::from_millis(rng.gen_range(100..400)));
        match how {
            Interruption::Kill => pg.kill(),
            Interruption::Stop => pg.stop(),
        }
        let down = pg.restart();
        let back = Instant::now();
        // The replica recovers: ready and caught up again, and every mode searches.
        http.wait_caught_up(base, Duration::from_secs(30));
        let ready_after = back.elapsed();
        for mode in ["bm25", "vector", "hybrid", "graph"] {
            let (status, r) = http.search(base, KEY_U7, "耳机 退货", mode, 5);
            assert_eq!(status, 200, "{how:?}: {mode} after the restart: {r}");
            assert!(!r["hits"].as_array().unwrap().is_empty(), "{mode}: {r}");
        }
        let job = http.wait_job(base, &id, Duration::from_secs(120));
        eprintln!(
            "{how:?} {attempt}: PostgreSQL back after {}, the replica ready {} later; the job: {job}",
            seconds(down),
            seconds(ready_after)
        );
        let failed = job["status"] == "failed";
        if failed {
            assert!(
                !job["error"].as_str().unwrap_or_default().is_empty(),
                "failed without an error: {job}"
            );
        }
        let landed = whole_or_absent(http, base, &prefix, n, rng, &format!("after {how:?}"));
        eprintln!(
            "{how:?} {attempt}: {} of {n} documents landed",
            landed.len()
        );
        if !failed {
            assert_eq!(landed.len(), n, "seed {seed}: the job succeeded: {job}");
        }
        resend_completes(http, base, &prefix, &files, landed.len(), rng);
        if failed || matches!(how, Interruption::Kill) {
            return failed;
        }
    }
    false
}

// ---------------------------------------------------------------------------------
// The corpus: words to query, and what each principal must never see.

/// Words of the scenario documents' bodies: Latin words and numbers (with inner
/// hyphens), and two- and three-character pieces of the Chinese runs. Sorted, so that
/// a seed always picks the same queries.
fn corpus_words() -> Vec<String> {
    let mut words = BTreeSet::new();
    for tenant in ["shop", "acme"] {
        for e in std::fs::read_dir(scenarios().join(tenant).join("docs")).unwrap() {
            let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
            // The body: after the front matter's closing line.
            let body = text.splitn(3, "---\n").nth(2).unwrap_or(&text);
            let (mut latin, mut han) = (String::new(), Vec::<char>::new());
            for c in body.chars().chain(std::iter::once(' ')) {
                if c.is_ascii_alphanumeric() || (c == '-' && !latin.is_empty()) {
                    latin.push(c);
                } else {
                    let w = latin.trim_end_matches('-');
                    if w.len() >= 2 {
                        words.insert(w.to_string());
                    }
                    latin.clear();
                }
                if ('\u{4e00}'..='\u{9fff}').contains(&c) {
                    han.push(c);
                } else {
                    for n in [2, 3] {
                        for w in han.windows(n) {
                            words.insert(w.iter().collect::<String>());
                        }
                    }
                    han.clear();
                }
            }
        }
    }
    words.into_iter().collect()
}

/// Strings that stand for something the principal may not read, each with the one
/// corpus file that holds it (checked: no other ingested file does).
fn hidden_from(principal: &str) -> Vec<(&'static str, &'static str)> {
    // Readable only by support and sre (zhang), or by supply-chain (zhang).
    let only_zhang = [
        ("incident-4821", "shop/docs/incident-4821.md"),
        ("CHG-1093", "shop/docs/incident-4821.md"),
        ("supplier-notice-S-8", "shop/docs/supplier-notice-S-8.md"),
        ("深圳八号电池", "shop/docs/supplier-notice-S-8.md"),
        ("北辰科技", "shop/records/customers.jsonl"),
    ];
    // Readable by sre only: nobody here.
    let sre = [
        ("risk-alerts-2026-11", "shop/docs/risk-alerts-2026-11.md"),
        ("RA-77", "shop/docs/risk-alerts-2026-11.md"),
    ];
    let acme = [
        ("acme-payment-gateway", "acme/docs/acme-payment-gateway.md"),
        ("acme-ledger", "acme/docs/acme-payment-gateway.md"),
    ];
    let shop = [
        ("community-faq", "shop/docs/community-faq.md"),
        ("quality-policy", "shop/docs/quality-policy.md"),
        ("product-manual-P-204", "shop/docs/product-P-204.md"),
        ("payment-api", "shop/docs/payment-api.md"),
    ];
    // Orders: their owner's, and support's.
    let user1_order = [("A100", "shop/records/orders.jsonl")];
    let u7_order = [("A123", "shop/records/orders.jsonl")];
    let mut v = Vec::new();
    match principal {
        "u7" => v.extend(
            only_zhang
                .iter()
                .chain(&sre)
                .chain(&acme)
                .chain(&user1_order),
        ),
        "u8" => v.extend(
            only_zhang
                .iter()
                .chain(&sre)
                .chain(&acme)
                .chain(&user1_order)
                .chain(&u7_order),
        ),
        "zhang" => v.extend(sre.iter().chain(&acme)),
        "acme-admin" => v.extend(
            only_zhang
                .iter()
                .chain(&sre)
                .chain(&shop)
                .chain(&user1_order),
        ),
        _ => unreachable!(),
    }
    v
}

/// Every ingested scenario file (documents, records, principals), relative to the
/// scenarios directory, with its text.
fn corpus_files() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for dir in ["shop/docs", "shop/records", "acme/docs"] {
        for e in std::fs::read_dir(scenarios().join(dir)).unwrap() {
            let p = e.unwrap().path();
            let name = format!("{dir}/{}", p.file_name().unwrap().to_string_lossy());
            out.push((name, std::fs::read_to_string(&p).unwrap()));
        }
    }
    out.push((
        "shop/principals.yaml".into(),
        std::fs::read_to_string(scenarios().join("shop/principals.yaml")).unwrap(),
    ));
    out
}

/// The test's own premise: each hidden marker is held by its one file only (else a
/// marker found in a response would prove nothing).
fn check_markers() {
    let files = corpus_files();
    for p in ["u7", "u8", "zhang", "acme-admin"] {
        for (marker, file) in hidden_from(p) {
            let holders: Vec<&str> = files
                .iter()
                .filter(|(_, text)| text.contains(marker))
                .map(|(n, _)| n.as_str())
                .collect();
            assert_eq!(holders, [file], "marker {marker:?}");
        }
    }
}

/// The response with its per-request fields removed, after checking it holds no field
/// beyond those known. A search answer (`hits`, `conflicts` and `conflicts_total`,
/// `subgraph`, `reports`) carries no per-request field at all: nothing is removed. An error body carries the
/// request's id (`request_id`, unique to each request by design): removed; `message`,
/// `code` and `type` are kept. `degraded` (the deadline passed and BM25 answered) would
/// depend on each replica's timing; it is refused rather than removed, since with the
/// hash embedder on this corpus a search never comes near its 10 s deadline.
fn without_per_request_fields(status: u16, mut v: Value, context: &str) -> Value {
    let obj = v
        .as_object_mut()
        .unwrap_or_else(|| panic!("{context}: not a JSON object"));
    let known: &[&str] = if status == 200 {
        &[
            "hits",
            "conflicts",
            "conflicts_total",
            "subgraph",
            "reports",
        ]
    } else {
        obj.remove("request_id")
            .unwrap_or_else(|| panic!("{context}: an error body without its request id"));
        &["message", "code", "type"]
    };
    for k in obj.keys() {
        assert!(
            known.contains(&k.as_str()),
            "{context}: unexpected field {k:?}"
        );
    }
    v
}

// ---------------------------------------------------------------------------------
// The test.

/// The run's seed: `DOSSIER_TEST_SEED`, else the clock; printed so a failure can be
/// repeated.
fn seed() -> u64 {
    let seed = std::env::var("DOSSIER_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("seed {seed} (DOSSIER_TEST_SEED={seed} repeats this run)");
    seed
}

#[test]
fn two_replicas_of_a_postgres_store_agree_follow_each_other_and_survive_kills() {
    let started = Instant::now();
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    check_markers();

    // Not taken apart: the world's fields drop in order (replicas, database, directory)
    // also when a check panics.
    let mut world = World::new(started);
    let World { a, b, pg, http, .. } = &mut world;

    // 3. A write through A, served by B.
    let mut delays = Vec::new();
    for v in 1..=3 {
        let marker = format!("probe{seed:x}v{v}");
        let mut doc = format!(
            "---\nid: replica-probe\nversion: \"{v}\"\ntitle: Replica probe\ntenant: shop\neffective_from: 2026-0{v}-01\nsource_uri: docs://probe/{v}\n"
        );
        if v > 1 {
            doc.push_str(&format!(
                "supersedes: replica-probe@{}\nsupersedes_evidence: probe release {v}\n",
                v - 1
            ));
        }
        doc.push_str(&format!(
            "---\n# Replica probe\n\n## Body\nVersion {v} carries {marker}.\n"
        ));
        let path = if v == 1 {
            "/v1/documents".to_string()
        } else {
            "/v1/documents/replica-probe/versions".to_string()
        };
        let files = [(format!("replica-probe-{v}.md"), doc)];
        let (status, report) = http.post(&a.base, &path, KEY_ZHANG, &upload_body(&files));
        assert_eq!(status, 200, "{report}");
        assert_eq!(report["documents_added"], 1, "{report}");
        // A answered: the commit is in the database. Now B must serve it.
        let t = Instant::now();
        loop {
            let (status, r) = http.search(&b.base, KEY_U7, &marker, "bm25", 5);
            assert_eq!(status, 200, "{r}");
            if r["hits"].as_array().unwrap().iter().any(|h| {
                h["doc_id"] == "replica-probe"
                    && h["version"].as_str() == Some(v.to_string().as_str())
            }) {
                break;
            }
            assert!(
                t.elapsed() < REPLICATION_BOUND,
                "B did not serve version {v} written through A within {}",
                seconds(REPLICATION_BOUND)
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        delays.push(t.elapsed());
    }
    eprintln!(
        "replication A -> B: {}",
        delays
            .iter()
            .map(|d| seconds(*d))
            .collect::<Vec<_>>()
            .join(", ")
    );

    // 4. Both replicas answer every caller alike, and only within the caller's scope.
    let ra = http.wait_caught_up(&a.base, Duration::from_secs(10));
    let rb = http.wait_caught_up(&b.base, Duration::from_secs(10));
    assert_eq!(ra["served_generation"], rb["served_generation"]);
    let words = corpus_words();
    let callers = [
        ("u7", KEY_U7),
        ("u8", KEY_U8),
        ("zhang", KEY_ZHANG),
        ("acme-admin", KEY_ACME),
    ];
    let mut compared = 0;
    let mut restricted_seen_by_zhang = BTreeSet::new();
    let mut queries: Vec<String> = (0..10)
        .map(|_| {
            let n = rng.gen_range(1..=3);
            (0..n)
                .map(|_| words[rng.gen_range(0..words.len())].as_str())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    // And queries aimed at the restricted documents themselves.
    queries.extend([
        "CHG-1093 支付网关超时".to_string(),
        "深圳八号电池 鼓包".to_string(),
    ]);
    for query in &queries {
        for (principal, key) in callers {
            for mode in ["bm25", "vector", "hybrid", "graph"] {
                let context = format!("seed {seed}, {principal}, {mode}, {query:?}");
                let (sa, va) = http.search(&a.base, key, query, mode, 8);
                let (sb, vb) = http.search(&b.base, key, query, mode, 8);
                assert_eq!(sa, sb, "{context}: status A {va} B {vb}");
                assert_eq!(sa, 200, "{context}: {va}");
                let (text_a, text_b) = (va.to_string(), vb.to_string());
                let (va, vb) = (
                    without_per_request_fields(sa, va, &format!("{context}, A")),
                    without_per_request_fields(sb, vb, &format!("{context}, B")),
                );
                assert_eq!(va, vb, "{context}: A and B answer differently");
                for (marker, file) in hidden_from(principal) {
                    for (r, text) in [("A", &text_a), ("B", &text_b)] {
                        assert!(
                            !text.contains(marker),
                            "{context}: replica {r} shows {principal} {marker:?} (from {file}), which {principal} may not read: {text}"
                        );
                    }
                }
                if principal == "zhang" {
                    for h in va["hits"].as_array().unwrap() {
                        restricted_seen_by_zhang.insert(h["doc_id"].as_str().unwrap().to_string());
                    }
                }
                compared += 1;
            }
        }
    }
    // The absence for u7 means something only if zhang does see those documents.
    for d in ["incident-4821", "supplier-notice-S-8"] {
        assert!(
            restricted_seen_by_zhang.contains(d),
            "seed {seed}: zhang never found {d}, so its absence for u7 proves nothing"
        );
    }
    // Listings, and what an unknown key and a non-admin key read.
    for (principal, key) in callers {
        let (sa, la) = http.get(&a.base, &format!("/v1/documents?now={NOW}"), key);
        let (sb, lb) = http.get(&b.base, &format!("/v1/documents?now={NOW}"), key);
        assert_eq!((sa, &la), (sb, &lb), "{principal}'s document list");
        let text = la.to_string();
        for (marker, file) in hidden_from(principal) {
            assert!(
                !text.contains(marker),
                "{principal} lists {marker:?} ({file})"
            );
        }
    }
    for (what, key, path, body) in [
        (
            "unknown key, search",
            KEY_UNKNOWN,
            "/v1/search",
            Some(json!({"query": "耳机"})),
        ),
        ("unknown key, documents", KEY_UNKNOWN, "/v1/documents", None),
        ("customer key, jobs", KEY_U7, "/v1/jobs", None),
        (
            "customer key, hidden document",
            KEY_U7,
            "/v1/documents/incident-4821",
            None,
        ),
        (
            "customer key, unknown document",
            KEY_U7,
            "/v1/documents/no-such-doc",
            None,
        ),
    ] {
        let ask = |base: &str| match &body {
            Some(b) => http.post(base, path, key, b),
            None => http.get(base, path, key),
        };
        let ((sa, va), (sb, vb)) = (ask(&a.base), ask(&b.base));
        assert_eq!(sa, sb, "{what}");
        assert!(sa >= 400, "{what}: {sa} {va}");
        assert_eq!(
            without_per_request_fields(sa, va, what),
            without_per_request_fields(sb, vb, what),
            "{what}"
        );
    }
    // A hidden document reads exactly like one that does not exist.
    let hidden = http.get(&b.base, "/v1/documents/incident-4821", KEY_U7);
    let unknown = http.get(&b.base, "/v1/documents/no-such-doc", KEY_U7);
    assert_eq!(
        without_per_request_fields(hidden.0, hidden.1, "hidden"),
        without_per_request_fields(unknown.0, unknown.1, "unknown")
    );
    eprintln!(
        "{compared} searches compared on both replicas ({})",
        seconds(started.elapsed())
    );

    // 5. A killed in the middle of an ingest job.
    let files = generated("kill", 600);
    let total = files.len() * SECTIONS;
    let threshold = rng.gen_range(1..=total * 3 / 4) as u64;
    let id = start_job(http, &a.base, &files);
    let t = Instant::now();
    let progress = loop {
        let (status, job) = http.get(&a.base, &format!("/v1/jobs/{id}"), KEY_ZHANG);
        assert_eq!(status, 200, "{job}");
        assert!(
            matches!(job["status"].as_str(), Some("queued" | "running")),
            "seed {seed}: the job ended before the kill (threshold {threshold}): {job}"
        );
        // Killed once it runs past the threshold and B already shows it (the job is
        // in the database: see the report for a job killed before its first sync).
        if job["status"] == "running" && job["done"].as_u64().unwrap() >= threshold {
            let (on_b, _) = http.get(&b.base, &format!("/v1/jobs/{id}"), KEY_ZHANG);
            if on_b == 200 {
                // Somewhere inside the commit that follows (each takes a second or
                // more), not always at its start.
                std::thread::sleep(Duration::from_millis(rng.gen_range(0..500)));
                a.kill();
                break job;
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "job never ran: {job}"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let killed_at = Instant::now();
    eprintln!(
        "A killed at {}/{total} chunks of job {id}",
        progress["done"]
    );
    let failed = loop {
        let (status, job) = http.get(&b.base, &format!("/v1/jobs/{id}"), KEY_ZHANG);
        assert_eq!(status, 200, "B does not show A's job {id}: {job}");
        match job["status"].as_str() {
            Some("failed") => break job,
            Some("queued" | "running") => {}
            _ => panic!("A's job after A was killed: {job}"),
        }
        assert!(
            killed_at.elapsed() < ABANDONED_BOUND,
            "B did not report A's job failed within {}: {job}",
            seconds(ABANDONED_BOUND)
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let abandoned_after = killed_at.elapsed();
    let error = failed["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("the replica running it (") && error.contains(") stopped"),
        "the error does not say the job's replica stopped: {failed}"
    );
    assert!(failed["finished_at"].is_string(), "{failed}");
    eprintln!(
        "B reported A's job failed {} after the kill: {error}",
        seconds(abandoned_after)
    );
    let landed = whole_or_absent(
        http,
        &b.base,
        "kill",
        files.len(),
        &mut rng,
        "after A's kill",
    );
    eprintln!(
        "{} of {} documents landed before the kill",
        landed.len(),
        files.len()
    );
    resend_completes(http, &b.base, "kill", &files, landed.len(), &mut rng);
    eprintln!("resent to B ({})", seconds(started.elapsed()));

    // 6. PostgreSQL crashed (SIGKILL of the postmaster), then stopped (fast shutdown),
    // each time under a job on B and started again.
    let crashed = restart_under_job(http, pg, &b.base, Interruption::Kill, &mut rng, seed);
    eprintln!(
        "crash of PostgreSQL under a job: the job {} ({})",
        if crashed { "failed" } else { "rode it out" },
        seconds(started.elapsed())
    );
    let stopped = restart_under_job(http, pg, &b.base, Interruption::Stop, &mut rng, seed);
    assert!(
        stopped,
        "seed {seed}: no fast shutdown of PostgreSQL landed while a job was committing"
    );
    eprintln!(
        "fast shutdown of PostgreSQL under a job ({})",
        seconds(started.elapsed())
    );

    // 7. The replicas killed, then PostgreSQL stopped (the guards also do this when a
    // check above fails).
    drop(world);
    eprintln!(
        "done in {}; replication delays {}; A's job reported failed {} after the kill",
        seconds(started.elapsed()),
        delays
            .iter()
            .map(|d| seconds(*d))
            .collect::<Vec<_>>()
            .join(", "),
        seconds(abandoned_after)
    );
}

/// Defect: a job was answered `202` with its id before its replica had written it to
/// the database (that happened on the follower's next sync, up to `--follow-ms`
/// later), so a replica killed in that window left a job no other replica knew: `404`
/// everywhere, forever, instead of `failed`. A job is now recorded before its answer.
#[test]
fn a_job_whose_replica_is_killed_right_after_accepting_it_is_reported_failed() {
    let started = Instant::now();
    let mut world = World::new(started);
    let World { a, b, http, .. } = &mut world;
    let files = generated("early", 300);
    let id = start_job(http, &a.base, &files);
    a.kill();
    let killed_at = Instant::now();
    loop {
        let (status, job) = http.get(&b.base, &format!("/v1/jobs/{id}"), KEY_ZHANG);
        if status == 200 && job["status"] == "failed" {
            break;
        }
        assert!(
            killed_at.elapsed() < ABANDONED_BOUND,
            "job {id}, accepted by A (killed at once), on B after {}: {status} {job}",
            seconds(ABANDONED_BOUND)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut rng = StdRng::seed_from_u64(seed());
    whole_or_absent(
        http,
        &b.base,
        "early",
        files.len(),
        &mut rng,
        "after A's kill",
    );
}
