//! The model's judgement of sufficiency (issue 18), through the whole ask loop with a
//! scripted model whose only calls are the judge's (planner, reranker and writer turned
//! off by the budget). A question whose words the evidence holds — but whose answer it
//! may not — is answered only when the model names words of the evidence; an empty
//! answer, or words from nowhere, make the agent abstain and the trace says why. The
//! model only narrows: what the rules left uncovered is never put to it. A failed call
//! leaves the rules' judgement standing.
//!
//! Also the model's other query-time part across languages (issue 14, item 6): a
//! question the first search left uncovered is searched again in the other language,
//! as the model translates it, and the trace says why; what that search finds is
//! ranked against the translation, not the question it cannot share words with.

mod common;

use common::page;
use dossier_agent::{Agent, AnswerStatus, AskRequest, AskResponse, Budget, EngineTools};
use dossier_engine::Engine;
use dossier_llm::{ChatResponse, LlmError, ScriptedChat};

const QUESTION: &str = "Who designed the Norport Harbour Bridge?";

/// The bridge's page says it was designed by the harbour office, when it opened and where
/// it stands, and never names a designer: the rules see the question's words and its
/// relation said with an agent, so only the model's judgement can tell the answer is
/// not there. Other pages make the words specific.
fn engine(dir: &std::path::Path) -> Engine {
    engine_with(dir, &[])
}

/// As [`engine`], with `extra` pages (id, title, text) beside the town's.
fn engine_with(dir: &std::path::Path, extra: &[(&str, &str, &str)]) -> Engine {
    let docs = dir.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    for (id, title, text) in extra {
        page(&docs, id, title, text);
    }
    page(
        &docs,
        "bridge",
        "Bridges of the estuary",
        "The Norport Harbour Bridge was designed by the harbour office for four lanes and \
         opened in 1931. \
         The harbour bridge at Norport spans the Vell estuary.",
    );
    for (id, title, text) in [
        (
            "ferry",
            "Ferries",
            "Ferries leave the old quay for the islands every hour in summer.",
        ),
        (
            "market",
            "Fish market",
            "The fish market opens at five in the morning and closes at noon.",
        ),
        (
            "school",
            "School",
            "The school teaches four hundred pupils and has a rowing club.",
        ),
        (
            "museum",
            "Museum",
            "The museum shows maps of the coast and the first printing press.",
        ),
    ] {
        page(&docs, id, title, text);
    }
    std::fs::write(
        docs.join("principals.yaml"),
        "principals:\n- {id: reader, tenant: t, groups: []}\n",
    )
    .unwrap();
    let engine = Engine::with_embedder(
        dir.join("store"),
        "hash:64",
        Box::new(dossier_embed::HashEmbedder::new(64)),
    )
    .unwrap();
    let r = engine.ingest(&[docs], &mut ()).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    engine
}

/// Only the judge may call the model.
fn judge_only(judge_calls: usize) -> Budget {
    Budget {
        max_planner_calls: 0,
        max_model_reranks: 0,
        max_writer_calls: 0,
        max_judge_calls: judge_calls,
        max_translate_calls: 0,
        ..Budget::default()
    }
}

fn ask(engine: &Engine, model: Option<&ScriptedChat>, q: &str, budget: Budget) -> AskResponse {
    let tools = EngineTools::new(engine);
    let agent = Agent {
        engine,
        tools: &tools,
        model: model.map(|m| m as &dyn dossier_llm::ChatModel),
    };
    let mut req = AskRequest::new("reader", q, "2026-11-30".parse().unwrap());
    req.budget = budget;
    agent.ask(&req).unwrap()
}

fn doubt(r: &AskResponse) -> String {
    r.trace.sub_questions[0].doubt.clone().unwrap_or_default()
}

#[test]
fn the_rules_alone_take_shared_words_for_an_answer() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path());
    let r = ask(&engine, None, QUESTION, Budget::default());
    assert_eq!(r.status, AnswerStatus::Answered, "{r:#?}");
    assert_eq!(r.short_answer, None);
}

