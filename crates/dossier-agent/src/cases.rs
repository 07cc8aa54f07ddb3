//! Case files: a list of questions with who asks, when, and what must hold of the
//! answer (the format of `../shared/scenarios/scenarios.yaml` and
//! `../shared/enterprise-dev/cases.yaml`). [`run_case`] asks one case through the agent
//! and checks every expectation it names; an expectation key the runner does not know
//! is a failure, so no case is half-checked. [`CaseReport`] adds the outcomes up by the
//! case's `kind` and `lang`: the figures `dossier eval --cases` prints and the
//! enterprise test reports.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use dossier_engine::{Engine, Mode};
use serde::Serialize;
use serde_norway::Value;

use crate::{
    Agent, AnswerStatus, AskRequest, AskResponse, EngineTools, FaultInjector, ToolRunner,
    ToolStatus,
};

/// A case file that cannot be read as cases.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    #[error("cases: {0}")]
    Parse(String),
    #[error("case {id}: {what}")]
    Case { id: String, what: String },
    #[error(transparent)]
    Agent(#[from] crate::Error),
    #[error(transparent)]
    Engine(#[from] dossier_engine::Error),
}

/// Reads a case file (a YAML list of cases).
pub fn parse_cases(text: &str) -> Result<Vec<Value>, CaseError> {
    serde_norway::from_str::<Vec<Value>>(text).map_err(|e| CaseError::Parse(e.to_string()))
}

fn s<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

fn date(v: &Value, k: &str) -> Option<NaiveDate> {
    match v.get(k)? {
        Value::String(s) => s.parse().ok(),
        other => serde_norway::to_string(other).ok()?.trim().parse().ok(),
    }
}

/// What one case produced and which expectations failed.
pub struct CaseOutcome {
    pub id: String,
    /// The case's `kind` and `lang` (descriptions, not expectations; "" when absent).
    pub kind: String,
    pub lang: String,
    /// The status the case expects, when it names one.
    pub expected: Option<AnswerStatus>,
    pub response: AskResponse,
    pub failures: Vec<String>,
    /// `llm: answer_says` phrases found in the answer, and how many there were.
    pub says_met: usize,
    pub says_total: usize,
}

/// When and how a question is asked.
#[derive(Clone, Copy)]
pub struct Clock {
    pub now: NaiveDate,
    pub as_of: Option<NaiveDate>,
    pub mode: Option<Mode>,
}

#[allow(clippy::too_many_arguments)]
pub fn ask(
    engine: &Engine,
    model: Option<&dyn dossier_llm::ChatModel>,
    who: &str,
    question: &str,
    clock: Clock,
    fault: Option<(&str, ToolStatus)>,
) -> crate::Result<AskResponse> {
    let Clock { now, as_of, mode } = clock;
    let tools = EngineTools::new(engine);
    let injector;
    let runner: &dyn ToolRunner = match fault {
        Some((tool, status)) => {
            injector = FaultInjector {
                inner: &tools,
                faults: vec![(tool.to_string(), status)],
            };
            &injector
        }
        None => &tools,
    };
    let agent = Agent {
        engine,
        tools: runner,
        model,
    };
    let mut req = AskRequest::new(who, question, now);
    req.as_of = as_of;
    req.mode = mode;
    agent.ask(&req)
}

fn cite_matches(c: &crate::Citation, want: &Value) -> bool {
    let doc = s(want, "doc").unwrap_or("*");
    (doc == "*" || c.doc_id == doc)
        && s(want, "version").is_none_or(|v| c.version == v)
        && s(want, "section").is_none_or(|sec| c.section.contains(sec))
}

fn list(v: &Value) -> Vec<Value> {
    v.as_sequence().cloned().unwrap_or_default()
}

fn strings(v: &Value) -> Vec<String> {
    list(v)
        .iter()
        .filter_map(|x| x.as_str().map(str::to_string))
        .collect()
}

fn field<'a>(v: &'a Value, k: &str, id: &str) -> Result<&'a str, CaseError> {
    s(v, k).ok_or_else(|| CaseError::Case {
        id: id.to_string(),
        what: format!("no `{k}`"),
    })
}

