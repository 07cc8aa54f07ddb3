//! The web UI end to end: a real server on a loopback port (the shared scenario corpus,
//! shop + acme, ingested with the hash embedder), driven in headless Chromium through
//! chromedriver (W3C WebDriver, spoken directly over HTTP).
//!
//! Needs Debian's `chromium` and `chromium-driver`: `scripts/setup-browser` installs
//! them. Without them every browser test fails and says so. Screenshots of each stage
//! go to `target/test-artifacts/ui/`.

mod common;

use std::net::TcpListener as StdListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::{fresh_engine, shared_engine, Key};
use dossier_engine::Engine;
use serde_json::{json, Value};

const NOTICE: &str = "supplier-notice-S-8";
/// What only the notice says: none of it may reach a customer's page.
const NOTICE_ONLY: [&str; 3] = [NOTICE, "深圳八号", "鼓包"];
const E1_QUESTION: &str = "哪些产品受到供应商事件 E-1 影响？";
const RETURN_QUESTION: &str = "订单 A123 的耳机已拆封，签收 10 天后有杂音，能退吗？";
const AUTH_QUESTION: &str = "当前 API 的认证方式是什么？";

/// (key, principal, admin) of every test server.
const KEYS: [Key; 3] = [
    ("key-u7", "u7", false),
    ("key-zhang", "zhang", false),
    ("key-admin", "zhang", true),
];

/// How long any one thing may take to appear in the page.
const WAIT: Duration = Duration::from_secs(30);

// ------------------------------------------------------------------ server

fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-artifacts/ui");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The shared harness's server on a runtime of its own (the browser tests block), stopped
/// when dropped, a failing test too.
struct Server {
    rt: tokio::runtime::Runtime,
    inner: Option<common::Server>,
}

impl Server {
    fn start(engine: Arc<Engine>) -> Server {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let inner = rt.block_on(common::Server::start(engine, &KEYS));
        Server {
            rt,
            inner: Some(inner),
        }
    }

    fn inner(&self) -> &common::Server {
        self.inner.as_ref().unwrap()
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.inner().base)
    }

    /// The text of chunk `chunk_id` as the engine holds it, read as `principal` would.
    fn chunk_text(&self, principal: &str, now: &str, chunk_id: &str) -> String {
        let engine = &self.inner().state.engine;
        let scope = engine.scope(principal, now.parse().unwrap()).unwrap();
        let section = engine.section_of(&scope, chunk_id).unwrap();
        section
            .chunks
            .into_iter()
            .find(|c| c.chunk_id == chunk_id)
            .unwrap_or_else(|| panic!("{chunk_id} is not in its own section"))
            .text
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            let _ = self.rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(10), inner.shutdown()).await
            });
        }
    }
}

// ------------------------------------------------------------------ browser

/// The W3C WebDriver key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

