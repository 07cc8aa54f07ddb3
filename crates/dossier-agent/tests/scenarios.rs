//! Every case of ../shared/scenarios/scenarios.yaml, with no model configured (the
//! deterministic planner and the extractive answer), on the real e5 store.

mod common;

#[test]
fn every_scenario_case_holds_without_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let engine = common::open_scenarios(dir.path());
    let cases = common::cases();
    assert!(
        cases.len() >= 19,
        "scenarios.yaml has {} cases",
        cases.len()
    );
    let mut failed = Vec::new();
    for case in &cases {
        // A case with steps changes the store: it gets one of its own.
        let own;
        let engine = if case.get("steps").is_some() {
            own = (tempfile::tempdir().unwrap(),);
            &common::open_scenarios(own.0.path())
        } else {
            &engine
        };
        let o = common::run_case(engine, None, case);
        eprintln!(
            "{:<28} {:<22} {} steps, {} citations{}",
            o.id,
            format!("{:?}", o.response.status),
            o.response.trace.steps.len(),
            o.response.citations.len(),
            if o.failures.is_empty() {
                String::new()
            } else {
                format!("  FAILED: {:?}", o.failures)
            }
        );
        if !o.failures.is_empty() {
            failed.push((o.id, o.failures, o.response.answer));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// A model's free search (no date) finds the version in force today; for an order whose
/// business date falls under the earlier version, that text is no evidence: nothing of
/// it is cited or concluded from. (The 1.5B model proposed exactly this search.)
#[test]
fn a_models_free_search_never_brings_another_version_of_a_linked_document() {
    let dir = tempfile::tempdir().unwrap();
    let engine = common::open_scenarios(dir.path());
    let search = dossier_llm::ToolCall::new(
        "c1",
        "document_search",
        serde_json::json!({"query": "耳机 无理由退货 签收 拆封"}),
    );
    let model = dossier_llm::ScriptedChat::new([
        dossier_llm::ChatResponse::calls(vec![search.clone()]),
        dossier_llm::ChatResponse::calls(vec![search]),
        dossier_llm::ChatResponse::text("无"),
    ])
    .answering(
        dossier_agent::rerank::JUDGE_INSTRUCTION,
        dossier_llm::ChatResponse::text(r#"{"score": 2}"#),
    );
    let r = common::ask(
        &engine,
        Some(&model),
        "u7",
        "订单 A124 的耳机还没拆封，能无理由退货吗？",
        common::Clock {
            now: "2026-09-05".parse().unwrap(),
            as_of: None,
            mode: None,
        },
        None,
    );
    assert!(
        r.trace.steps.iter().any(|s| s.proposed_by == "model"),
        "the model's search ran: {:?}",
        r.trace.steps
    );
    assert!(
        r.citations.iter().all(|c| c.version == "V1"),
        "{:?}",
        r.citations
    );
    assert!(
        r.conclusions.iter().all(|c| c.version == "V1"),
        "{:#?}",
        r.conclusions
    );
    assert!(r
        .conclusions
        .iter()
        .any(|c| c.outcome == dossier_agent::Outcome::Met));
}
