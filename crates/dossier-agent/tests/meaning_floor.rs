//! Sufficiency by meaning as well as words (issue 18, item 6), on a real e5 store:
//! evidence that holds every word of an English question, but about another subject
//! (another town's harbour bridge, the town's harbour), is not taken as an answer — the
//! sub-question is uncovered again, the answer says the evidence is insufficient and the
//! trace says why — while the same corpus with the answering page added is answered
//! from it. e5-small's cosine follows the subject more than the predicate: a sentence on
//! the right bridge that does not say who designed it still passes (BENCHMARKS.md).
//! Without an embedder floor (any model whose cosine scale is unmeasured) the words
//! decide alone, as before. With a model, a question the meaning check uncovered (after
//! the search loop) still gets its search in the other language (issue 14, item 6).

mod common;

use common::ReshapedTools;
use dossier_agent::{Agent, AnswerStatus, AskRequest, AskResponse, EngineTools, ToolRunner};
use dossier_engine::Engine;

/// Written without the bridge's name in capitals, so that the name rule (the evidence
/// must name "Norport Harbour Bridge") does not decide first; that rule is tested on
/// the question as a name at the end.
const QUESTION: &str = "Who designed the harbour bridge of Norport?";
const NAMED: &str = "Who designed the Norport Harbour Bridge?";
const ANSWER: &str = "The Norport Harbour Bridge was designed by the engineer Lena Marsh.";

/// A small coast's pages: another harbour bridge (its designer named), the towns of
/// the estuary (Norport's harbour, not its bridge), with `with_answer` the Norport
/// bridge's own page, and pages on other subjects so that the question's words are
/// specific. No page is titled with a name the question holds: the graph relates
/// nothing the question names (a sub-question whose entities the graph relates is
/// judged by its words alone, see `judge_by_meaning`).
fn corpus(dir: &std::path::Path, with_answer: bool) -> Engine {
    let mut pages = vec![
        (
            "kelso-bridge",
            "Kelso Harbour Bridge",
            "The Kelso Harbour Bridge in Vell was designed by the engineer Tomas Reyl. It \
             opened in 1931 and carries four lanes.",
        ),
        (
            "towns",
            "Towns of the estuary",
            "Norport is a fishing town on the Vell estuary with a busy harbour.",
        ),
    ];
    if with_answer {
        pages.push(("bridge", "Norport Harbour Bridge", ANSWER));
    }
    pages.extend([
        ("ferry", "Norport ferries", "Ferries leave the old quay for the islands every hour in summer and twice a day in winter."),
        ("market", "Fish market", "The fish market on the harbour front opens at five in the morning and closes at noon."),
        ("school", "Vell school", "The school by the estuary teaches four hundred pupils and has a rowing club."),
        ("museum", "Town museum", "The museum shows maps of the coast, ship models and the town's first printing press."),
        ("park", "Cliff park", "The cliff park has walking paths, a lighthouse and a view over the bay."),
    ]);
    common::page_store(dir, &pages)
}

fn ask(engine: &Engine, tools: &dyn ToolRunner) -> AskResponse {
    common::ask_with(engine, tools, QUESTION)
}

#[test]
fn words_without_meaning_are_no_answer_and_the_trace_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let engine = corpus(dir.path(), false);
    let tools = EngineTools::new(&engine);

    // The question's words are all in the evidence, but about another bridge.
    let r = ask(&engine, &tools);
    let sq = &r.trace.sub_questions[0];
    assert_eq!(r.status, AnswerStatus::InsufficientEvidence, "{}", r.answer);
    assert!(!sq.covered);
    let doubt = sq.doubt.as_deref().expect("the trace says why");
    assert!(doubt.contains("close to it in meaning"), "{doubt}");
    assert!(r.citations.is_empty());
    assert!(r.trace.sub_questions[0]
        .evidence
        .iter()
        .any(|c| c.starts_with("kelso-bridge@")));
    assert!(r.trace.sub_questions[0]
        .evidence
        .iter()
        .any(|c| c.starts_with("towns@")));

    // Without a floor the words decide: the same evidence passes for an answer.
    let r = ask(&engine, &ReshapedTools::without_floor(&engine));
    assert_ne!(r.status, AnswerStatus::InsufficientEvidence, "{}", r.answer);
    assert!(r.trace.sub_questions[0].doubt.is_none());
}

