//! Crash safety and bounded shutdown of the real binary: `dossier ingest` and an
//! upload-serving `dossier serve` are killed with SIGKILL at random moments, many
//! times; after each kill the store must open with every document wholly present or
//! wholly absent (all its chunks in the catalog, the BM25 index and the vectors), and a
//! final ingest must end equal to a clean one. `dossier serve` must end within its
//! drain time after SIGTERM even with a long job running.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_dossier");
/// Sections per document: a document is "whole" only with all of them.
const SECTIONS: usize = 3;

fn doc_text(i: usize) -> String {
    let mut s = format!(
        "---\nid: doc-{i:04}\nversion: \"1\"\ntitle: Crash test document {i}\ntenant: shop\n---\n# Crash test document {i}\n\n"
    );
    for j in 0..SECTIONS {
        s.push_str(&format!(
            "## Part {j}\nDocument {i} part {j} mentions token tk{i:04}p{j} and ordinary words about parcels and refunds.\n\n"
        ));
    }
    s
}

fn dossier(store: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.arg("--store").arg(store).args(["--embedder", "hash:64"]);
    c
}

/// Document id → (chunks in the catalog), after checking both indexes hold exactly the
/// catalog's chunks. Opening the store replays whatever the indexes missed.
fn inspect(store: &Path) -> BTreeMap<String, usize> {
    let engine = dossier_engine::Engine::with_embedder(
        store,
        "hash:64",
        Box::new(dossier_embed::HashEmbedder::new(64)),
    )
    .expect("the store opens after a kill");
    let s = engine.store();
    let chunks = s.catalog().chunk_count().unwrap();
    let active = s.active();
    assert_eq!(active.bm25.len(), chunks, "BM25 and the catalog disagree");
    assert_eq!(
        active.vectors.read().len() as u64,
        chunks,
        "the vector index and the catalog disagree"
    );
    s.view()
        .entries()
        .map(|e| (e.meta.doc_id.clone(), e.seqs.len()))
        .collect()
}

fn assert_whole(docs: &BTreeMap<String, usize>, what: &str) {
    for (id, n) in docs {
        assert_eq!(
            *n, SECTIONS,
            "{what}: {id} is half there ({n} of {SECTIONS} chunks)"
        );
    }
}

/// Kills `child` after a random moment in `range_ms` (or lets it finish first).
fn kill_at_random(mut child: Child, range_ms: std::ops::Range<u64>) -> bool {
    let wait = rand::thread_rng().gen_range(range_ms);
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(wait) {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().expect("SIGKILL");
    child.wait().unwrap();
    true
}

/// The newest `gen.json` of the store's index generations: rewritten after each
/// commit has reached the indexes (opening a store does not touch it).
fn catalog_stamp(store: &Path) -> Option<std::time::SystemTime> {
    std::fs::read_dir(store.join("indexes"))
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            std::fs::metadata(e.path().join("gen.json"))
                .ok()?
                .modified()
                .ok()
        })
        .max()
}

/// Kills `child` a random few milliseconds after its first commit reached the indexes
/// (or lets it finish).
fn kill_after_first_commit(mut child: Child, store: &Path) -> bool {
    let before = catalog_stamp(store);
    let t = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        if catalog_stamp(store) != before {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "no commit in two minutes"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(Duration::from_millis(rand::thread_rng().gen_range(0..10)));
    child.kill().expect("SIGKILL");
    child.wait().unwrap();
    true
}

#[test]
fn ingest_killed_at_random_moments_leaves_whole_documents_and_ends_equal_to_a_clean_run() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("corpus");
    let store = dir.path().join("store");
    let (rounds, per_round) = (6, 300);
    let (mut kills, mut partial) = (0, 0);
    for round in 0..rounds {
        // New documents every round, in a folder of their own, so every run has work
        // to be killed in (and re-reading earlier rounds does not eat the window).
        let batch = docs.join(format!("round-{round:02}"));
        std::fs::create_dir_all(&batch).unwrap();
        for i in round * per_round..(round + 1) * per_round {
            std::fs::write(batch.join(format!("doc-{i:04}.md")), doc_text(i)).unwrap();
        }
        let child = dossier(&store)
            .arg("ingest")
            .arg(&batch)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Even rounds: a random moment. Odd rounds: right after the run's first commit
        // lands (the catalog file changes), so a run is cut between two commits.
        let killed = if round % 2 == 0 {
            kill_at_random(child, 50..1500)
        } else {
            kill_after_first_commit(child, &store)
        };
        if killed {
            kills += 1;
        }
        let landed = inspect(&store);
        assert_whole(&landed, &format!("after kill {round}"));
        if !landed.len().is_multiple_of(per_round) {
            partial += 1;
        }
        eprintln!(
            "round {round}: {} of {} documents whole",
            landed.len(),
            (round + 1) * per_round
        );
    }
    assert!(
        kills >= rounds / 2,
        "only {kills} of {rounds} kills landed mid-ingest"
    );
    assert!(partial > 0, "no kill landed between two commits of a run");
    let out = dossier(&store).arg("ingest").arg(&docs).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let clean_store = dir.path().join("clean");
    let out = dossier(&clean_store)
        .arg("ingest")
        .arg(&docs)
        .output()
        .unwrap();
    assert!(out.status.success());
    let (after, clean) = (inspect(&store), inspect(&clean_store));
    assert_eq!(after, clean, "the final ingest differs from a clean one");
    assert_eq!(after.len(), rounds * per_round);
    eprintln!("{kills} kills of `dossier ingest` survived, {partial} of them mid-run with a part committed");
}

