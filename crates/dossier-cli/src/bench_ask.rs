//! `dossier bench ask`: the agent loop's own cost and its trajectory metrics, over the
//! scenario questions (a scenarios.yaml) or a dataset's questions.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use chrono::NaiveDate;
use dossier_agent::{Agent, AskRequest, EngineTools};
use dossier_core::Principal;
use dossier_engine::eval::percentile;
use dossier_engine::{Engine, Mode};
use serde::Serialize;

#[derive(clap::Args)]
pub struct AskBenchArgs {
    /// A scenarios.yaml (cases with `as`, `now`, `question`), or a dataset directory
    /// (questions.jsonl, asked as the default tenant's principal `eval`).
    source: PathBuf,
    /// Times each question is asked.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Only the first N questions.
    #[arg(long)]
    limit: Option<usize>,
    /// `none`, `local` (the llama-server from scripts/setup-llm with the 1.5B model when
    /// installed, else the 0.5B), `local:0.5b`, `local:1.5b`, or an OpenAI-compatible URL.
    #[arg(long, default_value = "none")]
    llm: String,
}

struct Q {
    who: String,
    question: String,
    now: NaiveDate,
    as_of: Option<NaiveDate>,
    mode: Option<Mode>,
}

#[derive(Serialize, Default)]
struct Report {
    questions: usize,
    asks: usize,
    total_p50_ms: f64,
    total_p99_ms: f64,
    /// Time outside tools and the model: planning, validation, judging, writing, verifying.
    loop_overhead_p50_ms: f64,
    loop_overhead_p99_ms: f64,
    tool_ms_total: u64,
    model_ms_total: u64,
    steps_mean: f64,
    repeated_queries: usize,
    budget_overruns: usize,
    out_of_scope_executed: usize,
    rejected_proposals: usize,
    statuses: std::collections::BTreeMap<String, usize>,
    /// Router classes the questions were put in.
    routes: std::collections::BTreeMap<String, usize>,
    /// Answer claims checked, and how many the verifier dropped (groundedness, as
    /// `eval --ask` reports it: kept / checked).
    claims: usize,
    claims_dropped: usize,
    groundedness: Option<f64>,
    /// Conclusions drawn from clause conditions, by outcome.
    conclusions: std::collections::BTreeMap<String, usize>,
    /// Answers the model wrote (the rest are extractive).
    model_answers: usize,
}

fn load(engine: &Engine, a: &AskBenchArgs) -> Result<Vec<Q>> {
    let mut out = Vec::new();
    if a.source.is_dir() {
        let path = a.source.join("questions.jsonl");
        let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
        let tenant = "default";
        if engine.principal("eval").is_err() {
            // The dataset store has no principals: one reader of the default tenant.
            engine
                .store()
                .commit(dossier_engine::dossier_store::catalog::CommitBatch {
                    principals: dossier_engine::dossier_store::principals::by_operator([
                        Principal {
                            id: "eval".into(),
                            tenant: tenant.into(),
                            groups: vec![],
                            kbs: None,
                        },
                    ])
                    .map_err(|e| anyhow::anyhow!("{e}"))?,
                    ..Default::default()
                })?;
            eprintln!("added principal `eval` (tenant {tenant}) to the store");
        }
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line)?;
            out.push(Q {
                who: "eval".into(),
                question: v["question"].as_str().unwrap_or_default().to_string(),
                now: chrono::Local::now().date_naive(),
                as_of: None,
                mode: None,
            });
        }
    } else {
        let text =
            std::fs::read_to_string(&a.source).with_context(|| a.source.display().to_string())?;
        let cases: Vec<serde_norway::Value> = serde_norway::from_str(&text)?;
        for c in cases {
            // Cases that change the store or inject faults are the test suite's business.
            if c.get("steps").is_some() || c.get("fault").is_some() {
                continue;
            }
            let s = |k: &str| c.get(k).and_then(|v| v.as_str()).map(str::to_string);
            let d = |k: &str| -> Option<NaiveDate> {
                c.get(k)
                    .and_then(|v| serde_norway::to_string(v).ok())
                    .and_then(|t| t.trim().trim_matches('\'').parse().ok())
            };
            out.push(Q {
                who: s("as").unwrap_or_default(),
                question: s("question").unwrap_or_default(),
                now: d("now").unwrap_or_else(|| chrono::Local::now().date_naive()),
                as_of: d("as_of"),
                mode: s("mode").map(|m| m.parse()).transpose()?,
            });
        }
    }
    if let Some(n) = a.limit {
        out.truncate(n);
    }
    if out.is_empty() {
        bail!("no questions in {}", a.source.display());
    }
    Ok(out)
}

