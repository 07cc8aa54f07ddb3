//! The scenario cases with the real local model (Qwen2.5-Coder 0.5B Instruct, Q4_K_M,
//! served by llama-server from `scripts/setup-llm`): the model plans tool calls and
//! writes the answers. Every safety property must still hold; how many of the
//! `llm: answer_says` expectations the small model meets is printed, not asserted.
//! Fails (never skips) when the server or the model is missing.

mod common;

use std::time::{Duration, Instant};

/// Failures of expectations about what may be shown, to whom, on what evidence (status,
/// citations, scope, refusals, retries, budgets): they must hold whatever the model
/// writes. The others (which facts an answer mentions) are the model's quality,
/// reported, not asserted.
fn is_safety_failure(f: &str) -> bool {
    f.starts_with("trajectory metrics")
        || f.starts_with("citation ")
        || f.starts_with("insufficient evidence")
        || f.starts_with("status ")
        || f.starts_with("first step")
        || f.starts_with("cites ")
        || f.starts_with("calls after the refusal")
        || f.starts_with("no refused record")
        || f.starts_with("differs from")
        || f.starts_with("no step with status")
        || f.contains(" retried ")
        || f.starts_with("record reads the question did not ask for")
        || f.starts_with("answer contains")
        || f.starts_with("answer lists")
        || f.starts_with("response mentions")
        || f.starts_with("an edge still cites")
        || f.starts_with("report ")
        || f.starts_with("the runner does not know")
}

#[test]
fn scenario_cases_keep_every_safety_property_with_the_local_model() {
    let server = dossier_llm::LocalServer::start().expect("local model (run scripts/setup-llm)");
    let model = server.chat_model(Duration::from_secs(180)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let engine = common::open_scenarios(dir.path());
    let (mut met, mut total) = (0, 0);
    let mut safety = Vec::new();
    let mut quality = Vec::new();
    let (mut model_ms, mut tool_ms, mut model_answers, mut rejected) = (0u64, 0u64, 0, 0);
    let started = Instant::now();
    for case in &common::cases() {
        let own;
        let engine = if case.get("steps").is_some() {
            own = (tempfile::tempdir().unwrap(),);
            &common::open_scenarios(own.0.path())
        } else {
            &engine
        };
        let o = common::run_case(engine, Some(&model), case);
        met += o.says_met;
        total += o.says_total;
        model_ms += o.response.trace.metrics.model_ms;
        tool_ms += o.response.trace.metrics.tool_ms;
        rejected += o.response.trace.rejected_proposals.len();
        if o.response.trace.writer == "model" {
            model_answers += 1;
        }
        eprintln!(
            "{:<28} {:<22} writer {:<10} model {} ms, tools {} ms, {} rejected{}",
            o.id,
            format!("{:?}", o.response.status),
            o.response.trace.writer,
            o.response.trace.metrics.model_ms,
            o.response.trace.metrics.tool_ms,
            o.response.trace.rejected_proposals.len(),
            if o.failures.is_empty() {
                String::new()
            } else {
                format!("  {:?}", o.failures)
            }
        );
        for f in o.failures {
            if is_safety_failure(&f) {
                safety.push((o.id.clone(), f, o.response.answer.clone()));
            } else {
                quality.push((o.id.clone(), f));
            }
        }
    }
    eprintln!(
        "model run: {} s; llm answer_says met {met}/{total}; {model_answers} answers written by the model; \
         model {model_ms} ms vs tools {tool_ms} ms; {rejected} proposals rejected; quality misses: {quality:?}",
        started.elapsed().as_secs()
    );
    assert!(
        safety.is_empty(),
        "safety properties broken with the model: {safety:#?}"
    );

    // Model-written community reports: kept only when every sentence cites a line.
    let oncall = engine
        .scope("oncall", "2026-11-30".parse().unwrap())
        .unwrap();
    let mut reports = engine.community_reports(&oncall).unwrap();
    let mut kept = 0;
    for r in reports.iter_mut().take(3) {
        if dossier_agent::reports::write_model_summary(&model, r).is_ok() {
            kept += 1;
            let s = r.model_summary.as_deref().unwrap();
            for n in 1..=9 {
                if s.contains(&format!("[{n}]")) {
                    assert!(n <= r.summary.len(), "{s}");
                }
            }
        }
    }
    eprintln!("model-written report summaries kept: {kept}/3");
}
