//! When Chinese evidence answers a Chinese question (issue 18, items 3 and 6), on real
//! e5 stores:
//! - a sentence that shares the question's characters one by one, but not its pairs
//!   (an unknown name split into single characters, 班 · 杰), is no answer, nor is a
//!   document that does not say the subject the question opens with, and the trace says
//!   why; the sentence that says it is;
//! - a Latin fragment inside a Chinese passage ("（学名：Coronosauria）") is not a
//!   passage in another language, so meaning cannot cover the question through it,
//!   nor does a whole English passage on its own (the one decision weighs it);
//! - a theme question without `--mode global` is routed to the community reports and
//!   answered from them when a report speaks of it (one of its character pairs), and
//!   not when none does.

mod common;

use common::{ask_with, page_store, ReshapedTools, SEASIDE_PAGES_ZH};
use dossier_agent::{AnswerStatus, EngineTools, RouteClass};

/// Pages on births elsewhere, so that 出生 is a common word.
const BIRTH_PAGES: &[(&str, &str, &str)] = &[
    (
        "births",
        "人口",
        "镇上的孩子大多在渔村出生，也有人在县城医院出生。",
    ),
    ("families", "家族", "这个家族的人都在河口出生。"),
    ("registry", "户籍", "户籍登记写明每个人在哪里出生。"),
];

/// The seaside pages and the birth pages.
fn others() -> Vec<(&'static str, &'static str, &'static str)> {
    [SEASIDE_PAGES_ZH, BIRTH_PAGES].concat()
}

#[test]
fn characters_shared_one_by_one_are_no_answer_and_the_pair_that_says_it_is() {
    // Every word of the question is in one sentence (班, 杰, 出生), its pairs are not.
    let scattered = (
        "players",
        "选手",
        "班和杰都在这个村庄出生，后来都加入了县里的足球队。",
    );
    let dir = tempfile::tempdir().unwrap();
    let mut pages = others();
    pages.push(scattered);
    let engine = page_store(dir.path(), &pages);
    // "请问" opens with no subject: the pairs alone say the page is no answer. Without
    // it, the question opens with 班杰, which no found document says.
    for (question, why) in [
        ("请问班杰在哪里出生？", "character pairs"),
        ("班杰在哪里出生？", "“班杰”"),
    ] {
        let r = ask_with(&engine, &EngineTools::new(&engine), question);
        let sq = &r.trace.sub_questions[0];
        assert_eq!(r.status, AnswerStatus::InsufficientEvidence, "{}", r.answer);
        assert!(!sq.covered && r.citations.is_empty());
        assert!(!sq.evidence.is_empty(), "the scattered page was found");
        let doubt = sq.doubt.as_deref().expect("the trace says why");
        assert!(doubt.contains(why), "{question}: {doubt}");
    }

    let dir = tempfile::tempdir().unwrap();
    pages.push((
        "banjie",
        "班杰",
        "班杰，1950年出生在海港城市泉州，少年时随家人迁居厦门。",
    ));
    let engine = page_store(dir.path(), &pages);
    let r = ask_with(&engine, &EngineTools::new(&engine), "班杰在哪里出生？");
    assert_eq!(r.status, AnswerStatus::Answered, "{}", r.answer);
    assert!(r.answer.contains("泉州"), "{}", r.answer);
    assert!(r.trace.sub_questions[0].doubt.is_none());
}

#[test]
fn a_latin_fragment_of_a_chinese_passage_is_no_evidence_in_another_language() {
    let question = "结头龙属生存于什么时期？";
    let fragment = (
        "horned",
        "冠饰角龙类",
        "冠饰角龙类是角龙下目的一个演化支。Coronosauria was named in 1986 by Sereno。冠饰角龙类的头盾非常大。",
    );
    let dir = tempfile::tempdir().unwrap();
    // Few pages, so that the search returns the English one below too.
    let mut pages = SEASIDE_PAGES_ZH.to_vec();
    pages.push(fragment);
    let engine = page_store(dir.path(), &pages);
    let r = ask_with(&engine, &ReshapedTools::all_close(&engine), question);
    let sq = &r.trace.sub_questions[0];
    assert!(!sq.evidence.is_empty(), "the page was found");
    assert_eq!(r.status, AnswerStatus::InsufficientEvidence, "{}", r.answer);
    assert_ne!(sq.judged_by.as_deref(), Some("meaning"));

    // Nor is a whole passage in English, however close the embedder rates it, on its
    // own: evidence in another language is weighed by the one sufficiency decision like
    // any other (no separate rule covers a question with any other-language sentence
    // within a cosine; issue 40), and no found document says the subject (结头).
    let dir = tempfile::tempdir().unwrap();
    pages.push((
        "knot",
        "Knot-headed lizard",
        "The knot-headed lizard genus lived in the Late Cretaceous, about seventy million years ago, in what is now Asia.",
    ));
    let engine = page_store(dir.path(), &pages);
    let r = ask_with(&engine, &ReshapedTools::all_close(&engine), question);
    let sq = &r.trace.sub_questions[0];
    assert!(sq.evidence.iter().any(|e| e.starts_with("knot@")), "{sq:?}");
    assert_eq!(r.status, AnswerStatus::InsufficientEvidence, "{}", r.answer);
    assert!(sq.fit.is_some(), "the decision judged it: {sq:?}");
    assert!(sq.doubt.is_some(), "and says why not: {sq:?}");
}

#[test]
fn a_theme_question_is_answered_from_the_reports_without_mode_global() {
    let dir = tempfile::tempdir().unwrap();
    let engine = common::open_scenarios(dir.path());
    let clock = common::Clock {
        now: "2026-11-30".parse().unwrap(),
        as_of: None,
        mode: None,
    };
    // A theme question, with no mode given: the router sends it to the reports, and
    // they answer it.
    let r = common::ask(
        &engine,
        None,
        "oncall",
        "支付相关的主要稳定性风险有哪些？",
        clock,
        None,
    );
    assert_eq!(r.trace.route.class, RouteClass::Global);
    assert_ne!(r.status, AnswerStatus::InsufficientEvidence, "{}", r.answer);
    assert!(!r.citations.is_empty(), "{}", r.answer);

    // A theme word about something no report speaks of: the router still sends it to
    // the reports, but they do not answer it.
    let r = common::ask(
        &engine,
        None,
        "oncall",
        "林黛玉的主要诗作有哪些？",
        clock,
        None,
    );
    assert_eq!(r.trace.route.class, RouteClass::Global);
    assert_eq!(r.status, AnswerStatus::InsufficientEvidence, "{}", r.answer);
    assert!(r.citations.is_empty(), "{:?}", r.citations);
}