pub fn run(engine: &Engine, a: &AskBenchArgs, json: bool) -> Result<ExitCode> {
    let questions = load(engine, a)?;
    let llm = crate::ask::Llm::connect(&a.llm, "default")?;
    let tools = EngineTools::new(engine);
    let agent = Agent {
        engine,
        tools: &tools,
        model: llm.model.as_deref(),
    };
    let mut r = Report {
        questions: questions.len(),
        ..Default::default()
    };
    let (mut totals, mut overheads, mut steps) = (Vec::new(), Vec::new(), 0usize);
    for _ in 0..a.repeat.max(1) {
        for q in &questions {
            let mut req = AskRequest::new(&q.who, &q.question, q.now);
            req.as_of = q.as_of;
            req.mode = q.mode;
            let t = Instant::now();
            let resp = agent.ask(&req)?;
            let total = t.elapsed().as_secs_f64() * 1000.0;
            let m = &resp.trace.metrics;
            totals.push(total);
            overheads.push((total - m.tool_ms as f64 - m.model_ms as f64).max(0.0));
            r.tool_ms_total += m.tool_ms;
            r.model_ms_total += m.model_ms;
            r.repeated_queries += m.repeated_queries;
            r.budget_overruns += m.budget_overruns;
            r.out_of_scope_executed += m.out_of_scope_executed;
            r.rejected_proposals += m.rejected_proposals;
            steps += resp.trace.steps.len();
            let status = serde_json::to_value(resp.status)?
                .as_str()
                .unwrap_or_default()
                .to_string();
            *r.statuses.entry(status).or_default() += 1;
            *r.routes
                .entry(resp.trace.route.class.as_str().to_string())
                .or_default() += 1;
            r.claims += resp.trace.claims.len();
            r.claims_dropped += resp.trace.claims.iter().filter(|c| !c.kept).count();
            for c in &resp.conclusions {
                let o = serde_json::to_value(c.outcome)?
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                *r.conclusions.entry(o).or_default() += 1;
            }
            if resp.trace.writer == "model" {
                r.model_answers += 1;
            }
            r.asks += 1;
        }
    }
    totals.sort_by(f64::total_cmp);
    overheads.sort_by(f64::total_cmp);
    r.total_p50_ms = percentile(&totals, 0.5);
    r.total_p99_ms = percentile(&totals, 0.99);
    r.loop_overhead_p50_ms = percentile(&overheads, 0.5);
    r.loop_overhead_p99_ms = percentile(&overheads, 0.99);
    r.steps_mean = steps as f64 / r.asks.max(1) as f64;
    r.groundedness = (r.claims > 0).then(|| (r.claims - r.claims_dropped) as f64 / r.claims as f64);
    if json {
        crate::print_json(&r)?;
    } else {
        println!(
            "{} questions × {}: total p50 {:.1} ms, p99 {:.1} ms; loop overhead p50 {:.2} ms, p99 {:.2} ms; \
             tools {} ms, model {} ms in all; {:.1} steps per question",
            r.questions, a.repeat, r.total_p50_ms, r.total_p99_ms, r.loop_overhead_p50_ms,
            r.loop_overhead_p99_ms, r.tool_ms_total, r.model_ms_total, r.steps_mean
        );
        println!(
            "repeated queries {}, budget overruns {}, out-of-scope proposals executed {}, rejected proposals {}; statuses {:?}",
            r.repeated_queries, r.budget_overruns, r.out_of_scope_executed, r.rejected_proposals, r.statuses
        );
        println!(
            "routes {:?}; claims {} ({} dropped, groundedness {}); conclusions {:?}; {} answers by the model",
            r.routes,
            r.claims,
            r.claims_dropped,
            r.groundedness.map_or("-".into(), |g| format!("{g:.3}")),
            r.conclusions,
            r.model_answers
        );
    }
    Ok(ExitCode::SUCCESS)
}