/// Runs one case (a `steps` case mutates the engine: give it its own store).
pub fn run_case(
    engine: &Engine,
    model: Option<&dyn dossier_llm::ChatModel>,
    case: &Value,
) -> Result<CaseOutcome, CaseError> {
    let id = s(case, "id").unwrap_or("?").to_string();
    let bad = |what: String| CaseError::Case {
        id: id.clone(),
        what,
    };
    let default_now: NaiveDate = "2026-11-30".parse().expect("a date");
    let expect = case.get("expect").cloned().unwrap_or(Value::Null);
    let mut failures = Vec::new();
    let (who, question, now, as_of, mode) = if let Some(steps) = case.get("steps") {
        let mut ask_step = None;
        for st in list(steps) {
            if let Some(d) = s(&st, "delete") {
                engine.delete(d, None)?;
            }
            if let Some(a) = st.get("ask") {
                ask_step = Some(a.clone());
            }
        }
        let a = ask_step.ok_or_else(|| bad("a steps case has no ask step".into()))?;
        (
            field(&a, "as", &id)?.to_string(),
            field(&a, "question", &id)?.to_string(),
            date(&a, "now").unwrap_or(default_now),
            date(&a, "as_of"),
            None,
        )
    } else {
        let mode = match s(case, "mode") {
            Some(m) => Some(
                m.parse::<Mode>()
                    .map_err(|_| bad(format!("unknown mode {m:?}")))?,
            ),
            None => None,
        };
        (
            field(case, "as", &id)?.to_string(),
            field(case, "question", &id)?.to_string(),
            date(case, "now").ok_or_else(|| bad("no `now` date".into()))?,
            date(case, "as_of"),
            mode,
        )
    };
    let fault = match case.get("fault") {
        Some(f) => {
            let status = match field(f, "kind", &id)? {
                "timeout" => ToolStatus::Timeout,
                "no_hit" => ToolStatus::NoHit,
                "forbidden" => ToolStatus::Forbidden,
                other => return Err(bad(format!("unknown fault kind {other:?}"))),
            };
            Some((field(f, "tool", &id)?.to_string(), status))
        }
        None => None,
    };
    let expected = match s(&expect, "status") {
        Some(st) => Some(
            serde_json::from_value::<AnswerStatus>(serde_json::json!(st))
                .map_err(|_| bad(format!("unknown status {st:?}")))?,
        ),
        None => None,
    };
    let clock = Clock { now, as_of, mode };
    let r = ask(
        engine,
        model,
        &who,
        &question,
        clock,
        fault.as_ref().map(|(t, st)| (t.as_str(), *st)),
    )?;
    let everything = serde_json::to_string(&r).unwrap_or_default();
    let quotes: String = r.citations.iter().map(|c| c.quote.as_str()).collect();
    let mut fail = |m: String| failures.push(m);

    // Trajectory invariants, for every case.
    let m = &r.trace.metrics;
    if m.repeated_queries != 0 || m.budget_overruns != 0 || m.out_of_scope_executed != 0 {
        fail(format!("trajectory metrics not zero: {m:?}"));
    }
    for c in &r.citations {
        if !r
            .trace
            .steps
            .iter()
            .any(|st| st.evidence.contains(&c.chunk_id))
        {
            fail(format!(
                "citation {} is no evidence of this run",
                c.chunk_id
            ));
        }
    }

    let (mut says_met, mut says_total) = (0, 0);
    for (k, v) in expect.as_mapping().cloned().unwrap_or_default() {
        let key = k.as_str().unwrap_or_default().to_string();
        match key.as_str() {
            "status" => {
                let want = v.as_str().unwrap_or_default();
                let got = serde_json::to_value(r.status).unwrap_or_default();
                if got != want {
                    fail(format!("status {got} != {want}"));
                }
            }
            "record_read_first" => {
                let (t, key) = v
                    .as_str()
                    .and_then(|x| x.split_once('/'))
                    .ok_or_else(|| bad("record_read_first is TABLE/KEY".into()))?;
                let first = r.trace.steps.first();
                let ok = first.is_some_and(|st| {
                    st.action == "record"
                        && st.args["table"] == t
                        && st.args["key"] == key
                        && st.status == ToolStatus::Ok
                });
                if !ok {
                    fail(format!(
                        "first step is not record {t}/{key}: {:?}",
                        first.map(|s| (&s.action, &s.args))
                    ));
                }
            }
            "cites_all" => {
                for want in list(&v) {
                    if !r.citations.iter().any(|c| cite_matches(c, &want)) {
                        fail(format!("no citation of {want:?}"));
                    }
                }
            }
            "cites_none" => {
                for want in list(&v) {
                    if let Some(c) = r.citations.iter().find(|c| cite_matches(c, &want)) {
                        fail(format!("cites {}@{} ({want:?})", c.doc_id, c.version));
                    }
                }
            }
            "facts" => {
                for (fk, fv) in v.as_mapping().cloned().unwrap_or_default() {
                    let fk = fk.as_str().unwrap_or_default();
                    let want = serde_json::to_value(&fv).unwrap_or_default();
                    if r.facts.get(fk) != Some(&want) {
                        fail(format!("fact {fk} = {:?}, want {want}", r.facts.get(fk)));
                    }
                }
            }
            "no_search_after_refusal" => {
                let refused = r
                    .trace
                    .steps
                    .iter()
                    .position(|st| st.action == "record" && st.status != ToolStatus::Ok);
                match refused {
                    Some(i) if r.trace.steps.len() > i + 1 => fail(format!(
                        "calls after the refusal: {:?}",
                        &r.trace.steps[i + 1..]
                    )),
                    None => fail("no refused record read".into()),
                    _ => {}
                }
            }
            "same_answer_as" => {
                let other = ask(
                    engine,
                    model,
                    field(&v, "as", &id)?,
                    field(&v, "question", &id)?,
                    clock,
                    None,
                )?;
                if other.status != r.status || other.answer != r.answer {
                    fail(format!(
                        "differs from {v:?}: {:?} / {:?}",
                        other.status, other.answer
                    ));
                }
            }
            "tool_status_seen" => {
                let want: ToolStatus = serde_json::from_value(serde_json::json!(v.as_str()))
                    .map_err(|_| bad(format!("unknown tool status {v:?}")))?;
                if !r.trace.steps.iter().any(|st| st.status == want) {
                    fail(format!("no step with status {want:?}"));
                }
            }
            "retries_at_most" => {
                let n = v
                    .as_u64()
                    .ok_or_else(|| bad("retries_at_most is a number".into()))?
                    as usize;
                if let Some(st) = r.trace.steps.iter().find(|st| st.attempt > n + 1) {
                    fail(format!("{} retried {} times", st.action, st.attempt - 1));
                }
            }
            "no_record_reads_beyond_own" => {
                let reads: Vec<_> = r
                    .trace
                    .steps
                    .iter()
                    .filter(|st| st.action == "record")
                    .filter(|st| !question.contains(st.args["key"].as_str().unwrap_or("\u{0}")))
                    .collect();
                if !reads.is_empty() {
                    fail(format!(
                        "record reads the question did not ask for: {reads:?}"
                    ));
                }
            }
            "answer_never_contains" => {
                for w in strings(&v) {
                    if r.answer.contains(&w) || quotes.contains(&w) {
                        fail(format!("answer contains {w}"));
                    }
                }
            }
            "graph_path" => {
                for edge in strings(&v) {
                    let parts: Vec<&str> = edge.split_whitespace().collect();
                    let shown = format!("{} —{}→ {}", parts[0], parts[1], parts[2]);
                    if !r.answer.contains(&shown) {
                        fail(format!("answer lacks the path edge {shown}"));
                    }
                }
            }
            "never_lists" | "never_lists_as_affected" => {
                for w in strings(&v) {
                    if r.answer.contains(&w) {
                        fail(format!("answer lists {w}"));
                    }
                }
            }
            "caveat_mentions" | "answer_mentions" => {
                for w in strings(&v) {
                    if !r.answer.contains(&w) {
                        fail(format!("answer does not mention {w}"));
                    }
                }
            }
            "never_mentions" => {
                for w in strings(&v) {
                    if everything.contains(&w) {
                        fail(format!("response mentions {w}"));
                    }
                }
            }
            "resolves" => {
                let scope = engine.scope(&who, now)?;
                for (alias, canonical) in v.as_mapping().cloned().unwrap_or_default() {
                    let (alias, canonical) = (
                        alias.as_str().unwrap_or_default(),
                        canonical.as_str().unwrap_or_default(),
                    );
                    let names: Vec<String> = engine
                        .entities_in(&scope, alias)?
                        .into_iter()
                        .map(|e| e.name)
                        .collect();
                    if !names.iter().any(|n| n == canonical) {
                        fail(format!("{alias} resolves to {names:?}, not {canonical}"));
                    }
                    if !r.answer.contains(canonical) {
                        fail(format!("answer does not name {canonical}"));
                    }
                }
            }
            "conflicts_reported" => {
                for d in strings(&v) {
                    if !r
                        .conflicts
                        .iter()
                        .any(|c| c.doc_id == d || c.conflicts_with.doc_id == d)
                    {
                        fail(format!("conflict with {d} not reported"));
                    }
                }
            }
            "uses_community_reports" => {
                if r.reports.is_empty()
                    || !r
                        .trace
                        .steps
                        .iter()
                        .any(|st| st.action == "community_reports")
                {
                    fail("no community reports used".into());
                }
            }
            "cites_trace_back_to_sources" => {
                for rep in &r.reports {
                    if rep.sources.is_empty()
                        || rep
                            .summary
                            .iter()
                            .any(|l| !rep.sources.contains(&l.chunk_id))
                    {
                        fail(format!(
                            "report {} does not list its sources",
                            rep.community_id
                        ));
                    }
                }
                let lineage: Vec<&String> = r.reports.iter().flat_map(|x| &x.sources).collect();
                if !r.citations.iter().any(|c| lineage.contains(&&c.chunk_id)) {
                    fail("no citation traces back to a report's sources".into());
                }
            }
            "no_edge_left_from" => {
                let d = v.as_str().unwrap_or_default();
                let scope = engine.scope(&who, now)?;
                let g = engine.graph_export(&scope)?;
                if g.edges
                    .iter()
                    .any(|e| e.provenance.iter().any(|p| p.starts_with(&format!("{d}@"))))
                {
                    fail(format!("an edge still cites {d}"));
                }
            }
            "no_community_report_built_from" => {
                let d = v.as_str().unwrap_or_default();
                let scope = engine.scope(&who, now)?;
                for rep in engine.community_reports(&scope)? {
                    if rep
                        .source_documents
                        .iter()
                        .any(|x| x.starts_with(&format!("{d}@")))
                    {
                        fail(format!("report {} built from {d}", rep.community_id));
                    }
                }
            }
            "llm" => {
                for w in strings(v.get("answer_says").unwrap_or(&Value::Null)) {
                    says_total += 1;
                    if r.answer.contains(&w) {
                        says_met += 1;
                    }
                }
            }
            other => fail(format!(
                "the runner does not know the expectation {other:?}"
            )),
        }
    }
    if r.status == AnswerStatus::InsufficientEvidence && !r.citations.is_empty() {
        failures.push("insufficient evidence, yet citations".into());
    }
    Ok(CaseOutcome {
        id,
        kind: s(case, "kind").unwrap_or_default().to_string(),
        lang: s(case, "lang").unwrap_or_default().to_string(),
        expected,
        response: r,
        failures,
        says_met,
        says_total,
    })
}