#[test]
fn no_answer_or_words_from_nowhere_make_the_agent_abstain_and_the_trace_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path());
    for (reply, why) in [
        (r#"{"answer": ""}"#, "found no answer"),
        (r#"{"answer": "John Bradfield"}"#, "\"John Bradfield\""),
    ] {
        let chat = ScriptedChat::new([ChatResponse::text(reply)]);
        let r = ask(&engine, Some(&chat), QUESTION, judge_only(3));
        assert_eq!(
            r.status,
            AnswerStatus::InsufficientEvidence,
            "{reply}: {r:#?}"
        );
        assert!(r.citations.is_empty());
        assert_eq!(r.short_answer, None);
        assert!(doubt(&r).contains(why), "{}", doubt(&r));
        assert!(!r.trace.sub_questions[0].covered);
        assert_eq!(chat.requests().len(), 1, "one judgement per sub-question");
        // The evidence was shown fenced, the question with it.
        let prompt = &chat.requests()[0].messages[1].content;
        assert!(prompt.contains(QUESTION) && prompt.contains("<<<EVIDENCE"));
        assert!(prompt.contains("opened in 1931"), "{prompt}");
    }
}

#[test]
fn words_the_evidence_holds_answer_and_are_the_short_answer() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path());
    // The program checks that the words are the evidence's, not that they are right:
    // a model that misreads the evidence is caught only where its words are not there.
    let chat = ScriptedChat::new([ChatResponse::text(r#"{"answer": "Vell estuary"}"#)]);
    let r = ask(&engine, Some(&chat), QUESTION, judge_only(3));
    assert_eq!(r.status, AnswerStatus::Answered, "{r:#?}");
    let short = r.short_answer.expect("short answer");
    assert_eq!(short.text, "Vell estuary");
    assert_eq!(short.checked_by, "evidence");
    assert!(short.chunk_id.unwrap().starts_with("bridge@"));
    assert_eq!(r.trace.sub_questions[0].doubt, None);
}

#[test]
fn the_model_is_not_asked_without_budget_or_about_what_the_rules_left_uncovered() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path());
    let chat = ScriptedChat::new([]);
    let r = ask(&engine, Some(&chat), QUESTION, judge_only(0));
    assert_eq!(r.status, AnswerStatus::Answered);
    assert!(chat.requests().is_empty());
    assert!(r
        .trace
        .degraded
        .iter()
        .any(|d| d.contains("judgement budget")));
    // Nothing in the corpus has these words: uncovered by the rules, never judged.
    let chat = ScriptedChat::new([ChatResponse::text(r#"{"answer": "Paris"}"#)]);
    let r = ask(
        &engine,
        Some(&chat),
        "Which volcano erupted over Quillan glacier?",
        judge_only(3),
    );
    assert_eq!(r.status, AnswerStatus::InsufficientEvidence);
    assert!(chat.requests().is_empty(), "{:?}", chat.requests());
}

#[test]
fn a_failed_or_unreadable_judgement_leaves_the_rules_standing() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path());
    let chat = ScriptedChat::new([]);
    chat.push_error(LlmError::Script("down".into()));
    let r = ask(&engine, Some(&chat), QUESTION, judge_only(3));
    assert_eq!(r.status, AnswerStatus::Answered);
    assert!(r.trace.degraded.iter().any(|d| d.contains("judgement")));
    let chat = ScriptedChat::new([ChatResponse::text("Lena Marsh")]);
    let r = ask(&engine, Some(&chat), QUESTION, judge_only(3));
    assert_eq!(r.status, AnswerStatus::Answered);
    assert!(r.trace.degraded.iter().any(|d| d.contains("unreadable")));
}

#[test]
fn a_question_the_first_search_left_uncovered_is_searched_in_the_other_language() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path());
    let chat = ScriptedChat::new([ChatResponse::text(
        r#"{"translation": "When did the Norport Harbour Bridge open?"}"#,
    )]);
    let budget = Budget {
        max_translate_calls: 1,
        ..judge_only(0)
    };
    let r = ask(
        &engine,
        Some(&chat),
        "北港海港大桥是哪一年通车的？",
        budget.clone(),
    );
    assert_eq!(chat.requests().len(), 1);
    assert!(chat.requests()[0].messages[1]
        .content
        .contains("into English"));
    let step = r
        .trace
        .steps
        .iter()
        .find(|s| s.proposed_by == "model")
        .expect("the translated search ran");
    assert_eq!(
        step.args["query"],
        "When did the Norport Harbour Bridge open?"
    );
    assert!(
        step.why.as_deref().unwrap().contains("translation"),
        "{step:?}"
    );
    assert!(
        step.evidence.iter().any(|c| c.starts_with("bridge@")),
        "{step:?}"
    );
    // A failed translation is a degradation; no budget, no call.
    let chat = ScriptedChat::new([ChatResponse::text(r#"{"translation": "北港海港大桥"}"#)]);
    let r = ask(&engine, Some(&chat), "北港海港大桥是哪一年通车的？", budget);
    assert!(
        r.trace.degraded.iter().any(|d| d.contains("translation")),
        "{:?}",
        r.trace.degraded
    );
    assert!(r.trace.steps.iter().all(|s| s.proposed_by != "model"));
    let chat = ScriptedChat::new([]);
    ask(
        &engine,
        Some(&chat),
        "北港海港大桥是哪一年通车的？",
        judge_only(0),
    );
    assert!(chat.requests().is_empty());
}

/// The translated search's finds are ranked against the translation: an English page
/// found by it stands right after the first search's lead, ahead of the Chinese pages
/// the first search found but that do not answer (ranked against the Chinese question,
/// they would take every place above it).
#[test]
fn what_the_translated_search_finds_is_ranked_against_the_translation() {
    let dir = tempfile::tempdir().unwrap();
    let pages: Vec<(String, String, String)> = (0..8)
        .map(|i| {
            (
                format!("zh{i}"),
                format!("港口{i}"),
                format!("北港第{i}号码头每天早上装卸渔船，码头旁有一座仓库。"),
            )
        })
        .collect();
    let extra: Vec<(&str, &str, &str)> = pages
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
        .collect();
    let engine = engine_with(dir.path(), &extra);
    let chat = ScriptedChat::new([ChatResponse::text(
        r#"{"translation": "When did the Norport Harbour Bridge open?"}"#,
    )]);
    let budget = Budget {
        max_translate_calls: 1,
        ..judge_only(0)
    };
    let r = ask(&engine, Some(&chat), "北港海港大桥是哪一年通车的？", budget);
    let first: Vec<&String> = r.trace.steps[0].evidence.iter().collect();
    assert!(
        first.iter().filter(|c| c.starts_with("zh")).count() >= 2,
        "the first search finds the Chinese pages: {first:?}"
    );
    let order: Vec<&str> = r
        .trace
        .rerank
        .after
        .iter()
        .map(|x| x.chunk_id.as_str())
        .collect();
    let at = order
        .iter()
        .position(|c| c.starts_with("bridge@"))
        .expect("the translated search found the bridge");
    assert!(at <= 1, "the bridge's page is ranked {at}: {order:?}");
}
