//! The MCP server, driven by the official MCP Python SDK's own client (PyPI `mcp`,
//! installed by `scripts/setup-mcp`; `scripts/test` runs it): over streamable HTTP at
//! `/mcp` on a real server and over stdio through `dossier mcp`. As u7 of the shop
//! scenario: the tools are listed with schemas that name no identity, search and ask
//! never show the supplier notice u7 may not read (zhang, through the same tools, does
//! see it, so the test can fail), another customer's order reads exactly like a missing
//! one, and a tool argument naming a principal is refused.

mod common;

use std::path::{Path, PathBuf};

use common::{shared_engine, Key, Server};
use serde_json::{json, Value};

const NOTICE: &str = "supplier-notice-S-8";
const LEAKS: [&str; 3] = [NOTICE, "深圳八号", "鼓包"];
const QUERY: &str = "供应商 S-8 电池鼓包事件 E-1 影响哪些产品";
const E1_QUESTION: &str = "哪些产品受到供应商事件 E-1 影响？";

const KEYS: [Key; 2] = [("key-u7", "u7", false), ("key-zhang", "zhang", false)];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python() -> PathBuf {
    let py = root().join(".tools/mcp/bin/python");
    assert!(
        py.is_file(),
        "{} missing: run scripts/setup-mcp (scripts/test does)",
        py.display()
    );
    py
}

/// Runs the SDK client script with `args`; its JSON report.
fn sdk_client(args: &[String]) -> Value {
    let out = std::process::Command::new(python())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.py"))
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "MCP client failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn calls() -> Value {
    json!([
        ["search", {"query": QUERY, "mode": "hybrid", "now": "2026-11-30"}],
        ["ask", {"question": E1_QUESTION, "now": "2026-11-30"}],
        ["record_lookup", {"table": "orders", "key": "A123"}],
        ["record_lookup", {"table": "orders", "key": "A100"}],
        ["record_lookup", {"table": "orders", "key": "A999"}],
        ["document_section", {"chunk_id": format!("{NOTICE}@v1#0")}],
        ["document_section", {"chunk_id": "nothing-here@v1#0"}],
        ["graph_neighbors", {"name": "S-8", "hops": 2, "now": "2026-11-30"}],
        ["search", {"query": QUERY, "principal": "zhang"}],
        ["ask", {"question": E1_QUESTION, "tenant": "acme"}]
    ])
}

/// A tool's answer as JSON without its request id (two answers that read the same
/// differ in nothing else).
fn sans_id(call: &Value) -> Value {
    let mut v: Value = serde_json::from_str(call["text"].as_str().unwrap()).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.remove("request_id");
    }
    v
}

/// What u7 must get, whichever transport.
fn check_u7(out: &Value, how: &str) {
    let mut names: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "ask",
            "document_section",
            "graph_neighbors",
            "record_lookup",
            "search"
        ],
        "{how}"
    );
    for t in out["tools"].as_array().unwrap() {
        let schema = &t["input_schema"];
        assert_eq!(schema["additionalProperties"], false, "{how}: {t}");
        for identity in ["principal", "tenant", "groups", "key_sha256", "user"] {
            assert!(schema["properties"].get(identity).is_none(), "{how}: {t}");
        }
    }
    let c = out["calls"].as_array().unwrap();
    let no_leak = |i: usize| {
        let text = c[i].to_string();
        for l in LEAKS {
            assert!(!text.contains(l), "{how}: call {i} leaks {l}: {text}");
        }
    };
    // search: answered, without the notice.
    assert_eq!(c[0]["is_error"], false, "{how}: {}", c[0]);
    assert!(
        c[0]["text"].as_str().unwrap().contains("hits"),
        "{how}: {}",
        c[0]
    );
    no_leak(0);
    // ask: says the evidence is not sufficient, without the notice.
    assert_eq!(c[1]["is_error"], false, "{how}: {}", c[1]);
    assert_eq!(
        sans_id(&c[1])["status"],
        "insufficient_evidence",
        "{how}: {}",
        c[1]
    );
    no_leak(1);
    // Own order found; another customer's and a missing one: one answer.
    assert_eq!(c[2]["is_error"], false, "{how}: {}", c[2]);
    assert_eq!(sans_id(&c[2])["fields"]["owner"], "u7", "{how}: {}", c[2]);
    assert_eq!(c[3]["is_error"], true, "{how}: {}", c[3]);
    assert_eq!(sans_id(&c[3]), sans_id(&c[4]), "{how}: not yours ≠ missing");
    assert!(!c[3].to_string().contains("user-1"), "{how}: {}", c[3]);
    // The notice's section reads like a section that does not exist.
    assert_eq!(c[5]["is_error"], true, "{how}: {}", c[5]);
    assert_eq!(
        sans_id(&c[5]),
        sans_id(&c[6]),
        "{how}: hidden section ≠ missing"
    );
    no_leak(5);
    no_leak(7);
    // Identity as a tool argument: refused, whatever it names.
    for i in [8, 9] {
        assert_eq!(c[i]["is_error"], true, "{how}: {}", c[i]);
        let e = c[i]["error"].as_str().unwrap_or_default();
        assert!(e.contains("identity"), "{how}: {}", c[i]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_client_over_http_sees_what_the_key_may_read() {
    let s = Server::start(shared_engine(), &KEYS).await;
    let url = format!("{}/mcp", s.base);
    let run = |key: &str| {
        let args = vec!["http".into(), url.clone(), key.into(), calls().to_string()];
        tokio::task::spawn_blocking(move || sdk_client(&args))
    };
    let u7 = run("key-u7").await.unwrap();
    check_u7(&u7, "http");
    // zhang's search through the same tool finds the notice: what hides it from u7 is
    // u7's scope.
    let zhang = run("key-zhang").await.unwrap();
    assert!(
        zhang["calls"][0]["text"].as_str().unwrap().contains(NOTICE),
        "{}",
        zhang["calls"][0]
    );
    // No key, a wrong key: refused before any message is read, as on every route.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    for key in [None, Some("key-nobody")] {
        let r = s.post("/mcp", key, init.clone()).await;
        assert_eq!(r.status, 401, "{}", r.text);
    }
    let r = s.get("/mcp", Some("key-u7")).await;
    assert_eq!(r.status, 405);
    // Malformed messages get JSON-RPC errors, not a crash.
    let r = s.post("/mcp", Some("key-u7"), json!([init])).await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert_eq!(r.body["error"]["code"], -32600, "{}", r.text);
    let r = s
        .post(
            "/mcp",
            Some("key-u7"),
            json!({"jsonrpc": "2.0", "id": 2, "method": "resources/list"}),
        )
        .await;
    assert_eq!(r.body["error"]["code"], -32601, "{}", r.text);
    s.stop().await;
}

fn dossier_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().and_then(Path::parent).unwrap().join("dossier");
    assert!(
        bin.is_file(),
        "{} not built: run the workspace's tests (cargo nextest run --workspace)",
        bin.display()
    );
    bin
}