/// Pass figures over a set of cases. A case *passes* when every expectation holds.
/// Answerable cases expect `answered`; unanswerable ones expect a refusal
/// (`insufficient_evidence`, `partial` or `unavailable`), and are *declined* when the
/// answer is anything but `answered`.
#[derive(Debug, Default, Clone, PartialEq, Serialize)]
pub struct Tally {
    pub cases: usize,
    pub passed: usize,
    pub answerable: usize,
    /// Answerable cases whose status is `answered`.
    pub answerable_answered: usize,
    /// Answerable cases that pass: status, citations and the answer's key values.
    pub answerable_correct: usize,
    pub unanswerable: usize,
    /// Unanswerable cases not answered.
    pub unanswerable_declined: usize,
}

impl Tally {
    fn add(&mut self, o: &CaseOutcome) {
        self.cases += 1;
        let pass = o.failures.is_empty();
        self.passed += usize::from(pass);
        let answered = o.response.status == AnswerStatus::Answered;
        match o.expected {
            Some(AnswerStatus::Answered) => {
                self.answerable += 1;
                self.answerable_answered += usize::from(answered);
                self.answerable_correct += usize::from(pass);
            }
            Some(_) => {
                self.unanswerable += 1;
                self.unanswerable_declined += usize::from(!answered);
            }
            None => {}
        }
    }

