//! Conclusions from conditions, and claims checked against what they cite, on a corpus
//! written by this test (not the shared fixture's sentences): an English returns policy
//! asked about in Chinese and in English, a Chinese warranty policy asked about in
//! English, records whose facts meet, miss or lack each condition, and a scripted model
//! whose claims are supported, unsupported or contradict the program's conclusion.

use std::path::Path;

use chrono::{Duration, NaiveDate};
use dossier_agent::{Agent, AnswerStatus, AskRequest, AskResponse, EngineTools, Outcome};
use dossier_engine::Engine;
use dossier_llm::{ChatResponse, ScriptedChat};

const NOW: &str = "2026-06-30";

fn day(ago: i64) -> String {
    (NOW.parse::<NaiveDate>().unwrap() - Duration::days(ago)).to_string()
}

fn write(dir: &Path, name: &str, text: &str) {
    let p = dir.join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn corpus(dir: &Path) {
    write(
        dir,
        "principals.yaml",
        "principals:\n  - id: ann\n    tenant: t1\n    groups: [customer]\n  - id: bo\n    tenant: t1\n    groups: [customer]\n",
    );
    write(
        dir,
        "docs/returns.md",
        "---\nid: returns-policy\nversion: '3'\ntitle: Returns Policy\ntenant: t1\neffective_from: 2026-01-01\n---\n# Returns Policy\n\n\
## Article 1 Refund window\nUnopened items may be returned within 14 days of delivery.\n\n\
## Article 2 Defects\nItems with a defect may be sent for inspection within 60 days of delivery.\n\n\
## Article 3 Large refunds\nRefunds over 300 must be approved by a supervisor.\n",
    );
    write(
        dir,
        "docs/warranty.md",
        "---\nid: warranty-policy\nversion: '1'\ntitle: 保修政策\ntenant: t1\neffective_from: 2026-01-01\n---\n# 保修政策\n\n\
## 第 1 条 免费维修\n激活后 12 个月内出现性能故障，可以免费维修。\n\n\
## 第 2 条 人为损坏\n人为损坏的设备不适用免费维修。\n",
    );
    write(
        dir,
        "records/orders.schema.yaml",
        "table: orders\ntenant: t1\nkey: order_id\nowner_field: owner\ndate_fields: [delivered_on]\nlinks:\n  - field: policy\n    document: true\n    relation: governed_by\n",
    );
    let rows = [
        // Inside the window, unopened, small: every condition met.
        format!(
            r#"{{"order_id":"B1","owner":"ann","delivered_on":"{}","opened":false,"amount":120,"policy":"returns-policy"}}"#,
            day(5)
        ),
        // Past the window, large and not yet approved.
        format!(
            r#"{{"order_id":"B2","owner":"ann","delivered_on":"{}","opened":false,"amount":500,"supervisor_approved":false,"policy":"returns-policy"}}"#,
            day(20)
        ),
        // No `opened` field at all: the state is unknown.
        format!(
            r#"{{"order_id":"B3","owner":"ann","delivered_on":"{}","amount":80,"policy":"returns-policy"}}"#,
            day(3)
        ),
        format!(
            r#"{{"order_id":"B4","owner":"bo","delivered_on":"{}","opened":false,"amount":10,"policy":"returns-policy"}}"#,
            day(2)
        ),
    ];
    write(dir, "records/orders.jsonl", &(rows.join("\n") + "\n"));
    write(
        dir,
        "records/devices.schema.yaml",
        "table: devices\ntenant: t1\nkey: device_id\nowner_field: owner\ndate_fields: [activated_on]\nlinks:\n  - field: policy\n    document: true\n    relation: governed_by\n",
    );
    let rows = [
        format!(
            r#"{{"device_id":"D-7","owner":"ann","activated_on":"{}","damaged":false,"policy":"warranty-policy"}}"#,
            day(100)
        ),
        format!(
            r#"{{"device_id":"D-8","owner":"ann","activated_on":"{}","damaged":true,"policy":"warranty-policy"}}"#,
            day(30)
        ),
    ];
    write(dir, "records/devices.jsonl", &(rows.join("\n") + "\n"));
}

fn engine(dir: &Path) -> Engine {
    let data = dir.join("data");
    corpus(&data);
    let e = Engine::open(dir.join("store"), "e5").expect("e5 model (run scripts/setup-models)");
    let r = e.ingest(&[data], &mut ()).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    e
}

fn ask(e: &Engine, model: Option<&dyn dossier_llm::ChatModel>, who: &str, q: &str) -> AskResponse {
    let tools = EngineTools::new(e);
    let agent = Agent {
        engine: e,
        tools: &tools,
        model,
    };
    agent
        .ask(&AskRequest::new(who, q, NOW.parse().unwrap()))
        .unwrap()
}

fn outcome_of(r: &AskResponse, section_part: &str) -> Option<Outcome> {
    r.conclusions
        .iter()
        .find(|c| c.section.contains(section_part))
        .map(|c| c.outcome)
}

#[test]
fn conditions_meet_facts_across_languages() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());

    // A Chinese question about an English policy: the clause is read, decided and cited,
    // and the answer concludes in Chinese.
    let r = ask(&e, None, "ann", "订单 B1 没拆封，能退货吗？");
    assert_eq!(r.status, AnswerStatus::Answered, "{}", r.answer);
    assert_eq!(
        outcome_of(&r, "Article 1"),
        Some(Outcome::Met),
        "{:#?}",
        r.conclusions
    );
    assert!(r.answer.contains("符合"), "{}", r.answer);
    assert!(
        r.citations.iter().any(|c| c.section.contains("Article 1")),
        "{:?}",
        r.citations
    );
    assert!(r.trace.sub_questions.iter().all(|s| s.covered));

    // Past the window; the large refund's requirement is triggered and not yet met.
    let r = ask(&e, None, "ann", "Can order B2 still be returned?");
    assert_eq!(
        outcome_of(&r, "Article 1"),
        Some(Outcome::NotMet),
        "{:#?}",
        r.conclusions
    );
    let large = r
        .conclusions
        .iter()
        .find(|c| c.section.contains("Article 3"))
        .expect("article 3");
    assert_eq!(large.outcome, Outcome::NotMet, "{large:#?}");
    assert!(
        large.statement.starts_with("Still needed"),
        "{}",
        large.statement
    );
    assert!(r.answer.contains("Does not meet"), "{}", r.answer);

    // A fact the clause needs is missing: unknown, naming it; never "met".
    let r = ask(&e, None, "ann", "Can order B3 be returned?");
    let window = r
        .conclusions
        .iter()
        .find(|c| c.section.contains("Article 1"))
        .expect("article 1");
    assert_eq!(window.outcome, Outcome::Unknown, "{window:#?}");
    assert!(window.statement.contains("opened"), "{}", window.statement);

    // An English question about a Chinese policy; months count as windows.
    let r = ask(
        &e,
        None,
        "ann",
        "Is device D-7 still covered for free repair?",
    );
    assert_eq!(
        outcome_of(&r, "第 1 条"),
        Some(Outcome::Met),
        "{:#?}",
        r.conclusions
    );
    assert!(r.answer.contains("Meets"), "{}", r.answer);
    let r = ask(&e, None, "ann", "Is device D-8 covered for free repair?");
    assert_eq!(
        outcome_of(&r, "第 2 条"),
        Some(Outcome::Met),
        "{:#?}",
        r.conclusions
    );
    assert!(r.answer.contains("applies"), "{}", r.answer);

    // Another owner's order: nothing computed, nothing concluded.
    let r = ask(&e, None, "ann", "订单 B4 没拆封，能退货吗？");
    assert_eq!(r.status, AnswerStatus::Unavailable);
    assert!(r.conclusions.is_empty() && r.facts.is_empty());
}