#[test]
fn the_sdk_client_over_stdio_sees_what_the_key_may_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let scen = common::scenarios();
    let ingest = std::process::Command::new(dossier_bin())
        .arg("--store")
        .arg(&store)
        .args(["--embedder", "hash:64", "ingest"])
        .arg(scen.join("shop"))
        .arg(scen.join("acme"))
        .output()
        .unwrap();
    assert!(
        ingest.status.success(),
        "{}",
        String::from_utf8_lossy(&ingest.stderr)
    );
    let keys = dir.path().join("keys.yaml");
    common::write_keys(&keys, &KEYS);
    let command = json!([
        dossier_bin(),
        "--store",
        store,
        "--embedder",
        "hash:64",
        "mcp",
        "--keys",
        keys
    ]);
    let env = |key: &str| json!({"DOSSIER_API_KEY": key}).to_string();
    let args = vec![
        "stdio".into(),
        command.to_string(),
        env("key-u7"),
        calls().to_string(),
    ];
    check_u7(&sdk_client(&args), "stdio");
    // A key the keys file does not hold: `dossier mcp` refuses to start.
    let refused = std::process::Command::new(dossier_bin())
        .arg("--store")
        .arg(&store)
        .args(["--embedder", "hash:64", "mcp", "--keys"])
        .arg(&keys)
        .env("DOSSIER_API_KEY", "key-nobody")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("DOSSIER_API_KEY"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

/// Hostile stdio input: an oversized line, binary garbage, a query past the API's
/// limit, nesting deeper than the parser takes. Each gets its JSON-RPC error (or the
/// route's own refusal) and the session goes on to answer the next message.
#[test]
fn hostile_stdio_messages_are_refused_one_by_one() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let ingest = std::process::Command::new(dossier_bin())
        .arg("--store")
        .arg(&store)
        .args(["--embedder", "hash:64", "ingest"])
        .arg(common::scenarios().join("shop"))
        .output()
        .unwrap();
    assert!(
        ingest.status.success(),
        "{}",
        String::from_utf8_lossy(&ingest.stderr)
    );
    let keys = dir.path().join("keys.yaml");
    common::write_keys(&keys, &KEYS);
    let mut input = Vec::new();
    input.extend(vec![b'x'; 2 << 20]);
    input.push(b'\n');
    input.extend(b"\x00\x01\xff garbage\n");
    let long = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "search", "arguments": {"query": "a".repeat(5000)}}});
    input.extend(format!("{long}\n").bytes());
    input.extend(vec![b'['; 100_000]);
    input.push(b'\n');
    input.extend(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n");
    let mut child = std::process::Command::new(dossier_bin())
        .arg("--store")
        .arg(&store)
        .args(["--embedder", "hash:64", "mcp", "--keys"])
        .arg(&keys)
        .env("DOSSIER_API_KEY", "key-u7")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success());
    let replies: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(replies.len(), 5, "{replies:?}");
    assert_eq!(replies[0]["error"]["code"], -32600, "{}", replies[0]);
    assert_eq!(replies[1]["error"]["code"], -32700, "{}", replies[1]);
    assert_eq!(replies[2]["result"]["isError"], true, "{}", replies[2]);
    assert_eq!(
        replies[2]["result"]["structuredContent"]["code"], "payload_too_large",
        "{}",
        replies[2]
    );
    assert_eq!(replies[3]["error"]["code"], -32700, "{}", replies[3]);
    assert_eq!(replies[4], json!({"jsonrpc": "2.0", "id": 2, "result": {}}));
}
