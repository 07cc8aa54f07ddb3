//! Retrieval evaluation over a dataset directory (`corpus.jsonl` + `questions.jsonl`).
//!
//! The corpus is ingested into the engine's store first (incrementally: a second run
//! does no work). Questions are asked as a principal of the default tenant, which may
//! read every passage that names no tenant or ACL.

use std::collections::HashSet;
use std::io::BufRead;
use std::path::Path;
use std::time::Instant;

use dossier_store::Scope;
use serde::{Deserialize, Serialize};

use crate::ingest::{IngestReport, Progress};
use crate::{Engine, Error, Mode, Result};

#[derive(Debug, Deserialize)]
struct Question {
    id: String,
    question: String,
    #[serde(default)]
    gold_ids: Vec<String>,
}

/// One question's outcome, for error analysis.
#[derive(Debug, Clone, Serialize)]
pub struct QuestionResult {
    pub id: String,
    pub question: String,
    pub gold_ids: Vec<String>,
    /// Passage ids retrieved, best first (up to 10).
    pub retrieved: Vec<String>,
    #[serde(rename = "recall@5")]
    pub recall_5: f64,
    /// 1 / rank of the first gold passage within the top 10, or 0.
    pub reciprocal_rank: f64,
}

/// Figures for one mode.
#[derive(Debug, Clone, Serialize)]
pub struct ModeReport {
    pub mode: Mode,
    pub questions: usize,
    #[serde(rename = "recall@2")]
    pub recall_2: f64,
    #[serde(rename = "recall@5")]
    pub recall_5: f64,
    #[serde(rename = "recall@10")]
    pub recall_10: f64,
    pub mrr: f64,
    /// Whole search call: scope filter, ranking, hydration from the catalog.
    pub latency_p50_ms: f64,
    pub latency_p99_ms: f64,
    /// Ranking alone (the index search under the admission set, with query embedding).
    pub rank_p50_ms: f64,
    pub rank_p99_ms: f64,
    pub per_question: Vec<QuestionResult>,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct EvalReport {
    pub dataset: String,
    /// Chunks ranked per question.
    pub depth: usize,
    pub ingest: IngestReport,
    /// Graph, view and community build times, when a graph mode ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph_build: Option<crate::GraphBuildStats>,
    pub modes: Vec<ModeReport>,
}

/// Share of `gold` among the first `k` of `got`.
pub fn recall(gold: &HashSet<&str>, got: &[String], k: usize) -> f64 {
    if gold.is_empty() {
        return 0.0;
    }
    got.iter()
        .take(k)
        .filter(|d| gold.contains(d.as_str()))
        .count() as f64
        / gold.len() as f64
}

pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

/// How an evaluation run asks its questions.
#[derive(Debug, Clone, Copy)]
pub struct EvalOptions {
    /// Only the first N questions.
    pub limit: Option<usize>,
    /// Chunks ranked per question. Passages can span several chunks, so the ranking
    /// goes deeper than the 10 passages scored; a depth of 10 can only lower recall@10.
    pub depth: usize,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            limit: None,
            depth: 30,
        }
    }
}

/// The principal evaluation reads as: `eval` in the default tenant with no groups,
/// stored in the catalog like any other (a scope only comes from a stored principal).
pub const EVAL_PRINCIPAL: &str = "eval";

/// The scope of [`EVAL_PRINCIPAL`] today, adding the principal to the store when it is
/// not there yet (answer-level evaluation asks as the same principal).
pub fn eval_scope(engine: &Engine) -> Result<Scope> {
    let today = chrono::Utc::now().date_naive();
    if let Ok(s) = engine.scope(EVAL_PRINCIPAL, today) {
        return Ok(s);
    }
    engine.store().commit(dossier_store::catalog::CommitBatch {
        principals: dossier_store::principals::by_operator([dossier_core::Principal {
            id: EVAL_PRINCIPAL.into(),
            tenant: engine.options.default_tenant.clone(),
            groups: vec![],
            kbs: None,
        }])
        .map_err(|e| crate::Error::Invalid(e.to_string()))?,
        ..Default::default()
    })?;
    engine.scope(EVAL_PRINCIPAL, today)
}

