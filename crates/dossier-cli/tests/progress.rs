//! Long ingests say that they are working wherever stderr goes, and a document past the
//! chunk cap is refused by the real binary (issue 39). The hash embedder throughout.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_dossier");

/// Runs `dossier --store STORE --embedder hash:64 ARGS` with stdout and stderr sent to
/// files, as under a service manager or `> log 2>&1`; returns the exit code, stdout
/// and stderr.
fn run_to_files(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> (Option<i32>, String, String) {
    let out = dir.join("stdout.log");
    let err = dir.join("stderr.log");
    let mut c = Command::new(BIN);
    c.env_remove("DOSSIER_STORE")
        .env_remove("DOSSIER_EMBEDDER")
        .env_remove("DOSSIER_PROGRESS_AFTER")
        .arg("--store")
        .arg(dir.join("store"))
        .arg("--embedder")
        .arg("hash:64")
        .args(args)
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out).unwrap())
        .stderr(fs::File::create(&err).unwrap());
    for (k, v) in env {
        c.env(k, v);
    }
    let status = c.status().expect("run dossier");
    (
        status.code(),
        fs::read_to_string(out).unwrap(),
        fs::read_to_string(err).unwrap(),
    )
}

fn corpus(dir: &Path, passages: usize) -> String {
    let text: String = (0..passages)
        .map(|i| {
            format!("{{\"id\":\"p{i}\",\"text\":\"Passage {i} says something of its own.\"}}\n")
        })
        .collect();
    let path = dir.join("corpus.jsonl");
    fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn ingest_prints_plain_progress_lines_when_stderr_is_a_file() {
    // The probe's ingest ran for half an hour with nothing in its log: progress was a
    // bar, drawn only on a terminal.
    let dir = tempfile::tempdir().unwrap();
    let path = corpus(dir.path(), 200);
    let (code, stdout, stderr) = run_to_files(
        dir.path(),
        &[("DOSSIER_PROGRESS_AFTER", "0")],
        &["ingest", &path],
    );
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("ingest: embedding "))
        .collect();
    let tenths: Vec<&str> = lines
        .iter()
        .filter(|l| l.contains(" chunks (") && l.ends_with(" s"))
        .copied()
        .collect();
    // A line at each tenth of the work (the first once the work begins).
    assert!(tenths.len() >= 10, "{stderr}");
    assert!(
        tenths
            .iter()
            .any(|l| l.starts_with("ingest: embedding 100/200 chunks (50%), ")),
        "{stderr}"
    );
    assert!(
        lines
            .last()
            .is_some_and(|l| l.starts_with("ingest: embedding done, 200/200 chunks, ")),
        "{stderr}"
    );
    // Plain lines, not a bar's control characters.
    assert!(
        !stderr.contains('\r') && !stderr.contains('\u{1b}'),
        "{stderr:?}"
    );
    assert!(stdout.contains("200 documents added"), "{stdout}");
}

#[test]
fn a_short_ingest_prints_no_progress_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let path = corpus(dir.path(), 20);
    let (code, stdout, stderr) = run_to_files(dir.path(), &[], &["ingest", &path]);
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(!stderr.contains("ingest: "), "{stderr}");
}

#[test]
fn a_document_past_max_chunks_per_document_is_refused_by_path_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let long: String = (0..400)
        .map(|i| format!("Sentence {i} of a long passage, with words enough to fill it. "))
        .collect();
    let text = format!(
        "{{\"id\":\"short\",\"text\":\"A short passage.\"}}\n{{\"id\":\"long\",\"text\":\"{long}\"}}\n"
    );
    let path = dir.path().join("c.jsonl");
    fs::write(&path, text).unwrap();
    let path = path.to_str().unwrap();
    let (code, stdout, stderr) = run_to_files(
        dir.path(),
        &[],
        &["ingest", "--max-chunks-per-document", "5", path],
    );
    assert_eq!(code, Some(2), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stderr.contains(&format!("skipped: {path}:2: "))
            && stderr.contains("more than the 5 one document may have"),
        "{stderr}"
    );
    assert!(stdout.contains("1 documents added"), "{stdout}");
    // Raised, the same passage lands.
    let (code, stdout, stderr) = run_to_files(
        dir.path(),
        &[],
        &["ingest", "--max-chunks-per-document", "100", path],
    );
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("1 documents added"), "{stdout}");
    let (code, _, stderr) = run_to_files(
        dir.path(),
        &[],
        &["ingest", "--max-chunks-per-document", "0", path],
    );
    assert_eq!(code, Some(1), "{stderr}");
}
