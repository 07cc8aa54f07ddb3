//! The scenario runner shared by the no-model and the model test: reads
//! ../shared/scenarios/scenarios.yaml, asks every case through the agent (with fault
//! injection where a case asks for it) and checks every expectation it names. An
//! expectation key the runner does not know fails the run, so no case is half-checked.

#![allow(dead_code)]

use std::path::PathBuf;

use chrono::NaiveDate;
use dossier_agent::{
    Agent, AnswerStatus, AskRequest, AskResponse, EngineTools, FaultInjector, ToolRunner,
    ToolStatus,
};
use dossier_engine::{Engine, Mode};
use serde_norway::Value;

pub fn shared() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/scenarios")
}

pub fn cases() -> Vec<Value> {
    let text = std::fs::read_to_string(shared().join("scenarios.yaml")).expect("scenarios.yaml");
    serde_norway::from_str::<Vec<Value>>(&text).expect("scenarios parse")
}

pub fn open_scenarios(dir: &std::path::Path) -> Engine {
    let engine = Engine::open(dossier_engine::dossier_store::testing::location(dir), "e5")
        .expect("e5 model (run scripts/setup-models)");
    let r = engine
        .ingest(&[shared().join("shop"), shared().join("acme")], &mut ())
        .unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    engine
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
pub struct Outcome {
    pub id: String,
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

pub fn ask(
    engine: &Engine,
    model: Option<&dyn dossier_llm::ChatModel>,
    who: &str,
    question: &str,
    clock: Clock,
    fault: Option<(&str, ToolStatus)>,
) -> AskResponse {
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
    agent.ask(&req).expect("ask")
}

fn cite_matches(c: &dossier_agent::Citation, want: &Value) -> bool {
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

/// Runs one case (a `steps` case mutates the engine: give it its own store).
pub fn run_case(
    engine: &Engine,
    model: Option<&dyn dossier_llm::ChatModel>,
    case: &Value,
) -> Outcome {
    let id = s(case, "id").unwrap_or("?").to_string();
    let expect = case.get("expect").cloned().unwrap_or(Value::Null);
    let mut failures = Vec::new();
    let (who, question, now, as_of, mode) = if let Some(steps) = case.get("steps") {
        let mut ask_step = None;
        for st in list(steps) {
            if let Some(d) = s(&st, "delete") {
                engine.delete(d, None).expect("delete step");
            }
            if let Some(a) = st.get("ask") {
                ask_step = Some(a.clone());
            }
        }
        let a = ask_step.expect("a steps case asks");
        (
            s(&a, "as").unwrap().to_string(),
            s(&a, "question").unwrap().to_string(),
            date(&a, "now").unwrap_or("2026-11-30".parse().unwrap()),
            date(&a, "as_of"),
            None,
        )
    } else {
        (
            s(case, "as").unwrap().to_string(),
            s(case, "question").unwrap().to_string(),
            date(case, "now").unwrap(),
            date(case, "as_of"),
            s(case, "mode").map(|m| m.parse::<Mode>().unwrap()),
        )
    };
    let fault = case.get("fault").map(|f| {
        let status = match s(f, "kind").unwrap() {
            "timeout" => ToolStatus::Timeout,
            "no_hit" => ToolStatus::NoHit,
            "forbidden" => ToolStatus::Forbidden,
            other => panic!("unknown fault kind {other}"),
        };
        (s(f, "tool").unwrap().to_string(), status)
    });
    let clock = Clock { now, as_of, mode };
    let r = ask(
        engine,
        model,
        &who,
        &question,
        clock,
        fault.as_ref().map(|(t, st)| (t.as_str(), *st)),
    );
    let everything = serde_json::to_string(&r).unwrap();
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
                let want = v.as_str().unwrap();
                let got = serde_json::to_value(r.status).unwrap();
                if got != want {
                    fail(format!("status {got} != {want}"));
                }
            }
            "record_read_first" => {
                let (t, key) = v.as_str().unwrap().split_once('/').unwrap();
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
                    let fk = fk.as_str().unwrap();
                    let want = serde_json::to_value(&fv).unwrap();
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
                    s(&v, "as").unwrap(),
                    s(&v, "question").unwrap(),
                    clock,
                    None,
                );
                if other.status != r.status || other.answer != r.answer {
                    fail(format!(
                        "differs from {v:?}: {:?} / {:?}",
                        other.status, other.answer
                    ));
                }
            }
            "tool_status_seen" => {
                let want: ToolStatus =
                    serde_json::from_value(serde_json::json!(v.as_str().unwrap())).unwrap();
                if !r.trace.steps.iter().any(|st| st.status == want) {
                    fail(format!("no step with status {want:?}"));
                }
            }
            "retries_at_most" => {
                let n = v.as_u64().unwrap() as usize;
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
                let scope = engine.scope(&who, now).unwrap();
                for (alias, canonical) in v.as_mapping().cloned().unwrap_or_default() {
                    let (alias, canonical) = (alias.as_str().unwrap(), canonical.as_str().unwrap());
                    let names: Vec<String> = engine
                        .entities_in(&scope, alias)
                        .unwrap()
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
                let d = v.as_str().unwrap();
                let scope = engine.scope(&who, now).unwrap();
                let g = engine.graph_export(&scope).unwrap();
                if g.edges
                    .iter()
                    .any(|e| e.provenance.iter().any(|p| p.starts_with(&format!("{d}@"))))
                {
                    fail(format!("an edge still cites {d}"));
                }
            }
            "no_community_report_built_from" => {
                let d = v.as_str().unwrap();
                let scope = engine.scope(&who, now).unwrap();
                for rep in engine.community_reports(&scope).unwrap() {
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
    Outcome {
        id,
        response: r,
        failures,
        says_met,
        says_total,
    }
}

/// Asks as `reader` on 2026-12-01 with the given tools and no model (page stores).
pub fn ask_with(engine: &Engine, tools: &dyn ToolRunner, question: &str) -> AskResponse {
    let agent = Agent {
        engine,
        tools,
        model: None,
    };
    let now: NaiveDate = "2026-12-01".parse().unwrap();
    agent
        .ask(&AskRequest::new("reader", question, now))
        .expect("ask")
}

/// Asked with the words judge alone deciding (no answer floor), so that what a test
/// checks is a words rule, not the embedder's scale.
pub fn ask_by_words(engine: &Engine, question: &str) -> AskResponse {
    ask_with(engine, &ReshapedTools::without_floor(engine), question)
}

/// English pages on other subjects, so that a test question's words are specific.
pub const SEASIDE_PAGES: &[(&str, &str, &str)] = &[
    (
        "ferry",
        "Harbour ferry",
        "The ferry leaves the old pier every hour for the islands, twice a day in winter.",
    ),
    (
        "market",
        "Fish market",
        "The fish market by the sea opens at five in the morning and closes at noon.",
    ),
    (
        "school",
        "River school",
        "The school by the estuary has four hundred pupils and a rowing club.",
    ),
    (
        "museum",
        "Town museum",
        "The museum shows coastal maps, model ships and the town's first printing press.",
    ),
];

/// Chinese pages on other subjects, as [`SEASIDE_PAGES`].
pub const SEASIDE_PAGES_ZH: &[(&str, &str, &str)] = &[
    (
        "ferry",
        "渡轮",
        "渡轮每小时从旧码头开往各个岛屿，冬季每天两班。",
    ),
    ("market", "鱼市", "海边的鱼市早上五点开门，中午关门。"),
    (
        "school",
        "学校",
        "河口旁的学校有四百名学生，还有一个划船俱乐部。",
    ),
    (
        "museum",
        "博物馆",
        "博物馆展出海岸地图、船模和镇上第一台印刷机。",
    ),
];

/// A real e5 store of Markdown pages `(id, title, text)` of tenant `t`, read by the
/// principal `reader`.
pub fn page_store(dir: &std::path::Path, pages: &[(&str, &str, &str)]) -> Engine {
    let docs = dir.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    for (id, title, text) in pages {
        page(&docs, id, title, text);
    }
    std::fs::write(
        docs.join("principals.yaml"),
        "principals:\n- {id: reader, tenant: t, groups: []}\n",
    )
    .unwrap();
    let engine = Engine::open(
        dossier_engine::dossier_store::testing::location(&dir.join("store")),
        "e5",
    )
    .expect("e5 model (run scripts/setup-models)");
    let r = engine.ingest(&[docs], &mut ()).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    engine
}

/// Writes a Markdown page of tenant `t` (version 1) into `dir`.
pub fn page(dir: &std::path::Path, id: &str, title: &str, text: &str) {
    std::fs::write(
        dir.join(format!("{id}.md")),
        format!(
            "---\nid: {id}\nversion: \"1\"\ntitle: {title}\ntenant: t\n---\n# {title}\n\n{text}\n"
        ),
    )
    .unwrap();
}

/// The real tools, except that the embedder's cosine scale is unknown (no answer
/// floor) and, with `similarity`, every passage is that close in meaning to anything:
/// what the meaning check offers as candidates is then all that decides.
pub struct ReshapedTools<'a> {
    pub inner: EngineTools<'a>,
    pub similarity: Option<f32>,
}

impl<'a> ReshapedTools<'a> {
    pub fn without_floor(engine: &'a Engine) -> Self {
        ReshapedTools {
            inner: EngineTools::new(engine),
            similarity: None,
        }
    }

    pub fn all_close(engine: &'a Engine) -> Self {
        ReshapedTools {
            inner: EngineTools::new(engine),
            similarity: Some(0.99),
        }
    }
}

impl ToolRunner for ReshapedTools<'_> {
    fn run(
        &self,
        scope: &dossier_engine::Scope,
        call: &dossier_agent::ToolCall,
        step: usize,
    ) -> dossier_agent::ToolOutput {
        self.inner.run(scope, call, step)
    }
    fn similarity(
        &self,
        scope: &dossier_engine::Scope,
        text: &str,
        passages: &[&str],
    ) -> Option<Vec<f32>> {
        match self.similarity {
            Some(s) => Some(vec![s; passages.len()]),
            None => self.inner.similarity(scope, text, passages),
        }
    }
    fn term_weights(
        &self,
        scope: &dossier_engine::Scope,
        text: &str,
    ) -> Option<Vec<(String, f32)>> {
        self.inner.term_weights(scope, text)
    }
    fn documents_named_by(
        &self,
        scope: &dossier_engine::Scope,
        chunks: &[&str],
    ) -> Vec<dossier_engine::NamedDocument> {
        self.inner.documents_named_by(scope, chunks)
    }
    fn passage_ranks(
        &self,
        scope: &dossier_engine::Scope,
        query: &str,
        documents: &[String],
        chunks: &[&str],
    ) -> Option<dossier_agent::tools::PassageRanks> {
        self.inner.passage_ranks(scope, query, documents, chunks)
    }
}
