//! PII masking over a generated corpus (documents and a record table holding phone
//! numbers, e-mail addresses, ID numbers, bank cards and addresses in Chinese and English
//! formats, made from a random seed): for a caller outside the policy's `unmask_groups`,
//! no value appears in any response (body or header) of any read route — search in
//! every mode, ask, traces, sections, records, graph, documents, chat, MCP — nor in any
//! prompt sent to the model, the audit log, or the metrics. A reader granted the values
//! sees them (so the test can fail), and a question carrying a value finds nothing by it.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use common::{urlencode, Server};
use dossier_core::pii::{samples, OwnPattern, PiiPolicy, PolicySpec, TenantSpec};
use dossier_llm::{ChatModel, ChatRequest, ChatResponse, LlmError, Role};
use dossier_server::{hash_key, AuditQuestions};
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

const AGENT: &str = "key-agent";
const LEAD: &str = "key-lead";
const CUST: &str = "key-cust";
const OPS: &str = "key-ops";

/// A model that answers every request with the text it was sent (so whatever reaches it
/// would reach the answer too) and keeps every request.
#[derive(Default)]
struct Echo {
    seen: Mutex<Vec<ChatRequest>>,
}

impl ChatModel for Echo {
    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.seen.lock().unwrap().push(req.clone());
        let last = req
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(|m| m.content.clone())
            .unwrap_or_default();
        Ok(ChatResponse::text(last))
    }

    fn name(&self) -> String {
        "echo".into()
    }
}

/// The sensitive values of one seed, each with the forms it could be written in.
struct Values {
    all: Vec<String>,
}

