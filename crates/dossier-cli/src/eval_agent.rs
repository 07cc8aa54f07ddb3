//! `dossier eval DATASET --mode agent`: the `ask` loop as a retrieval mode. Every
//! question is put to the agent (as the default tenant's principal `eval`, like every
//! evaluation) and the evidence it gathered is ranked — the passages it cited first, in
//! citation order, then the rest of its pool in the reranked order — and scored with the
//! same Recall@2/5/10 and MRR as the search modes, beside the steps and tool calls each
//! question took and how many of them were follow-ups into documents the evidence named.

use std::collections::HashSet;
use std::path::Path;
use std::time::Instant;

use anyhow::Result;
use dossier_agent::{Agent, AskRequest, AskResponse, EngineTools};
use dossier_engine::eval::{eval_scope, percentile, recall, EVAL_PRINCIPAL};
use dossier_engine::{Engine, Progress};
use serde::Serialize;

use crate::eval_ask::read_questions;

/// One question's outcome, for error analysis.
#[derive(Debug, Clone, Serialize)]
pub struct AgentQuestion {
    pub id: String,
    pub question: String,
    pub gold_ids: Vec<String>,
    /// Passage ids, cited first, then the rest of the pool (up to 10).
    pub retrieved: Vec<String>,
    pub cited: Vec<String>,
    /// The pool's documents in the order they were fetched (before reranking) and
    /// after it, for error analysis.
    pub fetched: Vec<String>,
    pub reranked: Vec<String>,
    #[serde(rename = "recall@5")]
    pub recall_5: f64,
    pub reciprocal_rank: f64,
    pub status: String,
    pub steps: usize,
    pub tool_calls: usize,
    /// Searches the program made into documents the evidence named.
    pub follow_ups: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The agent as one more row of the retrieval table.
#[derive(Debug, Clone, Serialize)]
pub struct AgentModeReport {
    pub mode: &'static str,
    pub questions: usize,
    #[serde(rename = "recall@2")]
    pub recall_2: f64,
    #[serde(rename = "recall@5")]
    pub recall_5: f64,
    #[serde(rename = "recall@10")]
    pub recall_10: f64,
    pub mrr: f64,
    /// Mean per question.
    pub steps: f64,
    pub tool_calls: f64,
    pub follow_ups: f64,
    /// Questions whose ask failed (scored as retrieving nothing).
    pub errors: usize,
    /// The whole ask, per question.
    pub latency_p50_ms: f64,
    pub latency_p99_ms: f64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_question: Vec<AgentQuestion>,
}

/// Each item once, in the order first seen.
fn unique_in_order(items: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for d in items {
        if !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

/// The documents an answer rests on, best first: cited ones in citation order, then the
/// rest of the reranked pool.
pub fn ranked_documents(r: &AskResponse) -> Vec<String> {
    let cited = r.citations.iter().map(|c| c.doc_id.clone());
    let pool = r.trace.rerank.after.iter().map(|p| p.doc_id.clone());
    unique_in_order(cited.chain(pool))
}

/// Puts every question of `dataset` (already ingested into `engine`) to the agent.
pub fn run(
    engine: &Engine,
    dataset: &Path,
    limit: Option<usize>,
    model: Option<&dyn dossier_llm::ChatModel>,
    budget: &dossier_agent::Budget,
    per_question: bool,
    progress: &mut dyn Progress,
) -> Result<AgentModeReport> {
    let mut questions = read_questions(&dataset.join("questions.jsonl"))?;
    if let Some(n) = limit {
        questions.truncate(n);
    }
    let scope = eval_scope(engine)?;
    progress.start("building graph", 1);
    engine.warm_graph(&scope)?;
    progress.finish();
    let tools = EngineTools::new(engine);
    let agent = Agent {
        engine,
        tools: &tools,
        model,
    };
    let now = chrono::Local::now().date_naive();
    let (mut r2, mut r5, mut r10, mut mrr) = (0.0, 0.0, 0.0, 0.0);
    let (mut steps, mut calls, mut follows, mut errors) = (0usize, 0usize, 0usize, 0usize);
    let mut lat = Vec::with_capacity(questions.len());
    let mut per = Vec::with_capacity(questions.len());
    progress.start("eval agent", questions.len() as u64);
    for q in &questions {
        let t = Instant::now();
        let mut req = AskRequest::new(EVAL_PRINCIPAL, &q.question, now);
        req.budget = budget.clone();
        let resp = agent.ask(&req);
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
        let gold: HashSet<&str> = q.gold_ids.iter().map(String::as_str).collect();
        let mut out = AgentQuestion {
            id: q.id.clone(),
            question: q.question.clone(),
            gold_ids: q.gold_ids.clone(),
            retrieved: vec![],
            cited: vec![],
            fetched: vec![],
            reranked: vec![],
            recall_5: 0.0,
            reciprocal_rank: 0.0,
            status: "error".into(),
            steps: 0,
            tool_calls: 0,
            follow_ups: 0,
            error: None,
        };
        match resp {
            Ok(r) => {
                let mut ranked = ranked_documents(&r);
                ranked.truncate(10);
                out.cited = unique_in_order(r.citations.iter().map(|c| c.doc_id.clone()));
                out.reciprocal_rank = ranked
                    .iter()
                    .position(|d| gold.contains(d.as_str()))
                    .map_or(0.0, |i| 1.0 / (i + 1) as f64);
                out.recall_5 = recall(&gold, &ranked, 5);
                r2 += recall(&gold, &ranked, 2);
                r5 += out.recall_5;
                r10 += recall(&gold, &ranked, 10);
                mrr += out.reciprocal_rank;
                out.status = serde_json::to_value(r.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                out.steps = r.trace.steps.len();
                out.tool_calls = r.trace.budget.calls.values().sum();
                out.follow_ups = r.trace.steps.iter().filter(|s| s.why.is_some()).count();
                out.retrieved = ranked;
                let of_chunk = |c: &String| {
                    r.trace
                        .rerank
                        .after
                        .iter()
                        .find(|p| &p.chunk_id == c)
                        .map(|p| p.doc_id.clone())
                };
                out.fetched = unique_in_order(r.trace.rerank.before.iter().filter_map(of_chunk));
                out.reranked =
                    unique_in_order(r.trace.rerank.after.iter().map(|p| p.doc_id.clone()));
            }
            Err(e) => {
                errors += 1;
                out.error = Some(e.to_string());
            }
        }
        steps += out.steps;
        calls += out.tool_calls;
        follows += out.follow_ups;
        per.push(out);
        progress.advance(1);
    }
    progress.finish();
    lat.sort_by(f64::total_cmp);
    let n = questions.len().max(1) as f64;
    Ok(AgentModeReport {
        mode: "agent",
        questions: questions.len(),
        recall_2: r2 / n,
        recall_5: r5 / n,
        recall_10: r10 / n,
        mrr: mrr / n,
        steps: steps as f64 / n,
        tool_calls: calls as f64 / n,
        follow_ups: follows as f64 / n,
        errors,
        latency_p50_ms: percentile(&lat, 0.5),
        latency_p99_ms: percentile(&lat, 0.99),
        per_question: if per_question { per } else { vec![] },
    })
}
