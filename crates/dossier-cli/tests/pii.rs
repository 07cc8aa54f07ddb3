//! `--pii` through the real binary: a store holding generated phone numbers, e-mail
//! addresses, ID numbers, cards and addresses; `dossier --pii POLICY serve` answers a
//! reader without the grant, and neither its responses nor anything the server writes
//! to stderr (access log, audit lines) holds a value — not even a value the caller put
//! in a path. `dossier ask` and `dossier search` print masked text; a granted reader
//! sees the values; a bad policy is refused with its reason.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use dossier_core::pii::samples;
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_dossier");

fn dossier(store: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.arg("--store").arg(store).args(["--embedder", "hash:64"]);
    c
}

fn sha256(text: &str) -> String {
    let out = Command::new("sh")
        .args(["-c", &format!("printf %s '{text}' | sha256sum")])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_string()
}

struct Corpus {
    values: Vec<String>,
    phone: String,
}

fn corpus(dir: &Path, seed: u64) -> Corpus {
    let phone = samples::cn_mobile(seed);
    let values = vec![
        phone.clone(),
        samples::email(seed + 1),
        samples::cn_id(seed + 2),
        samples::bank_card(seed + 3),
        samples::cn_address(seed + 4),
        samples::en_address(seed + 5),
        samples::us_phone(seed + 6),
    ];
    let c = dir.join("corpus");
    std::fs::create_dir_all(&c).unwrap();
    std::fs::write(
        c.join("desk.md"),
        format!(
            "---\nid: desk\nversion: \"1\"\ntitle: Refund desk\ntenant: tp\n---\n# Refund desk\n\n## Contacts\n\
             For a refund dispute call {} or {} or write to {}. Returns go to {} or {}. \
             Card {} and ID {} are verified first.\n",
            values[0], values[6], values[1], values[4], values[5], values[3], values[2]
        ),
    )
    .unwrap();
    std::fs::write(
        c.join("principals.yaml"),
        "principals:\n- {id: agent, tenant: tp, groups: [support]}\n- {id: lead, tenant: tp, groups: [support-lead]}\n",
    )
    .unwrap();
    Corpus { values, phone }
}

fn policy(dir: &Path) -> PathBuf {
    let p = dir.join("pii.yaml");
    std::fs::write(
        &p,
        "tenants:\n  tp:\n    mask: [phone, email, id_number, bank_card, address]\n    unmask_groups: [support-lead]\n",
    )
    .unwrap();
    p
}

fn leaked<'a>(values: &'a [String], text: &str) -> Vec<&'a str> {
    values
        .iter()
        .filter(|v| text.contains(v.as_str()))
        .map(String::as_str)
        .collect()
}

#[test]
fn the_served_answers_and_the_servers_own_log_hold_no_value() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let seed = rand::random::<u32>() as u64;
    let c = corpus(dir.path(), seed);
    let out = dossier(&store)
        .arg("ingest")
        .arg(dir.path().join("corpus"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let keys = dir.path().join("keys.yaml");
    std::fs::write(
        &keys,
        format!(
            "- {{key_sha256: {}, principal: agent}}\n- {{key_sha256: {}, principal: lead}}\n",
            sha256("key-agent"),
            sha256("key-lead")
        ),
    )
    .unwrap();
    let mut child = dossier(&store)
        .arg("--pii")
        .arg(policy(dir.path()))
        .args(["serve", "--addr", "127.0.0.1:0", "--keys"])
        .arg(&keys)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = Arc::new(Mutex::new(String::new()));
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let base = loop {
        let line = lines.next().expect("serve printed its address").unwrap();
        log.lock().unwrap().push_str(&line);
        if let Some(rest) = line.split("serving on ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    let drain = {
        let log = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let mut l = log.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        })
    };
    let http = reqwest::blocking::Client::new();
    let mut told = String::new();
    for (path, body) in [
        (
            "/v1/search".to_string(),
            Some(json!({"query": "refund dispute call write", "mode": "hybrid"})),
        ),
        (
            "/v1/ask".to_string(),
            Some(
                json!({"question": format!("Who answers {}? Who handles a refund dispute?", c.phone)}),
            ),
        ),
        ("/v1/sections/desk@1%230".to_string(), None),
        (format!("/v1/graph/entity/{}", c.phone), None),
    ] {
        let req = match body {
            Some(b) => http.post(format!("{base}{path}")).json(&b),
            None => http.get(format!("{base}{path}")),
        };
        let r = req.bearer_auth("key-agent").send().unwrap();
        assert!(r.status().as_u16() < 500, "{path}");
        told.push_str(&format!("{:?}\n", r.headers()));
        told.push_str(&r.text().unwrap());
    }
    // SIGTERM: the server drains and exits; its stderr is then complete.
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
    drain.join().unwrap();
    let log = log.lock().unwrap().clone();

    assert!(
        leaked(&c.values, &told).is_empty(),
        "seed {seed}: response holds {:?}",
        leaked(&c.values, &told)
    );
    assert!(
        told.contains("[phone]"),
        "seed {seed}: the agent was shown masks: {told}"
    );
    // The server's log: access lines (one with the phone in its path) and audit lines.
    assert!(log.contains("/v1/graph/entity/[phone]"), "{log}");
    assert!(
        leaked(&c.values, &log).is_empty(),
        "seed {seed}: the log holds {:?}:\n{log}",
        leaked(&c.values, &log)
    );

    // The CLI's own answers, with the policy.
    for args in [
        vec![
            "ask",
            "--as",
            "agent",
            "--json",
            "Who handles a refund dispute?",
        ],
        vec![
            "search",
            "--as",
            "agent",
            "--json",
            "refund dispute call write",
        ],
    ] {
        let out = dossier(&store)
            .arg("--pii")
            .arg(policy(dir.path()))
            .args(&args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            leaked(&c.values, &text).is_empty(),
            "{args:?} printed {:?}",
            leaked(&c.values, &text)
        );
        assert!(
            args[0] == "ask" || text.contains("[phone]") || text.contains("[email]"),
            "{args:?}: {text}"
        );
    }
    // A granted reader sees them (so the checks above can fail).
    let out = dossier(&store)
        .arg("--pii")
        .arg(policy(dir.path()))
        .args([
            "search",
            "--as",
            "lead",
            "--json",
            "refund dispute call write",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(leaked(&c.values, &text).len() >= 5, "{text}");
}

#[test]
fn a_bad_policy_is_refused_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    corpus(dir.path(), 1);
    assert!(dossier(&store)
        .arg("ingest")
        .arg(dir.path().join("corpus"))
        .status()
        .unwrap()
        .success());
    for (text, says) in [
        ("tenants:\n  tp:\n    mask: [ssn]\n", "unknown kind"),
        (
            "tenants:\n  tp:\n    mask: [x]\n    patterns: [{name: x, regex: '('}]\n",
            "pattern x",
        ),
        ("tenant: tp\n", "unknown field"),
    ] {
        let p = dir.path().join("bad.yaml");
        std::fs::write(&p, text).unwrap();
        let out = dossier(&store)
            .arg("--pii")
            .arg(&p)
            .args(["search", "--as", "agent", "refund"])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{text:?}: {err}");
    }
}