#[test]
fn a_sentence_that_answers_passes_the_floor() {
    let dir = tempfile::tempdir().unwrap();
    let engine = corpus(dir.path(), true);
    let r = ask(&engine, &EngineTools::new(&engine));
    let sq = &r.trace.sub_questions[0];
    assert_eq!(r.status, AnswerStatus::Answered, "{}", r.answer);
    assert!(sq.covered && sq.doubt.is_none(), "{:?}", sq.doubt);
    assert!(r.answer.contains("Lena Marsh"), "{}", r.answer);
    assert!(r.citations.iter().any(|c| c.doc_id == "bridge"));
}

#[test]
fn the_floor_is_known_for_english_on_e5_only() {
    let dir = tempfile::tempdir().unwrap();
    // The floor is the embedder's: an empty store is enough.
    let engine = Engine::open(
        dossier_engine::dossier_store::testing::location(&dir.path().join("e5")),
        "e5",
    )
    .expect("e5 model (run scripts/setup-models)");
    let floor = engine.answer_floor(false).expect("e5 has an English floor");
    assert!((0.5..1.0).contains(&floor));
    // Chinese cosines move with the genre on e5-small: no floor (BENCHMARKS.md).
    assert_eq!(engine.answer_floor(true), None);
    let other = Engine::open(
        dossier_engine::dossier_store::testing::location(&dir.path().join("hash")),
        "hash:64",
    )
    .unwrap();
    assert_eq!(other.answer_floor(false), None);
}

#[test]
fn a_question_the_meaning_check_uncovered_is_searched_in_the_other_language() {
    let dir = tempfile::tempdir().unwrap();
    let engine = corpus(dir.path(), false);
    let tools = EngineTools::new(&engine);
    let chat = dossier_llm::ScriptedChat::new([dossier_llm::ChatResponse::text(
        r#"{"translation": "北港海港大桥是谁设计的？"}"#,
    )]);
    let agent = Agent {
        engine: &engine,
        tools: &tools,
        model: Some(&chat),
    };
    let mut req = AskRequest::new("reader", QUESTION, "2026-12-01".parse().unwrap());
    // Only the translation may call the model.
    req.budget = dossier_agent::Budget {
        max_planner_calls: 0,
        max_model_reranks: 0,
        max_writer_calls: 0,
        max_judge_calls: 0,
        max_translate_calls: 1,
        ..Default::default()
    };
    let r = agent.ask(&req).expect("ask");
    let sq = &r.trace.sub_questions[0];
    assert!(!sq.covered);
    assert!(
        sq.doubt.as_deref().unwrap_or("").contains("meaning"),
        "{sq:?}"
    );
    assert_eq!(chat.requests().len(), 1, "{:?}", r.trace.degraded);
    assert!(chat.requests()[0].messages[1]
        .content
        .contains("into Chinese"));
    let step = r
        .trace
        .steps
        .iter()
        .find(|s| s.proposed_by == "model")
        .expect("the translated search ran after the meaning check");
    assert_eq!(step.args["query"], "北港海港大桥是谁设计的？");
    assert!(
        step.why.as_deref().unwrap().contains("translation"),
        "{step:?}"
    );
    assert_eq!(r.status, AnswerStatus::InsufficientEvidence, "{}", r.answer);
}

#[test]
fn a_named_thing_the_evidence_does_not_name_is_no_answer_and_the_trace_says_which() {
    let dir = tempfile::tempdir().unwrap();
    let engine = corpus(dir.path(), false);
    // Without a floor, so that only the words and the name decide: every word of the
    // name is in the evidence ("Norport", "Kelso Harbour Bridge"), the name is not.
    let r = common::ask_with(&engine, &ReshapedTools::without_floor(&engine), NAMED);
    let sq = &r.trace.sub_questions[0];
    assert_eq!(r.status, AnswerStatus::InsufficientEvidence, "{}", r.answer);
    assert!(!sq.covered && r.citations.is_empty());
    let doubt = sq.doubt.as_deref().expect("the trace says why");
    assert!(
        doubt.contains("does not name") && doubt.contains("norport harbour bridge"),
        "{doubt}"
    );
    // The same question as a lower-case phrase is judged by its words: they pass.
    let r = ask(&engine, &ReshapedTools::without_floor(&engine));
    assert_ne!(r.status, AnswerStatus::InsufficientEvidence, "{}", r.answer);

    // With the bridge's own page, the name is there and the question is answered.
    let dir = tempfile::tempdir().unwrap();
    let engine = corpus(dir.path(), true);
    let r = common::ask_with(&engine, &EngineTools::new(&engine), NAMED);
    let sq = &r.trace.sub_questions[0];
    assert_eq!(r.status, AnswerStatus::Answered, "{}", r.answer);
    assert!(sq.covered && sq.doubt.is_none(), "{:?}", sq.doubt);
    assert!(r.answer.contains("Lena Marsh"), "{}", r.answer);
}
