//! Schema-driven fuzzing of the real server against its own `/openapi.json`, with
//! schemathesis (PyPI; `scripts/setup-schemathesis` installs it into `.tools/`): every
//! route is sent generated valid and invalid requests, as an admin and as a plain
//! reader, and every response must be no 5xx, a documented status, the documented
//! content type and a body that validates against the route's schema.
//!
//! `DOSSIER_FUZZ_EXAMPLES` sets the examples per route and phase (default 25); the
//! seed is printed so a failure can be replayed with `DOSSIER_FUZZ_SEED`.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{fresh_engine, Server};
use dossier_server::{LimitConfig, ServerConfig};

fn schemathesis() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../.tools/schemathesis/bin/schemathesis");
    assert!(
        p.is_file(),
        "{} missing: run scripts/setup-schemathesis (scripts/test does)",
        p.display()
    );
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_holds_its_own_schema_under_generated_requests() {
    let (_dir, engine) = fresh_engine();
    // Rate limits would answer 429 to a fuzzer; they have their own tests.
    let config = ServerConfig {
        limits: LimitConfig {
            rate_per_sec: 1e6,
            burst: 1_000_000,
            ..LimitConfig::default()
        },
        ..ServerConfig::default()
    };
    let s = Server::start_with(
        engine,
        &[("key-admin", "zhang", true), ("key-reader", "u7", false)],
        config,
        None,
    )
    .await;
    let examples = std::env::var("DOSSIER_FUZZ_EXAMPLES").unwrap_or_else(|_| "25".into());
    let seed: u64 = std::env::var("DOSSIER_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    let schema = format!("{}/openapi.json", s.base);
    let bin = schemathesis();
    let work = tempfile::tempdir().unwrap();
    for key in ["key-admin", "key-reader"] {
        let (bin, schema, examples, dir) = (
            bin.clone(),
            schema.clone(),
            examples.clone(),
            work.path().to_path_buf(),
        );
        let out = tokio::task::spawn_blocking(move || {
            Command::new(bin)
                .current_dir(dir)
                .args(["run", &schema])
                .args(["-H", &format!("Authorization: Bearer {key}")])
                .args([
                    "--checks",
                    "not_a_server_error,response_schema_conformance,status_code_conformance,content_type_conformance",
                ])
                .args(["-n", &examples, "--seed", &seed.to_string()])
                .args(["--request-timeout", "30"])
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let summary: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("generated") || l.contains("Tested:"))
            .collect();
        eprintln!("schemathesis as {key}, seed {seed}: {summary:?}");
        assert!(
            out.status.success(),
            "schemathesis as {key} (seed {seed}) found failures:\n{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    s.stop().await;
}