impl Values {
    fn of(seed: u64) -> (Values, Vec<(&'static str, String)>) {
        let s = |k: u64| seed.wrapping_mul(1_000_003).wrapping_add(k);
        let named = vec![
            ("mobile", samples::cn_mobile(s(1))),
            ("mobile2", samples::cn_mobile(s(2))),
            ("us_phone", samples::us_phone(s(3))),
            ("email", samples::email(s(4))),
            ("email2", samples::email(s(5))),
            ("cn_id", samples::cn_id(s(6))),
            ("card", samples::bank_card(s(7))),
            ("cn_address", samples::cn_address(s(8))),
            ("en_address", samples::en_address(s(9))),
            ("member", format!("M{:08}", s(10) % 100_000_000)),
        ];
        let mut all = Vec::new();
        for (_, v) in &named {
            all.push(v.clone());
            // Digits alone: a value must not come back reformatted either.
            let digits: String = v.chars().filter(char::is_ascii_digit).collect();
            if digits.len() >= 7 && !v.contains('@') {
                all.push(digits);
            }
        }
        (Values { all }, named)
    }

    /// The values found in `text`.
    fn in_text(&self, text: &str) -> Vec<&str> {
        let squeezed: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        self.all
            .iter()
            .filter(|v| {
                let v_squeezed: String = v.chars().filter(|c| !c.is_whitespace()).collect();
                text.contains(v.as_str()) || squeezed.contains(&v_squeezed)
            })
            .map(String::as_str)
            .collect()
    }
}

fn write_corpus(dir: &Path, v: &[(&'static str, String)]) {
    let get = |k: &str| v.iter().find(|(n, _)| *n == k).unwrap().1.clone();
    let d = dir.join("docs");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("escalation.md"),
        format!(
            "---\nid: escalation\nversion: \"1\"\ntitle: Returns desk escalation\ntenant: tp\neffective_from: 2026-01-01\n---\n\
             # Returns desk escalation\n\n## Contacts\nFor a refund dispute call {} or {}, or write to {}. \
             Parcels go back to {}.\n\n## Verification\nThe account holder's card {} and member number {} are checked.\n",
            get("mobile"),
            get("us_phone"),
            get("email"),
            get("en_address"),
            get("card"),
            get("member"),
        ),
    )
    .unwrap();
    std::fs::write(
        d.join("kefu.md"),
        format!(
            "---\nid: kefu\nversion: \"1\"\ntitle: 客服升级流程\ntenant: tp\neffective_from: 2026-01-01\n---\n\
             # 客服升级流程\n\n## 联系人\n退款纠纷请致电 {}，或发邮件至 {}。退货寄往{}。\n\n## 核验\n核验身份证 {} 后办理。\n",
            get("mobile2"),
            get("email2"),
            get("cn_address"),
            get("cn_id"),
        ),
    )
    .unwrap();
    let r = dir.join("records");
    std::fs::create_dir_all(&r).unwrap();
    std::fs::write(
        r.join("clients.schema.yaml"),
        "table: clients\ntenant: tp\nkey: client_id\nowner_field: owner\nread_groups: [support, support-lead]\nsensitive: [phone, home]\n",
    )
    .unwrap();
    std::fs::write(
        r.join("clients.jsonl"),
        format!(
            "{}\n",
            json!({"client_id": "C-17", "owner": "cust", "name": "Lin", "phone": get("mobile"),
                   "home": get("cn_address"), "note": format!("prefers mail to {}", get("email"))})
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("principals.yaml"),
        "principals:\n\
         - {id: agent, tenant: tp, groups: [support]}\n\
         - {id: lead, tenant: tp, groups: [support-lead]}\n\
         - {id: cust, tenant: tp, groups: [customer]}\n",
    )
    .unwrap();
}

fn policy() -> Arc<PiiPolicy> {
    let spec = PolicySpec {
        tenants: [(
            "tp".to_string(),
            TenantSpec {
                mask: [
                    "email",
                    "phone",
                    "id_number",
                    "bank_card",
                    "address",
                    "member_no",
                ]
                .map(String::from)
                .to_vec(),
                unmask_groups: vec!["support-lead".into()],
                patterns: vec![OwnPattern {
                    name: "member_no".into(),
                    regex: r"M\d{8}".into(),
                }],
            },
        )]
        .into(),
    };
    Arc::new(PiiPolicy::compile(&spec).unwrap())
}

async fn server(
    seed: u64,
) -> (
    Server,
    Arc<Echo>,
    Values,
    Vec<(&'static str, String)>,
    tempfile::TempDir,
) {
    let (values, named) = Values::of(seed);
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    write_corpus(&corpus, &named);
    let engine = common::hash_engine(&dir.path().join("store"), std::slice::from_ref(&corpus));
    engine.store().set_pii_policy(policy());
    let mut config = common::unthrottled();
    config.audit_questions = AuditQuestions::Text;
    let echo = Arc::new(Echo::default());
    let s = Server::start_with(Arc::new(engine), &[], config, Some(echo.clone())).await;
    std::fs::write(
        &s.keys_path,
        format!(
            "- {{key_sha256: {}, principal: agent}}\n- {{key_sha256: {}, principal: lead}}\n\
             - {{key_sha256: {}, principal: cust}}\n- {{key_sha256: {}, principal: agent, admin: true, operator: true}}\n",
            hash_key(AGENT),
            hash_key(LEAD),
            hash_key(CUST),
            hash_key(OPS),
        ),
    )
    .unwrap();
    s.state.keys.reload().unwrap();
    (s, echo, values, named, dir)
}

/// Every read call a caller can make about the corpus.
fn calls(named: &[(&'static str, String)]) -> Vec<(String, Option<Value>)> {
    let mut out = Vec::new();
    let mut queries = vec![
        "refund dispute call write".to_string(),
        "退款纠纷 致电 邮件".to_string(),
        "account holder card member number".to_string(),
        "核验 身份证".to_string(),
    ];
    // A question carrying a value: it must find nothing by it.
    queries.push(named[0].1.clone());
    for q in &queries {
        for mode in [
            "bm25", "vector", "hybrid", "local", "graph", "global", "drift",
        ] {
            out.push((
                "/v1/search".into(),
                Some(json!({"query": q, "mode": mode, "k": 8, "now": "2026-11-30"})),
            ));
        }
    }
    let carrying = format!(
        "Whose number is {}? Who do I call about a refund dispute?",
        named[0].1
    );
    for question in [
        "Who do I call about a refund dispute?",
        "退款纠纷联系谁？",
        "What is the phone of client C-17?",
        "How is the account holder verified?",
        carrying.as_str(),
    ] {
        out.push((
            "/v1/ask".into(),
            Some(json!({"question": question, "now": "2026-11-30"})),
        ));
        out.push((
            "/v1/chat/completions".into(),
            Some(
                json!({"model": "dossier", "messages": [{"role": "user", "content": question}],
                        "dossier": {"now": "2026-11-30"}}),
            ),
        ));
        // Streamed: Server-Sent Events, masked event by event.
        out.push((
            "/v1/chat/completions".into(),
            Some(
                json!({"model": "dossier", "messages": [{"role": "user", "content": question}],
                        "stream": true, "dossier": {"now": "2026-11-30"}}),
            ),
        ));
    }
    out.push((
        "/mcp".into(),
        Some(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "search", "arguments": {"query": "refund dispute call"}}})),
    ));
    out.push(("/v1/records/clients/C-17".into(), None));
    out.push(("/v1/documents".into(), None));
    for doc in ["escalation", "kefu"] {
        out.push((format!("/v1/documents/{doc}"), None));
        for n in 0..3 {
            out.push((format!("/v1/sections/{doc}@1%23{n}"), None));
        }
        out.push((
            "/v1/graph/evidence".into(),
            Some(json!({"cites": [format!("{doc}@1#0"), format!("{doc}@1#1")]})),
        ));
    }
    for name in ["C-17", "Lin", "escalation", named[0].1.as_str()] {
        out.push((format!("/v1/graph/entity/{}", urlencode(name)), None));
        out.push((
            format!("/v1/graph/neighbors/{}?hops=2", urlencode(name)),
            None,
        ));
    }
    out
}

/// Status, headers and body of every call, as text; ask request ids gathered.
async fn responses(
    s: &Server,
    key: &str,
    calls: &[(String, Option<Value>)],
) -> (Vec<(String, String)>, Vec<String>) {
    let mut out = Vec::new();
    let mut asks = Vec::new();
    for (path, body) in calls {
        let r = match body {
            Some(b) => s.post(path, key, b.clone()).await,
            None => s.get(path, key).await,
        };
        assert!(r.status < 500, "{path}: {} {}", r.status, r.text);
        if path == "/v1/ask" {
            asks.push(r.request_id.clone());
        }
        let headers: String = r
            .headers
            .iter()
            .map(|(k, v)| format!("{k}: {}\n", v.to_str().unwrap_or("")))
            .collect();
        out.push((path.clone(), format!("{headers}\n{}", r.text)));
    }
    for rid in &asks {
        let r = s.get(&format!("/v1/traces/{rid}"), key).await;
        out.push((format!("trace {rid}"), r.text));
    }
    (out, asks)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_sensitive_value_reaches_a_reader_without_the_grant() {
    let seed: u64 = std::env::var("DOSSIER_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (s, echo, values, named, _dir) = server(rng.gen()).await;
    let calls = calls(&named);

    // The granted reader first: the values are there to be found (the test can fail).
    let (lead, _) = responses(&s, LEAD, &calls).await;
    let seen_by_lead: std::collections::BTreeSet<&str> =
        lead.iter().flat_map(|(_, t)| values.in_text(t)).collect();
    assert!(
        seen_by_lead.len() >= 6,
        "seed {seed}: the granted reader should see most values, saw {seen_by_lead:?}"
    );
    let lead_prompts = format!("{:?}", echo.seen.lock().unwrap());
    assert!(
        !values.in_text(&lead_prompts).is_empty(),
        "seed {seed}: the granted reader's prompts carry the values"
    );
    echo.seen.lock().unwrap().clear();

    // Readers without the grant: the support agent (reads every row) and the customer
    // (owns the row).
    for key in [AGENT, CUST] {
        let (told, _) = responses(&s, key, &calls).await;
        for (what, text) in &told {
            let leaked = values.in_text(text);
            assert!(
                leaked.is_empty(),
                "seed {seed}: {key} {what} shows {leaked:?}:\n{text}"
            );
        }
        // Masks show where values were, so the calls did reach the text.
        let masks = told
            .iter()
            .filter(|(_, t)| t.contains("[phone]") || t.contains("[email]"))
            .count();
        assert!(masks > 0, "seed {seed}: {key} never saw a mask");
    }
    // The engine's own exits, without the server's response pass: hits in every mode,
    // sections, records and community reports, for the agent's scope.
    let engine = s.state.engine.clone();
    let leaks = tokio::task::spawn_blocking({
        let values_all = values.all.clone();
        move || {
            let values = Values { all: values_all };
            let day = chrono::NaiveDate::from_ymd_opt(2026, 11, 30).unwrap();
            let scope = engine.scope("agent", day).unwrap();
            let mut text = String::new();
            for mode in ["bm25", "vector", "hybrid", "graph", "global", "drift"] {
                for q in ["refund dispute call write", "退款纠纷 致电 邮件 核验"] {
                    let r = engine
                        .search_scoped_until(
                            &scope,
                            q,
                            mode.parse().unwrap(),
                            8,
                            &dossier_core::cancel::Cancel::new(),
                        )
                        .unwrap();
                    text.push_str(&serde_json::to_string(&r).unwrap());
                    for h in &r.hits {
                        let sec = engine.section_of(&scope, &h.chunk_id).unwrap();
                        text.push_str(&serde_json::to_string(&sec).unwrap());
                    }
                }
            }
            if let dossier_engine::RecordLookup::Found { row, .. } =
                engine.record(&scope, "clients", "C-17").unwrap()
            {
                text.push_str(&serde_json::to_string(&row.fields).unwrap());
            } else {
                panic!("the agent reads every row");
            }
            text.push_str(
                &serde_json::to_string(&engine.community_reports(&scope).unwrap()).unwrap(),
            );
            assert!(text.contains("[phone]"), "the engine's output holds masks");
            values
                .in_text(&text)
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
        }
    })
    .await
    .unwrap();
    assert!(
        leaks.is_empty(),
        "seed {seed}: the engine handed out {leaks:?}"
    );
    // The sensitive fields of the row are hidden whole for the agent.
    let r = s.get("/v1/records/clients/C-17", AGENT).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["fields"]["phone"], "[phone]");
    assert_eq!(r.body["fields"]["home"], "[home]");
    assert_eq!(r.body["fields"]["name"], "Lin");
    // Every prompt sent to the model.
    let prompts = echo.seen.lock().unwrap().clone();
    assert!(!prompts.is_empty(), "the model was consulted");
    let sent = format!("{prompts:?}");
    assert!(
        values.in_text(&sent).is_empty(),
        "seed {seed}: a prompt carried {:?}",
        values.in_text(&sent)
    );
    assert!(
        sent.contains("[phone]") || sent.contains("[email]"),
        "masked evidence reached the model"
    );
    // The audit log (texts kept) and the metrics.
    let a = s.state.audit.clone();
    assert!(
        tokio::task::spawn_blocking(move || a.flush(std::time::Duration::from_secs(20)))
            .await
            .unwrap()
    );
    for principal in ["agent", "cust"] {
        let log = s
            .get(&format!("/v1/audit?principal={principal}&limit=1000"), OPS)
            .await;
        assert_eq!(log.status, 200, "{}", log.body);
        assert!(!log.body["entries"].as_array().unwrap().is_empty());
        assert!(
            values.in_text(&log.text).is_empty(),
            "seed {seed}: audit log of {principal}: {:?}",
            values.in_text(&log.text)
        );
    }
    let metrics = s.get("/metrics", None).await.text;
    assert!(values.in_text(&metrics).is_empty());
    s.stop().await;
}

/// A value in the question finds nothing by it: the query is masked before it is
/// searched, so which document holds a number cannot be learnt from the hits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_in_a_query_is_not_searched_for() {
    let (s, _echo, _values, named, _dir) = server(7).await;
    let phone = named
        .iter()
        .find(|(n, _)| *n == "mobile2")
        .unwrap()
        .1
        .clone();
    let ids = |r: &common::Reply| -> Vec<String> {
        r.body["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["doc_id"].as_str().unwrap().to_string())
            .collect()
    };
    let lead = s
        .post(
            "/v1/search",
            LEAD,
            json!({"query": phone, "mode": "bm25", "k": 5}),
        )
        .await;
    assert_eq!(
        ids(&lead).first().map(String::as_str),
        Some("kefu"),
        "{}",
        lead.body
    );
    let agent = s
        .post(
            "/v1/search",
            AGENT,
            json!({"query": phone, "mode": "bm25", "k": 5}),
        )
        .await;
    assert!(!ids(&agent).contains(&"kefu".to_string()), "{}", agent.body);
    s.stop().await;
}