fn on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in names {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One headless Chromium session behind its own chromedriver.
struct Browser {
    http: reqwest::blocking::Client,
    session: String,
    driver: Child,
    /// Prefix of this test's screenshots.
    name: &'static str,
    shots: usize,
}

impl Browser {
    fn start(name: &'static str) -> Browser {
        let chromium = on_path(&["chromium", "chromium-browser"]);
        let driver = on_path(&["chromedriver"]);
        let (Some(chromium), Some(driver)) = (chromium, driver) else {
            panic!(
                "the browser test needs Chromium and chromedriver (found chromium: {}, chromedriver: {}): \
                 run scripts/setup-browser to install Debian's chromium and chromium-driver",
                on_path(&["chromium", "chromium-browser"]).is_some(),
                on_path(&["chromedriver"]).is_some(),
            );
        };
        // This test's screenshots of an earlier run would mislead.
        for entry in std::fs::read_dir(artifacts()).unwrap().flatten() {
            if entry
                .file_name()
                .to_string_lossy()
                .starts_with(&format!("{name}-"))
            {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        let port = free_port();
        let child = Command::new(&driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {}: {e} (run scripts/setup-browser)",
                    driver.display()
                )
            });
        let http = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let mut browser = Browser {
            http,
            session: String::new(),
            driver: child,
            name,
            shots: 0,
        };
        // Wait for chromedriver to answer.
        let started = Instant::now();
        loop {
            let ready = browser
                .http
                .get(format!("{base}/status"))
                .send()
                .ok()
                .and_then(|r| r.json::<Value>().ok())
                .is_some_and(|v| v["value"]["ready"] == true);
            if ready {
                break;
            }
            if let Ok(Some(status)) = browser.driver.try_wait() {
                panic!("chromedriver exited at start: {status}");
            }
            assert!(
                started.elapsed() < WAIT,
                "chromedriver did not become ready on port {port}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {
                "binary": chromium.to_string_lossy(),
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1280,1600",
                         "--lang=en-US", "--no-first-run", "--disable-extensions"],
            },
        }}});
        let resp: Value = browser
            .http
            .post(format!("{base}/session"))
            .json(&caps)
            .send()
            .unwrap()
            .json()
            .unwrap();
        let id = resp["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {resp}"));
        browser.session = format!("{base}/session/{id}");
        browser
    }

    fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.session);
        let mut req = self.http.request(method.clone(), &url);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req
            .send()
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = resp.status();
        let v: Value = resp.json().unwrap_or(Value::Null);
        assert!(status.is_success(), "{method} {path}: {status} {v}");
        v["value"].clone()
    }

    /// Like [`Browser::call`], but a WebDriver error is `None`.
    fn try_call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Option<Value> {
        let url = format!("{}{path}", self.session);
        let mut req = self.http.request(method, &url);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().ok()?;
        let ok = resp.status().is_success();
        let v: Value = resp.json().ok()?;
        ok.then(|| v["value"].clone())
    }

    fn goto(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", Some(json!({"url": url})));
    }

    /// Runs `script` (a function body; `arguments` holds `args`) and returns its value.
    fn js(&self, script: &str, args: Value) -> Value {
        self.call(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
    }

    fn find(&self, css: &str) -> Option<String> {
        let v = self.try_call(
            reqwest::Method::POST,
            "/element",
            Some(json!({"using": "css selector", "value": css})),
        )?;
        v[ELEMENT].as_str().map(str::to_string)
    }

    fn displayed(&self, element: &str) -> bool {
        self.try_call(
            reqwest::Method::GET,
            &format!("/element/{element}/displayed"),
            None,
        )
        .is_some_and(|v| v == true)
    }

    /// Waits until `check` returns something, polling; on time-out saves a
    /// screenshot and fails with `what`.
    fn wait_until<T>(&mut self, what: &str, mut check: impl FnMut(&Browser) -> Option<T>) -> T {
        let started = Instant::now();
        loop {
            if let Some(v) = check(self) {
                return v;
            }
            if started.elapsed() > WAIT {
                self.screenshot("timeout");
                let body = self.js("return document.body.innerText;", json!([]));
                panic!(
                    "timed out after {WAIT:?} waiting for {what}; page text:\n{}\nbrowser console:\n{}",
                    body.as_str().unwrap_or_default(),
                    self.console()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// What the page wrote to the console (errors included), for failure messages.
    fn console(&self) -> String {
        let log = self.try_call(
            reqwest::Method::POST,
            "/se/log",
            Some(json!({"type": "browser"})),
        );
        log.and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .map(|e| {
                format!(
                    "{} {}",
                    e["level"].as_str().unwrap_or(""),
                    e["message"].as_str().unwrap_or("")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Waits until an element matching `css` is displayed and returns it.
    fn wait_for(&mut self, css: &str) -> String {
        self.wait_until(&format!("{css} to be displayed"), |b| {
            b.find(css).filter(|e| b.displayed(e))
        })
    }

    fn click(&mut self, css: &str) {
        let e = self.wait_for(css);
        self.call(
            reqwest::Method::POST,
            &format!("/element/{e}/click"),
            Some(json!({})),
        );
    }

    fn type_into(&mut self, css: &str, text: &str) {
        let e = self.wait_for(css);
        self.call(
            reqwest::Method::POST,
            &format!("/element/{e}/clear"),
            Some(json!({})),
        );
        self.call(
            reqwest::Method::POST,
            &format!("/element/{e}/value"),
            Some(json!({ "text": text })),
        );
        let typed = self.js(
            "return document.querySelector(arguments[0]).value;",
            json!([css]),
        );
        assert_eq!(typed, text, "typing into {css}");
    }

    /// The rendered text of the first element matching `css` (None: no such element).
    fn text(&self, css: &str) -> Option<String> {
        self.js(
            "const n = document.querySelector(arguments[0]); return n ? n.innerText : null;",
            json!([css]),
        )
        .as_str()
        .map(str::to_string)
    }

    /// The rendered texts of every element matching `css`.
    fn texts(&self, css: &str) -> Vec<String> {
        let v = self.js(
            "return [...document.querySelectorAll(arguments[0])].map(n => n.innerText || n.textContent);",
            json!([css]),
        );
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// An attribute of every element matching `css`.
    fn attrs(&self, css: &str, attr: &str) -> Vec<String> {
        let v = self.js(
            "return [...document.querySelectorAll(arguments[0])].map(n => n.getAttribute(arguments[1]));",
            json!([css, attr]),
        );
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap_or_default().to_string())
            .collect()
    }

    fn is_shown(&self, css: &str) -> bool {
        self.find(css).is_some_and(|e| self.displayed(&e))
    }

    /// The whole document as it stands, hidden parts included.
    fn page_source(&self) -> String {
        self.js("return document.documentElement.outerHTML;", json!([]))
            .as_str()
            .unwrap()
            .to_string()
    }

    fn scroll_to(&self, css: &str) {
        self.js(
            "const n = document.querySelector(arguments[0]); if (n) n.scrollIntoView({block: 'start'});",
            json!([css]),
        );
    }

    /// Saves a PNG of the viewport as `target/test-artifacts/ui/NAME-NN-STAGE.png`.
    fn screenshot(&mut self, stage: &str) {
        self.shots += 1;
        let Some(v) = self.try_call(reqwest::Method::GET, "/screenshot", None) else {
            return;
        };
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap_or_default())
            .expect("screenshot is base64");
        assert!(png.starts_with(b"\x89PNG"), "screenshot is a PNG");
        let path = artifacts().join(format!("{}-{:02}-{stage}.png", self.name, self.shots));
        std::fs::write(&path, png).unwrap();
    }

    // ---- the UI's own steps

    fn open_ui(&mut self, server: &Server) {
        self.goto(&server.url("/"));
        self.wait_for("#api-key");
    }

    fn sign_in(&mut self, key: &str) {
        self.type_into("#api-key", key);
        self.click("#login-submit");
        self.wait_for("#question");
    }

    fn sign_out(&mut self) {
        self.click("#sign-out");
        self.wait_for("#api-key");
    }

    /// Asks through the form and waits for the new answer; returns its request id.
    fn ask(&mut self, question: &str, now: &str) -> String {
        let before = self.text("#request-id").unwrap_or_default();
        self.type_into("#question", question);
        self.type_into("#now", now);
        self.click("#ask-submit");
        self.wait_until("the answer", |b| {
            if let Some(err) = b.text("#ask-error").filter(|_| b.is_shown("#ask-error")) {
                panic!("the UI shows an error: {err}");
            }
            let rid = b.text("#request-id").unwrap_or_default();
            (b.is_shown("#answer-status") && !rid.is_empty() && rid != before).then_some(rid)
        })
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.http.delete(&self.session).send();
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

// ------------------------------------------------------------------ tests

#[test]
fn an_answer_shows_its_marks_and_a_mark_opens_the_cited_section_of_that_version() {
    let server = Server::start(shared_engine());
    let mut b = Browser::start("ask");
    b.open_ui(&server);
    b.screenshot("sign-in");
    b.sign_in("key-u7");
    // u7 is no administrator: the review queue is not offered.
    assert!(!b.is_shown("#tab-review"));

    b.ask(RETURN_QUESTION, "2026-09-20");
    let status = b.attrs("#answer-status", "class");
    assert_eq!(status, ["badge status-answered"], "{:?}", b.text("#answer"));
    // The answer's marks are buttons, one per citation it uses.
    let marks = b.attrs("#answer button.mark", "data-mark");
    let chunks = b.attrs("#answer button.mark", "data-chunk-id");
    assert!(marks.len() >= 3, "marks: {marks:?}");
    let answer = b.text("#answer").unwrap();
    for m in &marks {
        assert!(answer.contains(&format!("[{m}]")), "{answer}");
    }
    // The scenario: the policy version in force at the order's date, never V1 or the FAQ.
    assert!(
        chunks.iter().all(|c| c.starts_with("headphone-policy@V2#")),
        "{chunks:?}"
    );
    b.screenshot("answer");

    // A mark opens the cited section of that exact version, the cited chunk marked.
    for (mark, chunk) in marks.iter().zip(&chunks).take(2) {
        b.click(&format!("#answer button.mark[data-mark='{mark}']"));
        let (doc_version, _) = chunk.rsplit_once('#').unwrap();
        b.wait_until(&format!("the section of {chunk}"), |b| {
            (b.is_shown("#section")
                && b.text("#section-ref").as_deref() == Some(doc_version)
                && b.attrs("#section-chunks .chunk.cited", "data-chunk-id") == [chunk.as_str()])
            .then_some(())
        });
        let want = server.chunk_text("u7", "2026-09-20", chunk);
        let shown = b.text("#section-chunks .chunk.cited").unwrap();
        assert_eq!(shown.trim(), want.trim(), "{chunk}");
        assert_eq!(b.text("#section-status").unwrap(), "in force");
        // The quote the answer cites is in the section shown.
        let quote = b
            .text(&format!("#citations li[data-mark='{mark}'] .quote"))
            .unwrap();
        assert!(shown.contains(quote.trim()), "{quote} not in {shown}");
    }
    b.screenshot("section");

    // The agent's steps, each with its status: the order is read before any search.
    let actions = b.attrs("#timeline li.step", "data-action");
    let statuses = b.attrs("#timeline li.step", "data-status");
    assert_eq!(
        actions.first().map(String::as_str),
        Some("record"),
        "{actions:?}"
    );
    assert!(
        actions.iter().any(|a| a == "document_search"),
        "{actions:?}"
    );
    assert!(statuses.iter().all(|s| s == "ok"), "{statuses:?}");
    let badges = b.texts("#timeline li.step .step-status");
    assert_eq!(badges.len(), actions.len());
    assert!(badges.iter().all(|s| s == "ok"), "{badges:?}");
    assert!(b
        .text("#trace-summary")
        .unwrap()
        .contains(&format!("{} steps", actions.len())));
    b.scroll_to("#timeline-panel");
    b.screenshot("timeline");
}

#[test]
fn the_evidence_graph_is_drawn_and_a_customer_never_sees_the_supplier_notice() {
    let server = Server::start(shared_engine());
    let mut b = Browser::start("graph");
    b.open_ui(&server);

    // zhang (supply chain) may read the notice: the answer and its graph come from it.
    b.sign_in("key-zhang");
    b.ask(E1_QUESTION, "2026-11-30");
    assert_eq!(
        b.attrs("#answer-status", "class"),
        ["badge status-answered"]
    );
    let nodes = b.wait_until("graph nodes", |b| {
        let n = b.attrs("#graph g.node", "data-id");
        (!n.is_empty()).then_some(n)
    });
    let labels = b.texts("#graph g.node .node-label");
    for name in ["P-204", "S-8", "E-1"] {
        assert!(
            labels.iter().any(|l| l == name),
            "{name} not among {labels:?}"
        );
    }
    assert_eq!(labels.len(), nodes.len());
    let relations = b.attrs("#graph g.edge", "data-relation");
    for r in ["supplied_by", "affected_by"] {
        assert!(
            relations.iter().any(|x| x == r),
            "{r} not among {relations:?}"
        );
    }
    assert_eq!(b.texts("#graph .edge-labels .edge-label"), relations);
    // Drawn: every node lies inside the drawing.
    let inside = b.js(
        "const s = document.querySelector('#graph').getBoundingClientRect();
         return [...document.querySelectorAll('#graph g.node circle')].every(c => {
           const r = c.getBoundingClientRect();
           return r.width > 0 && r.left >= s.left - 1 && r.right <= s.right + 1
             && r.top >= s.top - 1 && r.bottom <= s.bottom + 1; });",
        json!([]),
    );
    assert_eq!(inside, true);
    assert!(
        b.page_source().contains(NOTICE),
        "zhang's page cites the notice"
    );
    b.scroll_to("#graph-panel");
    b.screenshot("zhang-graph");

    // u7 (a customer) asks the same and about the supplier: nothing from the notice.
    b.sign_out();
    assert!(
        !b.page_source().contains(NOTICE),
        "signing out clears the page"
    );
    b.sign_in("key-u7");
    assert!(!b.is_shown("#tab-review"));
    b.ask(E1_QUESTION, "2026-11-30");
    assert_eq!(
        b.attrs("#answer-status", "class"),
        ["badge status-insufficient_evidence"]
    );
    assert!(b.attrs("#answer button.mark", "data-mark").is_empty());
    b.screenshot("u7-e1");
    let page = b.page_source();
    for leak in NOTICE_ONLY {
        assert!(!page.contains(leak), "u7's page shows {leak}");
    }
    b.ask("供应商 S-8 出了什么问题？", "2026-11-30");
    b.wait_until("the graph to settle", |b| {
        (b.is_shown("#graph-wrap") || b.is_shown("#graph-none") || b.is_shown("#graph-error"))
            .then_some(())
    });
    let chunks = b.attrs("#citations li", "data-chunk-id");
    assert!(chunks.iter().all(|c| !c.starts_with(NOTICE)), "{chunks:?}");
    // Open every cited section too: none of them is the notice.
    for mark in b.attrs("#answer button.mark", "data-mark") {
        b.click(&format!("#answer button.mark[data-mark='{mark}']"));
        b.wait_until("a section", |b| b.is_shown("#section").then_some(()));
    }
    let page = b.page_source();
    for leak in NOTICE_ONLY {
        assert!(!page.contains(leak), "u7's page shows {leak}");
    }
    b.screenshot("u7-s8");
}

#[test]
fn approving_a_supersession_in_the_review_queue_changes_the_next_answer() {
    // Records a decision: a store of its own.
    let (_dir, engine) = fresh_engine();
    let server = Server::start(engine.clone());
    let mut b = Browser::start("review");
    b.open_ui(&server);
    b.sign_in("key-admin");
    b.wait_for("#tab-review");

    // Before: 2.0 and the look-alike mTLS draft are both in force, a reported conflict.
    b.ask(AUTH_QUESTION, "2026-11-30");
    let conflicts = b.texts("#conflicts li");
    assert!(
        conflicts
            .iter()
            .any(|c| c.contains("api-auth@2.0") && c.contains("api-auth-mtls-draft@0.9")),
        "{conflicts:?}"
    );
    let before = b.attrs("#citations li", "data-chunk-id");
    assert!(
        before.iter().any(|c| c.starts_with("api-auth@2.0#")),
        "{before:?}"
    );
    b.scroll_to("#conflicts-panel");
    b.screenshot("conflict");

    // The queue shows the candidate next to the text of both documents.
    b.click("#tab-review");
    let wanted = "api-auth-mtls-draft@0.9 supersedes api-auth@2.0?";
    b.wait_until("the supersession candidate", |b| {
        b.texts("#review-list li.review-item .subject")
            .iter()
            .any(|s| s == wanted)
            .then_some(())
    });
    let ids = b.attrs("#review-list li.review-item", "data-id");
    let subjects = b.texts("#review-list li.review-item .subject");
    let id = ids[subjects.iter().position(|s| s == wanted).unwrap()].clone();
    b.click(&format!(
        "#review-list li.review-item[data-id='{id}'] .open-candidate"
    ));
    b.wait_until("the candidate's evidence", |b| {
        (b.is_shown("#review-detail")
            && b.attrs("#review-detail", "data-id") == [id.as_str()]
            && !b.attrs("#review-evidence li", "data-doc-id").is_empty())
        .then_some(())
    });
    assert_eq!(b.text("#review-subject").unwrap(), wanted);
    let docs = b.attrs("#review-evidence li", "data-doc-id");
    let texts = b.texts("#review-evidence li .evidence-text");
    let text_of = |doc: &str| -> String {
        docs.iter()
            .zip(&texts)
            .filter(|(d, _)| d.as_str() == doc)
            .map(|(_, t)| t.as_str())
            .collect()
    };
    assert!(text_of("api-auth").contains("OAuth"), "{docs:?} {texts:?}");
    assert!(
        text_of("api-auth-mtls-draft").contains("双向 TLS"),
        "{docs:?} {texts:?}"
    );
    b.screenshot("candidate");

    b.type_into(
        "#review-note",
        "release note REL-2026-06: the mTLS scheme replaces 2.0",
    );
    b.click("#review-approve");
    b.wait_until("the decision", |b| {
        (b.attrs("#review-detail", "data-status") == ["approved"] && b.is_shown("#review-decision"))
            .then_some(())
    });
    let decision = b.text("#review-decision").unwrap();
    assert!(decision.contains("Approved by zhang"), "{decision}");
    assert!(decision.contains("REL-2026-06"), "{decision}");
    // Recorded in the store, by the key's principal.
    let item = engine.review_show(&id).unwrap();
    assert_eq!(item.decision.as_ref().map(|d| d.by.as_str()), Some("zhang"));
    b.screenshot("approved");

    // The same question again: no conflict, and 2.0 (now deprecated) is not cited.
    b.click("#tab-ask");
    b.ask(AUTH_QUESTION, "2026-11-30");
    assert!(
        b.is_shown("#conflicts-none"),
        "{:?}",
        b.texts("#conflicts li")
    );
    assert!(b.texts("#conflicts li").is_empty());
    let after = b.attrs("#citations li", "data-chunk-id");
    assert!(!after.is_empty());
    assert!(
        after.iter().all(|c| !c.starts_with("api-auth@2.0#")),
        "{after:?}"
    );
    assert!(
        after
            .iter()
            .any(|c| c.starts_with("api-auth-mtls-draft@0.9#")),
        "{after:?}"
    );
    b.screenshot("after");
}

#[test]
fn the_ui_switches_to_chinese_and_answers_a_chinese_question() {
    let server = Server::start(shared_engine());
    let mut b = Browser::start("zh");
    b.open_ui(&server);
    assert_eq!(b.text("#login-submit").unwrap(), "Use this key");
    b.sign_in("key-u7");
    assert_eq!(b.text("#ask-submit").unwrap(), "Ask");
    assert_eq!(b.text("#tab-ask").unwrap(), "Ask");

    b.click("#lang-toggle");
    b.wait_until("Chinese labels", |b| {
        (b.text("#ask-submit").as_deref() == Some("提问")).then_some(())
    });
    assert_eq!(b.attrs("html", "lang"), ["zh-CN"]);
    assert_eq!(b.text("#tab-ask").unwrap(), "提问");
    assert_eq!(b.text("label[for='now']").unwrap(), "业务日期");
    assert_eq!(b.text("#lang-toggle").unwrap(), "English");
    assert_eq!(
        b.attrs("#question", "placeholder"),
        ["就你的文档提一个问题"]
    );

    b.ask("订单 A125 的耳机没拆封，能无理由退货吗？", "2026-09-20");
    assert_eq!(b.text("#answer-status").unwrap(), "已回答");
    assert_eq!(b.text("#answer-panel h2").unwrap(), "回答");
    let answer = b.text("#answer").unwrap();
    assert!(answer.contains("无理由退货"), "{answer}");
    let chunks = b.attrs("#answer button.mark", "data-chunk-id");
    assert!(
        chunks.iter().any(|c| c.starts_with("headphone-policy@V2#")),
        "{chunks:?}"
    );
    b.click("#answer button.mark");
    b.wait_until("the section", |b| b.is_shown("#section").then_some(()));
    assert_eq!(b.text("#section-status").unwrap(), "有效");
    let cited = b.text("#section-chunks .chunk.cited").unwrap();
    let want = server.chunk_text("u7", "2026-09-20", &chunks[0]);
    assert_eq!(cited.trim(), want.trim());
    let steps = b.texts("#timeline li.step .step-status");
    assert!(
        !steps.is_empty() && steps.iter().all(|s| s == "成功"),
        "{steps:?}"
    );
    b.screenshot("zh-answer");

    // The choice is remembered across a reload; back to English on request.
    b.goto(&server.url("/"));
    b.wait_for("#question");
    assert_eq!(b.text("#ask-submit").unwrap(), "提问");
    b.click("#lang-toggle");
    b.wait_until("English labels", |b| {
        (b.text("#ask-submit").as_deref() == Some("Ask")).then_some(())
    });
    assert_eq!(b.attrs("html", "lang"), ["en"]);
}

#[test]
fn the_ui_files_are_served_without_a_key_under_a_strict_policy() {
    let server = Server::start(shared_engine());
    let http = reqwest::blocking::Client::new();
    for (path, kind) in [
        ("/", "text/html; charset=utf-8"),
        ("/ui/app.js", "text/javascript; charset=utf-8"),
        ("/ui/style.css", "text/css; charset=utf-8"),
        ("/ui/favicon.svg", "image/svg+xml"),
    ] {
        let r = http.get(server.url(path)).send().unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let h = r.headers();
        assert_eq!(h["content-type"], kind, "{path}");
        assert_eq!(h["cache-control"], "no-cache", "{path}");
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("script-src 'self'"), "{csp}");
        assert!(csp.contains("default-src 'none'"), "{csp}");
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
            "{csp}"
        );
        let etag = h["etag"].to_str().unwrap().to_string();
        assert!(h.contains_key("x-request-id"));
        // Revalidation: the same file answers 304.
        let again = http
            .get(server.url(path))
            .header("if-none-match", &etag)
            .send()
            .unwrap();
        assert_eq!(again.status(), 304, "{path}");
    }
    let missing = http.get(server.url("/ui/secrets.txt")).send().unwrap();
    assert_eq!(missing.status(), 404);
    let body: Value = missing.json().unwrap();
    assert_eq!(body["code"], "no_route");
    // The page is open; the API behind it is not.
    let ask = http
        .post(server.url("/v1/ask"))
        .json(&json!({"question": RETURN_QUESTION}))
        .send()
        .unwrap();
    assert_eq!(ask.status(), 401);
}

/// A PDF's citation opens its section on the cited page, with a link that opens the
/// source at that page.
#[test]
fn a_pdf_citation_opens_the_cited_page() {
    let (dir, engine) = fresh_engine();
    let files = dir.path().join("pdf");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(
        files.join("courier.pdf"),
        dossier_ingest::pdf::simple_pdf(&[
            vec![
                (22, "Courier Policy"),
                (11, "Parcels are collected on weekdays."),
            ],
            vec![
                (16, "Clause 2 Lost parcels"),
                (
                    11,
                    "A lost quokka parcel is refunded after ten working days.",
                ),
            ],
        ]),
    )
    .unwrap();
    std::fs::write(
        files.join("courier.pdf.meta.yaml"),
        "id: courier-policy\nversion: '2'\ntenant: shop\nsource_uri: https://intranet.example/courier.pdf\n",
    )
    .unwrap();
    let r = engine.ingest(&[files], &mut ()).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    let server = Server::start(engine);
    let mut b = Browser::start("pdf");
    b.open_ui(&server);
    b.sign_in("key-u7");
    b.ask("Is a lost quokka parcel refunded?", "2026-11-30");
    let chunks = b.attrs("#answer button.mark", "data-chunk-id");
    let mark = b.attrs("#answer button.mark", "data-mark");
    let at = chunks
        .iter()
        .position(|c| c.starts_with("courier-policy@2#"))
        .unwrap_or_else(|| panic!("no PDF citation: {chunks:?} {:?}", b.text("#answer")));
    b.click(&format!("#answer button.mark[data-mark='{}']", mark[at]));
    b.wait_until("the cited page", |b| {
        (b.is_shown("#section") && b.is_shown("#section-page")).then_some(())
    });
    assert_eq!(b.text("#section-page").unwrap(), "page 2");
    assert!(b.text("#section-path").unwrap().starts_with("p. 2 › "));
    assert_eq!(
        b.attrs("#section-open", "href"),
        ["https://intranet.example/courier.pdf#page=2"]
    );
    b.screenshot("pdf-page");
}