/// A running `dossier serve`: its process and address.
struct Serve {
    child: Child,
    base: String,
}

fn serve(store: &Path, keys: &Path, extra: &[&str]) -> Serve {
    let mut child = dossier(store)
        .args(["serve", "--addr", "127.0.0.1:0", "--keys"])
        .arg(keys)
        .args(["--quiet"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let base = loop {
        let line = lines.next().expect("serve printed its address").unwrap();
        if let Some(rest) = line.split("serving on ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    // Keep draining stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Serve { child, base }
}

fn keys_file(dir: &Path) -> PathBuf {
    let p = dir.join("keys.yaml");
    let hash = {
        let out = Command::new("sh")
            .args(["-c", "printf %s key-admin | sha256sum"])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()[..64].to_string()
    };
    std::fs::write(
        &p,
        format!("- {{key_sha256: {hash}, principal: boss, admin: true}}\n"),
    )
    .unwrap();
    p
}

fn principals(dir: &Path) -> PathBuf {
    let p = dir.join("people");
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(
        p.join("principals.yaml"),
        "principals:\n- {id: boss, tenant: shop, groups: [staff]}\n",
    )
    .unwrap();
    p
}

fn upload_job(base: &str, files: &[(String, String)]) -> reqwest::blocking::Response {
    let body = json!({"files": files.iter().map(|(n, c)| json!({"name": n, "content": c})).collect::<Vec<_>>()});
    reqwest::blocking::Client::new()
        .post(format!("{base}/v1/jobs/ingest"))
        .bearer_auth("key-admin")
        .json(&body)
        .send()
        .unwrap()
}

/// A store holding one admin principal, and a keys file with its key (`key-admin`).
fn served_store() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let people = principals(dir.path());
    let ok = dossier(&store).arg("ingest").arg(&people).status().unwrap();
    assert!(ok.success());
    let keys = keys_file(dir.path());
    (dir, store, keys)
}

#[test]
fn serve_killed_during_upload_jobs_leaves_whole_documents() {
    let (_dir, store, keys) = served_store();
    let (mut kills, mut partial, mut before) = (0, 0, 0);
    let per_job = 1200;
    for round in 0..6 {
        let s = serve(&store, &keys, &[]);
        let files: Vec<(String, String)> = (0..per_job)
            .map(|i| {
                let i = round * per_job + i;
                (format!("doc-{i:05}.md"), doc_text(i))
            })
            .collect();
        let r = upload_job(&s.base, &files);
        assert_eq!(r.status().as_u16(), 202, "{:?}", r.text());
        if kill_at_random(s.child, 50..1500) {
            kills += 1;
        }
        let landed = inspect(&store);
        assert_whole(&landed, &format!("after serve kill {round}"));
        if landed.len() - before < per_job {
            partial += 1;
        }
        before = landed.len();
        eprintln!("serve round {round}: {} documents whole", landed.len());
    }
    assert!(partial > 0, "no kill landed while a job was committing");
    eprintln!("{kills} kills of `dossier serve` survived, {partial} of them mid-job");
}

/// Defect: after one large request, SIGTERM left `dossier serve` running forever. Now a
/// shutdown ends within the drain time however long the work in flight would take; the
/// store is whole afterwards.
#[test]
fn sigterm_ends_serve_within_its_drain_time_even_with_a_long_job_running() {
    let (_dir, store, keys) = served_store();
    let s = serve(&store, &keys, &["--drain-ms", "500"]);
    let files: Vec<(String, String)> = (0..3000)
        .map(|i| (format!("doc-{i:04}.md"), doc_text(i)))
        .collect();
    let r = upload_job(&s.base, &files);
    assert_eq!(r.status().as_u16(), 202);
    let job: Value = r.json().unwrap();
    assert!(job["id"].is_string());
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    let mut child = s.child;
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        // Generous: the drain is 0.5 s; a stuck server never ends at all.
        if t.elapsed() > Duration::from_secs(20) {
            child.kill().unwrap();
            panic!("serve still running 20 s after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    eprintln!("serve ended {:?} after SIGTERM ({status})", t.elapsed());
    assert_whole(&inspect(&store), "after SIGTERM");
}