#[test]
fn model_claims_are_kept_only_when_their_citation_supports_them() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    let q = "Can order B2 still be returned?";
    let extractive = ask(&e, None, "ann", q);
    // Mark 1 is the first conclusion's clause (Article 1).
    assert!(
        extractive.citations[0].section.contains("Article 1"),
        "{:?}",
        extractive.citations
    );

    // Planner gets nothing usable; the writer says one true thing, one that contradicts
    // the computed conclusion, one about another topic citing the same clause, and one
    // number the clause does not state.
    let m = scripted([
        ChatResponse::text("no tools"),
        ChatResponse::text(
            "Order B2 was delivered 20 days ago, past the 14 days of delivery [1]. \
             Order B2 may be returned within 14 days of delivery [1]. \
             The headphones have a two-year warranty [1]. \
             Refunds are processed within 30 days [1].",
        ),
    ]);
    let r = ask(&e, Some(&m), "ann", q);
    let kept: Vec<&str> = r
        .trace
        .claims
        .iter()
        .filter(|c| c.by == "model" && c.kept)
        .map(|c| c.text.as_str())
        .collect();
    let dropped: Vec<(&str, &str)> = r
        .trace
        .claims
        .iter()
        .filter(|c| c.by == "model" && !c.kept)
        .map(|c| (c.text.as_str(), c.reason.as_str()))
        .collect();
    assert_eq!(kept.len(), 1, "kept {kept:?} dropped {dropped:?}");
    assert!(
        kept[0].contains("20 days ago"),
        "kept {kept:?} dropped {dropped:?}"
    );
    assert_eq!(dropped.len(), 3, "{dropped:?}");
    assert!(
        dropped.iter().any(|(_, why)| why.contains("contradicts")),
        "{dropped:?}"
    );
    assert!(
        dropped.iter().any(|(_, why)| why.contains("30")),
        "{dropped:?}"
    );
    assert!(!r.answer.contains("warranty") && !r.answer.contains("may be returned within"));
    assert_eq!(r.trace.writer, "model");

    // The prompt's example never is a domain sentence the model can copy.
    // The planner's call, then the writer's (the reranker's calls are answered apart).
    let requests: Vec<_> = m
        .requests()
        .into_iter()
        .filter(|q| q.messages[0].content != dossier_agent::rerank::JUDGE_INSTRUCTION)
        .collect();
    let writer_prompt = &requests[1];
    let text: String = writer_prompt
        .messages
        .iter()
        .map(|m| m.content.clone())
        .collect();
    assert!(
        !text.contains("cannot be returned [1]") && !text.contains("不能无理由退货 [1]"),
        "{text}"
    );
    // The computed conclusions reach the model as ground truth.
    assert!(text.contains("Does not meet"), "{text}");

    // Nothing supported: the extractive answer stands, and the trace says why.
    let m = scripted([
        ChatResponse::text("no tools"),
        ChatResponse::text("不能无理由退货 [1]。"),
    ]);
    let r = ask(
        &e,
        Some(&m),
        "ann",
        "Is device D-7 still covered for free repair?",
    );
    assert_eq!(
        r.trace.writer, "extractive",
        "{} {:?}",
        r.answer, r.trace.claims
    );
    assert!(r.trace.claims.iter().any(|c| c.by == "model" && !c.kept));
    assert!(r
        .trace
        .degraded
        .iter()
        .any(|d| d.contains("no verifiable claim")));
}