    /// `part / whole` as a fraction, 0 for an empty whole.
    pub fn rate(part: usize, whole: usize) -> f64 {
        if whole == 0 {
            0.0
        } else {
            part as f64 / whole as f64
        }
    }
}

/// The figures of a run of cases, overall and by the cases' `kind` and `lang`.
#[derive(Debug, Default, Clone, Serialize)]
pub struct CaseReport {
    pub all: Tally,
    pub by_kind: BTreeMap<String, Tally>,
    pub by_lang: BTreeMap<String, Tally>,
    /// Each failed case's id and what failed.
    pub failed: Vec<(String, Vec<String>)>,
}

impl CaseReport {
    pub fn add(&mut self, o: &CaseOutcome) {
        self.all.add(o);
        self.by_kind.entry(o.kind.clone()).or_default().add(o);
        self.by_lang.entry(o.lang.clone()).or_default().add(o);
        if !o.failures.is_empty() {
            self.failed.push((o.id.clone(), o.failures.clone()));
        }
    }

    /// The report as a table: one row overall, then one per kind and per language.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{:<22} {:>6} {:>7} {:>9} {:>8} {:>9}\n",
            "", "cases", "pass", "answered", "correct", "declined"
        );
        let pct = |p, w| {
            if w == 0 {
                "-".to_string()
            } else {
                format!("{:.0}%", 100.0 * Tally::rate(p, w))
            }
        };
        let mut row = |name: &str, t: &Tally| {
            out.push_str(&format!(
                "{:<22} {:>6} {:>7} {:>9} {:>8} {:>9}\n",
                name,
                t.cases,
                pct(t.passed, t.cases),
                pct(t.answerable_answered, t.answerable),
                pct(t.answerable_correct, t.answerable),
                pct(t.unanswerable_declined, t.unanswerable),
            ));
        };
        row("all", &self.all);
        for (k, t) in &self.by_kind {
            row(&format!("kind {k}"), t);
        }
        for (k, t) in &self.by_lang {
            row(&format!("lang {k}"), t);
        }
        out
    }
}
