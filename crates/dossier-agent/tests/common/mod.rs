//! What the agent's tests share: the shared scenarios and the enterprise set as stores,
//! their cases (run and checked by `dossier_agent::cases`), and small page stores.

#![allow(dead_code)]

use std::path::PathBuf;

use chrono::NaiveDate;
use dossier_agent::{Agent, AskRequest, AskResponse, EngineTools, ToolRunner, ToolStatus};
use dossier_engine::Engine;
use serde_norway::Value;

pub fn shared() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/scenarios")
}

/// ../shared/enterprise-dev: a company's documents, principals, records and cases.
pub fn enterprise() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/enterprise-dev")
}

/// A store of the enterprise set, as its README ingests it.
pub fn open_enterprise(dir: &std::path::Path) -> Engine {
    let engine = Engine::open(dossier_engine::dossier_store::testing::location(dir), "e5")
        .expect("e5 model (run scripts/setup-models)");
    let e = enterprise();
    let r = engine
        .ingest(
            &[e.join("docs"), e.join("principals.yaml"), e.join("records")],
            &mut (),
        )
        .unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    engine
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

pub use dossier_agent::cases::{CaseOutcome as Outcome, Clock};

/// Asks one question (a fault injected where asked); panics on an engine error.
pub fn ask(
    engine: &Engine,
    model: Option<&dyn dossier_llm::ChatModel>,
    who: &str,
    question: &str,
    clock: Clock,
    fault: Option<(&str, ToolStatus)>,
) -> AskResponse {
    dossier_agent::cases::ask(engine, model, who, question, clock, fault).expect("ask")
}

/// Runs one case and checks it (see `dossier_agent::cases::run_case`).
pub fn run_case(
    engine: &Engine,
    model: Option<&dyn dossier_llm::ChatModel>,
    case: &Value,
) -> Outcome {
    dossier_agent::cases::run_case(engine, model, case).expect("a well-formed case")
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