#[test]
fn a_later_planning_round_sees_the_evidence_and_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    let follow_up = dossier_llm::ToolCall::new(
        "c1",
        "document_search",
        serde_json::json!({"query": "supervisor approval of large refunds"}),
    );
    let owner_try = dossier_llm::ToolCall::new(
        "c2",
        "record",
        serde_json::json!({"table": "orders", "key": "B4", "owner": "bo"}),
    );
    let m = scripted([
        ChatResponse::text("no tools"),
        ChatResponse::calls(vec![follow_up, owner_try]),
        ChatResponse::calls(vec![]),
        ChatResponse::text("nothing"),
        ChatResponse::text("nothing"),
    ]);
    let r = ask(&e, Some(&m), "ann", "Is there a restocking fee on returns?");
    let requests = m.requests();
    let planner_calls: Vec<&dossier_llm::ChatRequest> =
        requests.iter().filter(|q| !q.tools.is_empty()).collect();
    assert_eq!(
        planner_calls.len(),
        2,
        "max_planner_calls bounds the rounds"
    );
    let second: String = planner_calls[1]
        .messages
        .iter()
        .map(|m| m.content.clone())
        .collect();
    assert!(
        second.contains("<<<EVIDENCE") && second.contains("Not yet answered"),
        "{second}"
    );
    assert!(
        r.trace.steps.iter().any(|s| s.proposed_by == "model"
            && s.args.to_string().contains("supervisor approval")),
        "{:?}",
        r.trace.steps
    );
    // The identity-bearing proposal was refused, not run.
    assert!(r
        .trace
        .rejected_proposals
        .iter()
        .any(|p| p.reason.contains("owner")));
    assert!(!r
        .trace
        .steps
        .iter()
        .any(|s| s.args.to_string().contains("B4")));
}

/// A scripted model for the planner and the writer; the reranker's judgements are
/// answered outside the script (every passage "part of the answer").
fn scripted<const N: usize>(responses: [ChatResponse; N]) -> ScriptedChat {
    ScriptedChat::new(responses).answering(
        dossier_agent::rerank::JUDGE_INSTRUCTION,
        ChatResponse::text(r#"{"score": 2}"#),
    )
}