/// Runs the dataset in `dir` in each mode, in one run.
pub fn run(
    engine: &Engine,
    dir: &Path,
    modes: &[Mode],
    options: EvalOptions,
    progress: &mut dyn Progress,
) -> Result<EvalReport> {
    if options.depth == 0 {
        return Err(Error::Invalid("eval depth must be at least 1".into()));
    }
    let corpus = dir.join("corpus.jsonl");
    let qpath = dir.join("questions.jsonl");
    for p in [&corpus, &qpath] {
        if !p.is_file() {
            return Err(Error::Invalid(format!(
                "{}: not found (a dataset has corpus.jsonl and questions.jsonl)",
                p.display()
            )));
        }
    }
    let ingest = engine.ingest(std::slice::from_ref(&corpus), progress)?;
    let file = std::fs::File::open(&qpath)
        .map_err(|e| Error::Invalid(format!("{}: {e}", qpath.display())))?;
    let mut questions = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line =
            line.map_err(|e| Error::Invalid(format!("{}:{}: {e}", qpath.display(), i + 1)))?;
        if line.trim().is_empty() {
            continue;
        }
        let q: Question = serde_json::from_str(&line)
            .map_err(|e| Error::Invalid(format!("{}:{}: {e}", qpath.display(), i + 1)))?;
        questions.push(q);
    }
    if let Some(n) = options.limit {
        questions.truncate(n);
    }
    let scope = eval_scope(engine)?;
    // Built once up front, so graph-mode latencies are per query, not first-query.
    let graph_build = if modes.iter().any(|m| m.is_graph()) {
        progress.start("building graph", 1);
        let stats = engine.warm_graph(&scope)?;
        progress.finish();
        Some(stats)
    } else {
        None
    };
    let mut reports = Vec::new();
    for &mode in modes {
        // Each mode's latency includes its query embeddings: no vector cached by the
        // mode before it.
        engine.clear_query_cache();
        progress.start(&format!("eval {}", mode.name()), questions.len() as u64);
        let mut per = Vec::with_capacity(questions.len());
        let mut lat = Vec::with_capacity(questions.len());
        let mut rank_lat = Vec::with_capacity(questions.len());
        let (mut r2, mut r5, mut r10, mut mrr) = (0.0, 0.0, 0.0, 0.0);
        for q in &questions {
            let t = Instant::now();
            // Passages can span several chunks: rank deeper and keep each passage once.
            let ranked = engine.rank(&scope, &q.question, mode, options.depth)?;
            rank_lat.push(t.elapsed().as_secs_f64() * 1000.0);
            let resp = engine.hydrate(&scope, &ranked, options.depth)?;
            lat.push(t.elapsed().as_secs_f64() * 1000.0);
            let mut seen = HashSet::new();
            let retrieved: Vec<String> = resp
                .hits
                .into_iter()
                .map(|h| h.doc_id)
                .filter(|d| seen.insert(d.clone()))
                .take(10)
                .collect();
            let gold: HashSet<&str> = q.gold_ids.iter().map(String::as_str).collect();
            let rr = retrieved
                .iter()
                .position(|d| gold.contains(d.as_str()))
                .map_or(0.0, |i| 1.0 / (i + 1) as f64);
            r2 += recall(&gold, &retrieved, 2);
            r5 += recall(&gold, &retrieved, 5);
            r10 += recall(&gold, &retrieved, 10);
            mrr += rr;
            per.push(QuestionResult {
                id: q.id.clone(),
                question: q.question.clone(),
                gold_ids: q.gold_ids.clone(),
                recall_5: recall(&gold, &retrieved, 5),
                retrieved,
                reciprocal_rank: rr,
            });
            progress.advance(1);
        }
        progress.finish();
        lat.sort_by(f64::total_cmp);
        rank_lat.sort_by(f64::total_cmp);
        let n = questions.len().max(1) as f64;
        reports.push(ModeReport {
            mode,
            questions: questions.len(),
            recall_2: r2 / n,
            recall_5: r5 / n,
            recall_10: r10 / n,
            mrr: mrr / n,
            latency_p50_ms: percentile(&lat, 0.5),
            latency_p99_ms: percentile(&lat, 0.99),
            rank_p50_ms: percentile(&rank_lat, 0.5),
            rank_p99_ms: percentile(&rank_lat, 0.99),
            per_question: per,
        });
    }
    Ok(EvalReport {
        dataset: dir.display().to_string(),
        depth: options.depth,
        ingest,
        graph_build,
        modes: reports,
    })
}
